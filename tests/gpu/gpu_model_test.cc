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
  std::vector<Shape> in_shapes;
  for (const Tensor& t : in) in_shapes.push_back(t.shape());
  auto shapes = cuda::infer_value_shapes_by_reference(g, in_shapes);
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
    std::vector<TacticId> ids = {make_tactic_id(TacticSource::kCublasLt, 0),
                                 make_tactic_id(TacticSource::kCublasLt, cuda::kGemmPaddedVariant)};
    // The MatMul (no bias, its output the graph's float32 output) writes float32: also its padded
    // 16-bit form compacted into float32 (docs/decisions/0083).
    if (k.c.graph.nodes[0].op == ir::OpKind::kMatMul)
      ids.push_back(make_tactic_id(TacticSource::kCublasLt, cuda::kGemmPaddedF32Variant));
    for (TacticId t : ids) {
      auto out = run_gpu(g, k.c.inputs, {{k.layer, t}});
      ASSERT_EQ(out.size(), ref->size()) << k.layer << " " << t;
      EXPECT_EQ(out[0].shape(), (*ref)[0].shape());
      EXPECT_LE(relative_diff(*ref, out), 2e-2) << k.layer << " " << t;
    }
  }
#endif
}

// The LM head's float32 output (docs/decisions/0083): a 16-bit MatMul whose output is only the graph
// output writes it in float32 (no output reformat layer); in each form it matches the same GEMM
// written in fp16 and converted, to within fp16's rounding of the output (the float32 one is the
// unrounded sum), and the CPU reference within the fp16 operands' error.
TEST(GpuModel, GemmWritesFloat32GraphOutput) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  op_table::OpCase c = op_table::one_op(
      ir::OpKind::kMatMul, {3, 17, 96}, {3, 17, 1001},
      [](TinyGraph& t) { return std::vector<ir::ValueId>{t.constant("w", random_tensor({96, 1001}, 41, -0.3f, 0.3f))}; },
      {}, random_tensor({3, 17, 96}, 42));
  const ir::Graph g = cuda_graph(c.graph, cuda_config(true));
  std::string layer;
  for (const ir::Node& n : g.nodes)
    if (!n.removed && n.op == ir::OpKind::kMatMul) layer = n.name;
  ASSERT_FALSE(layer.empty());
  auto ref = interpret(c.graph, c.inputs);
  ASSERT_TRUE(ref.ok());
  auto shapes = cuda::infer_value_shapes_by_reference(g, {c.inputs[0].shape()});
  ASSERT_TRUE(shapes.ok());
  for (uint32_t v : {0u, cuda::kGemmPaddedVariant, cuda::kGemmPaddedF32Variant}) {
    cuda::GpuBuildOptions o;
    o.precision.fp16 = true;
    o.preset_tactics[layer] = {make_tactic_id(TacticSource::kCublasLt, v), 0};
    auto model = cuda::GpuModel::create(g, *shapes, o);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    for (const auto& info : (*model)->layers()) {
      EXPECT_EQ(info.name.rfind("output_reformat:", 0), std::string::npos) << info.name << ": " << info.tactic;
      if (info.name == layer) EXPECT_NE(info.tactic.find("->f32 out"), std::string::npos) << info.tactic;
    }
    auto ctx = (*model)->create_context();
    ASSERT_TRUE(ctx.ok());
    std::vector<Tensor> out;
    ASSERT_TRUE((*ctx)->run(c.inputs, &out).ok());
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].dtype(), DataType::kFloat32);
    EXPECT_LE(relative_diff(*ref, out), 5e-3) << "variant " << v;
  }
#endif
}

// A conv whose kernel equals its stride (ViT's patch embedding, 16x16 / 16 over 3 channels; and a
// 2x3 one with a residual and ReLU) forced onto cuDNN and onto the patchify GEMM (gather + cuBLASLt):
// both match the CPU reference (docs/decisions/0083).
TEST(GpuModel, PatchifyConvTacticsAgree) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  struct Case {
    Shape x;
    int64_t k, kh, kw;
    bool residual_relu;
  };
  for (const Case& a : {Case{{2, 3, 64, 48}, 32, 16, 16, false}, Case{{2, 8, 12, 12}, 16, 2, 3, true}}) {
    TinyGraph t;
    const Shape ys = {a.x[0], a.k, a.x[2] / a.kh, a.x[3] / a.kw};
    auto x = t.input("x", a.x);
    std::vector<Tensor> in = {random_tensor(a.x, 43)};
    auto y = t.node(ir::OpKind::kConv, "patch", {x, t.constant("w", random_tensor({a.k, a.x[1], a.kh, a.kw}, 44, -0.2f, 0.2f)),
                                                t.constant("b", random_tensor({a.k}, 45))},
                    ys, {{"kernel_shape", ir::Attribute::of_ints({a.kh, a.kw})}, {"strides", ir::Attribute::of_ints({a.kh, a.kw})}});
    if (a.residual_relu) {
      in.push_back(random_tensor(ys, 46));
      y = t.node(ir::OpKind::kAdd, "res", {y, t.input("r", ys)}, ys);
      y = t.node(ir::OpKind::kRelu, "act", {y}, ys);
    }
    t.g.outputs = {y};
    const ir::Graph g = cuda_graph(t.g, cuda_config(true));
    std::string layer;
    for (const ir::Node& n : g.nodes)
      if (!n.removed && (n.op == ir::OpKind::kConv || n.op == ir::OpKind::kFusedConv)) layer = n.name;
    ASSERT_FALSE(layer.empty());
    auto ref = interpret(t.g, in);
    ASSERT_TRUE(ref.ok());
    for (TacticId id : {make_tactic_id(TacticSource::kCudnn, 1), make_tactic_id(TacticSource::kCublasLt, 0)}) {
      auto out = run_gpu(g, in, {{layer, id}});
      ASSERT_EQ(out.size(), 1u) << id;
      EXPECT_LE(relative_diff(*ref, out), 2e-2) << layer << " " << id;
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
