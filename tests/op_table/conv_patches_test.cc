// The patchify conv's plan without a GPU (docs/decisions/0083): for convs whose kernel equals their
// stride, the strided copies plan_conv_patches describes, with the GEMM over the windows written
// out on the host (double sums, the weight in the order lower_conv uploads it: KRSC for NHWC,
// KCRS for NCHW), reproduce the CPU reference convolution; and conv_is_patchify takes exactly
// those convs.
#include <gtest/gtest.h>

#include <functional>

#include "op_table/op_table.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_layers.h"
#include "op_table/cuda_emulation.h"
#endif

namespace kiln::testing::op_table {
namespace {

#ifdef KILN_HAVE_CUDA
struct PatchCase {
  int64_t n, c, h, w, k, kh, kw;
};

cuda::ConvParams params_of(const PatchCase& a) {
  cuda::ConvParams p{};
  p.n = a.n; p.c = a.c; p.h = a.h; p.w = a.w; p.k = a.k; p.r = a.kh; p.sk = a.kw;
  p.oh = a.h / a.kh; p.ow = a.w / a.kw;
  p.stride_h = a.kh; p.stride_w = a.kw; p.dil_h = p.dil_w = 1; p.groups = 1;
  return p;
}

// x [N, C, H, W] -> [N, H, W, C].
Tensor to_nhwc(const Tensor& x) {
  const Shape& s = x.shape();
  Tensor y(DataType::kFloat32, {s[0], s[2], s[3], s[1]});
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t h = 0; h < s[2]; ++h)
        for (int64_t w = 0; w < s[3]; ++w)
          y.data<float>()[((n * s[2] + h) * s[3] + w) * s[1] + c] = x.data<float>()[((n * s[1] + c) * s[2] + h) * s[3] + w];
  return y;
}

// The conv as the patchify GEMM, planned for `nhwc`, emulated on the host; NCHW result.
Tensor patchify_conv(const PatchCase& a, const Tensor& x, const Tensor& w, const Tensor& b, bool nhwc) {
  const cuda::ConvParams p = params_of(a);
  const cuda::ConvPatches plan = cuda::plan_conv_patches(p, nhwc);
  EXPECT_TRUE(plan.on);
  EXPECT_EQ(plan.nchw, !nhwc);
  const Tensor P = emulate_strided_copy(plan.gather, nhwc ? to_nhwc(x) : x);
  const int64_t M = p.n * p.oh * p.ow, K = p.c * p.r * p.sk;
  EXPECT_EQ(P.numel(), M * K);
  // The weight as lower_conv uploads it: KRSC (NHWC) or KCRS (NCHW), i.e. [k, K] rows.
  std::vector<float> wk(static_cast<size_t>(p.k * K));
  for (int64_t o = 0; o < p.k; ++o)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t r = 0; r < p.r; ++r)
        for (int64_t s = 0; s < p.sk; ++s) {
          const float v = w.data<float>()[((o * p.c + c) * p.r + r) * p.sk + s];
          wk[static_cast<size_t>(o * K + (nhwc ? (r * p.sk + s) * p.c + c : (c * p.r + r) * p.sk + s))] = v;
        }
  Tensor g(DataType::kFloat32, {p.n, p.oh * p.ow, p.k});  // the GEMM's [M, k] output
  for (int64_t m = 0; m < M; ++m)
    for (int64_t o = 0; o < p.k; ++o) {
      double acc = b.data<float>()[o];
      for (int64_t j = 0; j < K; ++j) acc += double(P.data<float>()[m * K + j]) * wk[static_cast<size_t>(o * K + j)];
      g.data<float>()[m * p.k + o] = static_cast<float>(acc);
    }
  if (!nhwc) {
    Tensor y = emulate_strided_copy(plan.scatter, g);
    return y.reshaped({p.n, p.k, p.oh, p.ow});
  }
  // NHWC: the GEMM's output is Y [N, OH, OW, K] itself; back to NCHW for the comparison.
  Tensor y(DataType::kFloat32, {p.n, p.k, p.oh, p.ow});
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t q = 0; q < p.oh * p.ow; ++q)
      for (int64_t o = 0; o < p.k; ++o) y.data<float>()[(n * p.k + o) * p.oh * p.ow + q] = g.data<float>()[(n * p.oh * p.ow + q) * p.k + o];
  return y;
}

