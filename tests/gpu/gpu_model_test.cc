// GpuModel with preset tactics (each 1x1-conv tactic, cuDNN graph-API convs) against the CPU
// reference on the op table's small CNN; the plain op-vs-reference cases are rows of the op table
// (tests/op_table/). Skips cleanly where there is no GPU (or Kiln was built without CUDA).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <map>

#include "gpu/builder_graph.h"
#include "op_table/op_table.h"
#include "op_table/transformer_graphs.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_transformer.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
// FP16 (TF32 on) with `preset` tactics, checked to be the ones chosen.
std::vector<Tensor> run_gpu(const ir::Graph& g, const std::vector<Tensor>& in, std::map<std::string, TacticId> preset) {
  auto shapes = cuda::infer_value_shapes_by_reference(g, {in[0].shape()});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  cuda::GpuBuildOptions o;
  o.precision.fp16 = true;
  o.precision.tf32 = true;
  for (const auto& [layer, id] : preset) o.preset_tactics[layer] = {id, 0};
  auto model = cuda::GpuModel::create(g, *shapes, o);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  for (const auto& [layer, id] : preset)
    for (const auto& info : (*model)->layers())
      if (info.name == layer) EXPECT_EQ(info.tactic_id, id) << layer << ": " << info.tactic;
  auto ctx = (*model)->create_context();
  EXPECT_TRUE(ctx.ok());
  std::vector<Tensor> out;
  Status s = (*ctx)->run(in, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return out;
}
#endif

// conv2 (1x1, residual, ReLU) forced onto each of its two tactics: cuDNN and the cuBLASLt GEMM
// with the residual as C and a bias+ReLU epilogue.
TEST(GpuModel, OneByOneConvTacticsAgree) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  // The graph an FP16 plan lowers (the builder's pipeline); the reference runs the model as written.
  const ir::Graph g = cuda_graph(op_table::small_cnn().graph, cuda_config(true));
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 28)};
  auto ref = interpret(op_table::small_cnn().graph, in);
  ASSERT_TRUE(ref.ok());
  for (TacticId t : {make_tactic_id(TacticSource::kCudnn, 1), make_tactic_id(TacticSource::kCublasLt, 0)}) {
    auto out = run_gpu(g, in, {{"conv2", t}});
    ASSERT_EQ(out.size(), ref->size()) << t;
    EXPECT_LE(relative_diff(*ref, out), 2e-2) << t;
  }
#endif
}

// An N whose fp16 rows are not 16-byte aligned (a vocabulary of 1,001, GPT-2-style LM heads): the
// weight is stored padded to 1,024 outputs and the GEMM runs in both forms — cuBLASLt into Y with
// N as the leading dim, and the padded form (into the workspace's [M, 1024], then the compacting
// copy) — each against the CPU reference. Gemm with transB and a bias too (N = 333, padded to 384).
TEST(GpuModel, PaddedNGemmBothFormsAgree) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  struct Case {
    op_table::OpCase c;
    std::string layer;
  };
  std::vector<Case> cases;
  cases.push_back({op_table::one_op(ir::OpKind::kMatMul, {2, 37, 64}, {2, 37, 1001},
                                    [](TinyGraph& t) {
                                      return std::vector<ir::ValueId>{t.constant("w", random_tensor({64, 1001}, 31, -0.3f, 0.3f))};
                                    },
                                    {}, random_tensor({2, 37, 64}, 32)),
                   ""});
  cases.push_back({op_table::one_op(ir::OpKind::kGemm, {19, 48}, {19, 333},
                                    [](TinyGraph& t) {
                                      return std::vector<ir::ValueId>{t.constant("w", random_tensor({333, 48}, 33, -0.3f, 0.3f)),
                                                                      t.constant("b", random_tensor({333}, 34))};
                                    },
                                    {{"transB", ir::Attribute::of_int(1)}}, random_tensor({19, 48}, 35)),
                   ""});
  for (Case& k : cases) {
    const ir::Graph g = cuda_graph(k.c.graph, cuda_config(true));
    for (const ir::Node& n : g.nodes)
      if (!n.removed && (n.op == ir::OpKind::kMatMul || n.op == ir::OpKind::kGemm || n.op == ir::OpKind::kMatMulBias))
        k.layer = n.name;
    ASSERT_FALSE(k.layer.empty());
    auto ref = interpret(k.c.graph, k.c.inputs);
    ASSERT_TRUE(ref.ok());
    for (TacticId t : {make_tactic_id(TacticSource::kCublasLt, 0),
                       make_tactic_id(TacticSource::kCublasLt, cuda::kGemmPaddedVariant)}) {
      auto out = run_gpu(g, k.c.inputs, {{k.layer, t}});
      ASSERT_EQ(out.size(), ref->size()) << k.layer << " " << t;
      EXPECT_EQ(out[0].shape(), (*ref)[0].shape());
      EXPECT_LE(relative_diff(*ref, out), 2e-2) << k.layer << " " << t;
    }
  }
