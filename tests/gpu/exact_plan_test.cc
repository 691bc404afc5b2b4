// Host-side planning of the exact-type kernels (backends/cuda/exact_layers.h), checked without a
// GPU: the broadcast strides a kernel walks reproduce numpy broadcasting for every output index
// (the index each operand element is read from, computed independently from the coordinates),
// and shapes that do not broadcast are refused.
#include <gtest/gtest.h>

#include <vector>

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/exact_layers.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
// Row-major offset of output coordinate `c` read from an operand of shape `in` (right-aligned,
// size-1 dims pinned to 0): numpy's rule, written from the coordinates.
int64_t numpy_offset(const std::vector<int64_t>& c, const Shape& in) {
  const size_t lead = c.size() - in.size();
  int64_t off = 0;
  for (size_t i = 0; i < in.size(); ++i) off = off * in[i] + (in[i] == 1 ? 0 : c[lead + i]);
  return off;
}

// The offset the kernels compute: the flat output index decomposed over d.out_dims, dotted with
// the strides (kernels_exact.cu elementwise_kernel / select_kernel).
int64_t kernel_offset(int64_t i, const cuda::BroadcastDesc& d, const int64_t* strides) {
  int64_t off = 0;
  for (int k = d.rank - 1; k >= 0; --k) {
    off += (i % d.out_dims[k]) * strides[k];
    i /= d.out_dims[k];
  }
  return off;
}
#endif

TEST(ExactPlan, BroadcastStridesFollowNumpy) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {{{2, 3, 4}, {3, 1}, {2, 3, 4}},       {{2, 1, 1, 5}, {1, 1, 5, 1}, {2, 1, 5, 5}},
                        {{}, {4, 6}, {4, 6}},                 {{7}, {}, {7}},
                        {{1}, {1}, {1}},                      {{2, 1, 3, 1, 2, 1}, {1, 4, 1, 5}, {2, 1, 3, 4, 2, 5}},
                        {{}, {}, {}}};
  for (const Case& k : cases) {
    auto d = cuda::broadcast_desc(k.a, k.b, k.out);
    ASSERT_TRUE(d.ok()) << shape_str(k.a) << " " << shape_str(k.b) << ": " << d.status().to_string();
    auto cs = cuda::broadcast_strides(k.b, k.out);
    ASSERT_TRUE(cs.ok());
    const int64_t total = shape_numel(k.out);
    for (int64_t i = 0; i < total; ++i) {
      std::vector<int64_t> c(k.out.size());
      for (size_t j = k.out.size(), rem = static_cast<size_t>(i); j-- > 0;) {
        c[j] = static_cast<int64_t>(rem) % k.out[j];
        rem /= static_cast<size_t>(k.out[j]);
      }
      ASSERT_EQ(kernel_offset(i, *d, d->a_strides), numpy_offset(c, k.a)) << shape_str(k.a) << " -> " << shape_str(k.out);
      ASSERT_EQ(kernel_offset(i, *d, d->b_strides), numpy_offset(c, k.b)) << shape_str(k.b) << " -> " << shape_str(k.out);
      ASSERT_EQ(kernel_offset(i, *d, cs->data()), numpy_offset(c, k.b));
    }
  }
  EXPECT_FALSE(cuda::broadcast_desc({2, 3}, {4, 3}, {2, 3}).ok());
  EXPECT_FALSE(cuda::broadcast_strides({2, 3, 4}, {3, 4}).ok());
  EXPECT_FALSE(cuda::broadcast_strides({1}, {1, 1, 1, 1, 1, 1, 1, 1, 1}).ok());  // rank above kMaxRank (8)
#endif
}

}  // namespace
}  // namespace kiln::testing