TEST(ConvPatches, GemmOverWindowsMatchesReferenceConv) {
  const PatchCase cases[] = {
      {2, 3, 32, 32, 24, 16, 16},  // ViT-B/16's patch embedding, smaller
      {1, 4, 12, 12, 16, 4, 4},    // C = 4, batch 1
      {2, 3, 8, 13, 8, 2, 3},      // non-square kernel; 13 is not a multiple of 3: the last column is not read
      {1, 5, 9, 8, 7, 3, 1},       // a 3x1 kernel; 9 rows
  };
  uint32_t seed = 500;
  for (const PatchCase& a : cases) {
    const Shape xs = {a.n, a.c, a.h, a.w}, ys = {a.n, a.k, a.h / a.kh, a.w / a.kw};
    const Tensor x = random_tensor(xs, seed++), w = random_tensor({a.k, a.c, a.kh, a.kw}, seed++, -0.3f, 0.3f),
                 b = random_tensor({a.k}, seed++);
    TinyGraph t;
    auto xv = t.input("x", xs);
    t.g.outputs = {t.node(ir::OpKind::kConv, "conv", {xv, t.constant("w", w), t.constant("b", b)}, ys,
                          {{"kernel_shape", ir::Attribute::of_ints({a.kh, a.kw})},
                           {"strides", ir::Attribute::of_ints({a.kh, a.kw})}})};
    auto ref = interpret(t.g, {x});
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    EXPECT_TRUE(cuda::conv_is_patchify(params_of(a)));
    for (bool nhwc : {true, false}) {
      const Tensor y = patchify_conv(a, x, w, b, nhwc);
      EXPECT_LE(relative_diff(*ref, {y}), 1e-6) << a.c << "x" << a.h << "x" << a.w << " kernel " << a.kh << "x" << a.kw
                                               << (nhwc ? " NHWC" : " NCHW");
    }
  }
}

TEST(ConvPatches, OnlyKernelEqualsStrideUnpaddedUngrouped) {
  const cuda::ConvParams vit = params_of({2, 3, 224, 224, 768, 16, 16});
  EXPECT_TRUE(cuda::conv_is_patchify(vit));
  auto changed = [&](const std::function<void(cuda::ConvParams&)>& f) {
    cuda::ConvParams p = vit;
    f(p);
    return cuda::conv_is_patchify(p);
  };
  EXPECT_FALSE(changed([](cuda::ConvParams& p) { p.stride_h = 8; }));       // overlapping windows
  EXPECT_FALSE(changed([](cuda::ConvParams& p) { p.pad_w = 1; }));          // padding
  EXPECT_FALSE(changed([](cuda::ConvParams& p) { p.dil_h = 2; }));          // dilation
  EXPECT_FALSE(changed([](cuda::ConvParams& p) { p.groups = 3; }));         // groups
  EXPECT_FALSE(changed([](cuda::ConvParams& p) { p.r = p.sk = p.stride_h = p.stride_w = 1; p.oh = p.ow = 224; }));  // 1x1: lower_conv's own GEMM
  EXPECT_TRUE(changed([](cuda::ConvParams& p) { p.sk = p.stride_w = 8; p.ow = 28; }));  // non-square
}
#else
TEST(ConvPatches, GemmOverWindowsMatchesReferenceConv) { GTEST_SKIP() << "built without CUDA"; }
#endif

}  // namespace
}  // namespace kiln::testing::op_table