#endif
}

// A pre-LN block (fuse_horizontal_gemm makes one Q/K/V GEMM, then a Split; the head Transposes fold
// into head_layout "bshd"): in fp16 the Attention layer reads Q, K and V in place from the packed
// GEMM output (tactic name " rows=..."), the Split's copies are dropped, and each attention tactic —
// the fused kernel through its strides, the cuBLASLt path through its copies — matches the CPU
// reference of the block as written.
TEST(GpuModel, AttentionReadsPackedQkvInPlace) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph block = op_table::transformer_block(2, 40, 256, 4);  // 4 heads of 64
  const ir::Graph g = cuda_graph(block, cuda_config(true));
  std::string attn;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kAttention) attn = n.name;
  ASSERT_FALSE(attn.empty());
  std::vector<Tensor> in = {random_tensor({2, 40, 256}, 36)};
  auto ref = interpret(block, in);
  ASSERT_TRUE(ref.ok());
  for (TacticId t : {cuda::kFlashAttentionTactic, make_tactic_id(TacticSource::kCublasLt, 0)}) {
    auto shapes = cuda::infer_value_shapes_by_reference(g, {in[0].shape()});
    ASSERT_TRUE(shapes.ok());
    cuda::GpuBuildOptions o;
    o.precision.fp16 = true;
    o.preset_tactics[attn] = {t, 0};
    auto model = cuda::GpuModel::create(g, *shapes, o);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    bool in_place = false;
    for (const auto& info : (*model)->layers()) {
      EXPECT_NE(info.op, "Split") << info.name;
      if (info.name == attn) {
        EXPECT_EQ(info.tactic_id, t);
        in_place = info.tactic.find(" rows=") != std::string::npos;
      }
    }
    EXPECT_TRUE(in_place) << "the attention layer did not read the packed Q/K/V in place";
    auto ctx = (*model)->create_context();
    ASSERT_TRUE(ctx.ok());
    std::vector<Tensor> out;
    ASSERT_TRUE((*ctx)->run(in, &out).ok());
    EXPECT_LE(relative_diff(*ref, out), 2e-2) << t;
  }
#endif
}

// Both convs forced onto cuDNN's graph API (conv1: 3x3 + bias + ReLU; conv2: 1x1 + bias +
// residual + ReLU, each one operation graph), at heuristic ranks 0 and 1.
TEST(GpuModel, CudnnGraphConvMatchesCpuReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  // The graph an FP16 plan lowers (the builder's pipeline); the reference runs the model as written.
  const ir::Graph g = cuda_graph(op_table::small_cnn().graph, cuda_config(true));
  std::vector<Tensor> in = {random_tensor({2, 8, 16, 16}, 29)};
  auto ref = interpret(op_table::small_cnn().graph, in);
  ASSERT_TRUE(ref.ok());
  for (TacticId t : {make_tactic_id(TacticSource::kCudnnGraph, 0), make_tactic_id(TacticSource::kCudnnGraph, 1)}) {
    cuda::reset_conv_graph_decisions();
    auto out = run_gpu(g, in, {{"conv1", t}, {"conv2", t}});
    ASSERT_EQ(out.size(), ref->size()) << t;
    EXPECT_LE(relative_diff(*ref, out), 2e-2) << t;
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
