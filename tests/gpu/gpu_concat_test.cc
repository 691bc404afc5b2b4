// Concat elimination and Split lowering on the CUDA path against the CPU reference, on random
// (never zero) data: producers aliased into the Concat's output in the arena (FP32, batch 1),
// partly eliminated Concats (unaligned slices), NHWC concat/split in FP16, and the layer list
// (the values alone are also op-table rows, Inception_*).
// Skips cleanly where there is no GPU (or Kiln was built without CUDA).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <algorithm>
#include <map>

#include "gpu/builder_graph.h"
#include "op_table/op_table.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

// The op table's Inception block (op_table.h) as the builder lowers it for an fp32 / fp16 CUDA
// plan (builder_graph.h). `k1` sets the first branch's width (and so the byte offsets of the other
// slices), `r1` its kernel: with r1 = 1 it joins the horizontal fusion of the 1x1 reductions and
// reaches the Concat through the Split; with r1 = 3 (pad 1) it stays a conv of its own.
[[maybe_unused]] ir::Graph inception_block(int64_t n, int64_t hw, int64_t k1, int64_t r1, bool fp16) {
  return cuda_graph(op_table::inception_block(n, hw, k1, r1).graph, cuda_config(fp16));
}
// The block as written, for the CPU reference.
[[maybe_unused]] ir::Graph inception_as_built(int64_t n, int64_t hw, int64_t k1, int64_t r1) {
  return op_table::inception_block(n, hw, k1, r1).graph;
}

#ifdef KILN_HAVE_CUDA
struct GpuRun {
  std::vector<Tensor> out;
  std::vector<std::string> eliminated;
  std::map<std::string, std::string> tactics;  // layer name -> tactic
  size_t arena = 0;
};

GpuRun run_gpu(const ir::Graph& g, const Tensor& x, bool fp16) {
  GpuRun r;
  auto shapes = cuda::infer_value_shapes_by_reference(g, {x.shape()});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  if (!shapes.ok()) return r;
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.tf32 = false;
  auto model = cuda::GpuModel::create(g, *shapes, o);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return r;
  r.eliminated = (*model)->eliminated_layers();
  for (const auto& l : (*model)->layers()) r.tactics[l.name] = l.tactic;
  r.arena = (*model)->arena_bytes();
  auto ctx = (*model)->create_context();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return r;
  (*ctx)->use_cuda_graph(true);
  Status s = (*ctx)->run({x}, &r.out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return r;
}

bool has(const std::vector<std::string>& v, const std::string& s) { return std::count(v.begin(), v.end(), s) > 0; }
#endif

// FP32, batch 1, 256-byte-aligned slices (every branch width times 16*16*4 bytes): all four
// producers write into the Concat's output and the Concat leaves the layer list.
TEST(GpuConcat, Fp32Batch1ProducersWriteInPlace) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = inception_block(1, 16, 16, 3, false);
  Tensor x = random_tensor({1, 8, 16, 16}, 11);
  auto ref = interpret(inception_as_built(1, 16, 16, 3), {x});
  ASSERT_TRUE(ref.ok());
  GpuRun r = run_gpu(g, x, false);
  ASSERT_EQ(r.out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, r.out), 1e-4);
  EXPECT_TRUE(has(r.eliminated, "cat"));
  EXPECT_EQ(r.tactics.count("cat"), 0u);
#endif
}

// The first branch joins the fused 1x1 reductions: the Split's parts are views of the fused
// conv's output (no Split layer), so that slice is copied and the other three are in place.
TEST(GpuConcat, Fp32SplitViewsAndPartialConcat) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = inception_block(1, 16, 16, 1, false);
  Tensor x = random_tensor({1, 8, 16, 16}, 15);
  auto ref = interpret(inception_as_built(1, 16, 16, 1), {x});
  ASSERT_TRUE(ref.ok());
  GpuRun r = run_gpu(g, x, false);
  ASSERT_EQ(r.out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, r.out), 1e-4);
  EXPECT_EQ(r.tactics["cat"], "kiln.concat (3 of 4 inputs in place)");
  for (const auto& [name, tactic] : r.tactics) EXPECT_NE(tactic, "kiln.split") << name;
#endif
}

// Batch 2: the channel slices are not contiguous, the Concat stays a copy.
TEST(GpuConcat, Fp32Batch2KeepsTheConcat) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = inception_block(2, 16, 16, 3, false);
  Tensor x = random_tensor({2, 8, 16, 16}, 12);
  auto ref = interpret(inception_as_built(2, 16, 16, 3), {x});
  ASSERT_TRUE(ref.ok());
  GpuRun r = run_gpu(g, x, false);
  ASSERT_EQ(r.out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, r.out), 1e-4);
  EXPECT_FALSE(has(r.eliminated, "cat"));
  EXPECT_EQ(r.tactics["cat"], "kiln.concat");
#endif
}

// 5x5 spatial, first branch 3 channels: offsets after it (3*25*4 = 300 bytes, ...) are not
// 256-aligned, so those inputs stay copies and the Split is a copy layer whose first part
// lands in the Concat's output; the values still agree.
TEST(GpuConcat, UnalignedSlicesStayCopies) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = inception_block(1, 5, 3, 1, false);
  Tensor x = random_tensor({1, 8, 5, 5}, 13);
  auto ref = interpret(inception_as_built(1, 5, 3, 1), {x});
  ASSERT_TRUE(ref.ok());
  GpuRun r = run_gpu(g, x, false);
  ASSERT_EQ(r.out.size(), ref->size());
  EXPECT_LE(relative_diff(*ref, r.out), 1e-4);
  EXPECT_FALSE(has(r.eliminated, "cat"));
  EXPECT_EQ(r.tactics["cat"], "kiln.concat (1 of 4 inputs in place)");
#endif
}

// FP16: the channel concat and the horizontal-fusion Split run in NHWC.
TEST(GpuConcat, Fp16NhwcConcatAndSplit) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (int64_t n : {1, 2}) {
    const ir::Graph g = inception_block(n, 16, 16, 1, true);
    Tensor x = random_tensor({n, 8, 16, 16}, 14);
    auto ref = interpret(inception_as_built(n, 16, 16, 1), {x});
    ASSERT_TRUE(ref.ok());
    GpuRun r = run_gpu(g, x, true);
    ASSERT_EQ(r.out.size(), ref->size());
    EXPECT_LE(relative_diff(*ref, r.out), 2e-2) << "batch " << n;
    for (const auto& [name, tactic] : r.tactics) EXPECT_NE(name.rfind("reformat:", 0), 0u) << name;
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
