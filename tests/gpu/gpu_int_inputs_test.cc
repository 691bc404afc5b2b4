// Integer graph inputs on the CUDA path (token ids, attention masks): int32/int64 inputs staged
// as-is, Gather with runtime indices (embedding lookups), Cast from integers to float. Without a
// GPU: the optimized BERT-base and GPT-2 graphs (models/ of the main checkout, skipped when
// absent) pass check_gpu_support with the fp32 and fp16 rules. With a GPU (GpuIntInputs* suites):
// small embedding / mask graphs and BERT end to end against the CPU reference.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <filesystem>
#include <random>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"
#include "ir/shape_inference.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
#define REQUIRE_CUDA_BUILD()
#else
#define REQUIRE_CUDA_BUILD() GTEST_SKIP() << "built without CUDA"
#endif

// Exported models (scripts/export_models.py; not in git): KILN_MODELS_DIR, else the checkout's models/.
std::string model_path(const std::string& file) {
  const char* dir = std::getenv("KILN_MODELS_DIR");
  return std::string(dir ? dir : KILN_SOURCE_DIR "/models") + "/" + file;
}

// The builder's optimization for a profile with min == opt == max: input dims pinned, the
// default pipeline, then the CUDA layout assignment (row-major or tensor-core preference).
StatusOr<ir::Graph> optimize_pinned(const std::string& path, const std::map<std::string, Shape>& shapes, bool fp16) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_file(path));
  for (ir::ValueId v : g.inputs) {
    auto it = shapes.find(g.value(v).name);
    if (it == shapes.end()) return invalid_argument("no shape for input '" + g.value(v).name + "'");
    ir::SymShape s;
    for (int64_t d : it->second) s.push_back(ir::Dim::known(d));
    g.value(v).shape = s;
  }
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g, nullptr, &reference_evaluator()));
  KILN_RETURN_IF_ERROR(passes::run_pipeline(g, kiln::testing::reference_pass_options()));
  g.compact();
  KILN_RETURN_IF_ERROR(g.topo_sort());
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g, nullptr, &reference_evaluator()));
  KILN_RETURN_IF_ERROR(passes::assign_layouts(g, fp16 ? passes::tensor_core_layout_preference
                                                      : passes::row_major_layout_preference)
                           .status());
  return g;
}

void expect_model_supported(const std::string& file, const std::map<std::string, Shape>& shapes) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const std::string path = model_path(file);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  for (bool fp16 : {false, true}) {
    auto g = optimize_pinned(path, shapes, fp16);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    std::vector<Shape> in;
    for (ir::ValueId v : g->inputs) in.push_back(shapes.at(g->value(v).name));
    auto vs = cuda::infer_value_shapes_by_reference(*g, in);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(*g, *vs, fp16);
    EXPECT_TRUE(s.ok()) << file << (fp16 ? " [fp16]: " : " [fp32]: ") << s.to_string();
  }
#endif
}

TEST(GpuIntInputsSupport, BertBaseOptimizedGraphLowers) {
  expect_model_supported("bert_base.onnx", {{"input_ids", {2, 128}}, {"attention_mask", {2, 128}}});
}

TEST(GpuIntInputsSupport, Gpt2OptimizedGraphLowers) { expect_model_supported("gpt2.onnx", {{"input_ids", {2, 128}}}); }

// ---- small graphs: an int64 (or int32) input through Gather / Cast, against the CPU reference.

constexpr int64_t kVocab = 50, kHidden = 16, kBatch = 2, kSeq = 8;

ir::ValueId int_input(TinyGraph& t, const std::string& name, const Shape& s, DataType dt) {
  ir::ValueId v = t.g.add_value(name, dt);
  t.g.value(v).shape = sym(s);
  t.g.inputs.push_back(v);
  return v;
}

Tensor int_tensor(DataType dt, const Shape& s, int64_t lo, int64_t hi, uint32_t seed) {
  Tensor t(dt, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = d(rng);
    if (dt == DataType::kInt64) t.data<int64_t>()[i] = v;
    else t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return t;
}

// ids [B, S] -> Gather(table [V, H]) -> LayerNormalization: BERT's / GPT-2's embedding lookup.
ir::Graph embedding_graph(DataType ids_dtype) {
  TinyGraph t;
  auto ids = int_input(t, "input_ids", {kBatch, kSeq}, ids_dtype);
  auto table = t.constant("table", random_tensor({kVocab, kHidden}, 11));
  auto emb = t.node(ir::OpKind::kGather, "embed", {table, ids}, {kBatch, kSeq, kHidden});
  auto scale = t.constant("ln_scale", random_tensor({kHidden}, 12, 0.5f, 1.5f));
  auto bias = t.constant("ln_bias", random_tensor({kHidden}, 13));
  auto ln = t.node(ir::OpKind::kLayerNormalization, "ln", {emb, scale, bias}, {kBatch, kSeq, kHidden},
                   {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {ln};
  return t.g;
}

// scores [B, 4, S, S] + (1 - Cast(Unsqueeze(mask))) * -10000 -> Softmax: BERT's attention mask.
ir::Graph mask_graph() {
  TinyGraph t;
  auto x = t.input("scores", {kBatch, 4, kSeq, kSeq});
  auto mask = int_input(t, "attention_mask", {kBatch, kSeq}, DataType::kInt64);
  Tensor axes(DataType::kInt64, {2});
  axes.data<int64_t>()[0] = 1;
  axes.data<int64_t>()[1] = 2;
  auto ax = t.constant("axes", axes);
  auto un = t.node(ir::OpKind::kUnsqueeze, "unsqueeze", {mask, ax}, {kBatch, 1, 1, kSeq});
  t.g.value(un).dtype = DataType::kInt64;
  auto cast = t.node(ir::OpKind::kCast, "cast", {un}, {kBatch, 1, 1, kSeq},
                     {{"to", ir::Attribute::of_int(static_cast<int64_t>(1))}});  // ONNX FLOAT
  Tensor one(DataType::kFloat32, {});
  one.data<float>()[0] = 1.f;
  Tensor big(DataType::kFloat32, {});
  big.data<float>()[0] = -10000.f;
  auto sub = t.node(ir::OpKind::kSub, "sub", {t.constant("one", one), cast}, {kBatch, 1, 1, kSeq});
  auto mul = t.node(ir::OpKind::kMul, "mul", {sub, t.constant("big", big)}, {kBatch, 1, 1, kSeq});
  auto add = t.node(ir::OpKind::kAdd, "add", {x, mul}, {kBatch, 4, kSeq, kSeq});
  auto sm = t.node(ir::OpKind::kSoftmax, "softmax", {add}, {kBatch, 4, kSeq, kSeq}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {sm};
  return t.g;
}

// Without a GPU: the small graphs lower with both rule sets, and the bad cases are refused by name.
TEST(GpuIntInputsSupport, SmallGraphsLower) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  for (const ir::Graph& g : {embedding_graph(DataType::kInt64), embedding_graph(DataType::kInt32), mask_graph()}) {
    std::vector<Shape> shapes;
    for (ir::ValueId v : g.inputs) {
      Shape s;
      for (const ir::Dim& d : *g.value(v).shape) s.push_back(d.value);
      shapes.push_back(s);
    }
    auto vs = cuda::infer_value_shapes_by_reference(g, shapes);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    for (bool fp16 : {false, true}) {
      Status s = cuda::check_gpu_support(g, *vs, fp16);
      EXPECT_TRUE(s.ok()) << s.to_string();
    }
  }
#endif
}

TEST(GpuIntInputsSupport, IntegerOutputsAndFloatUsesAreRefusedByName) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  {  // an int64 graph output (a view of the input): not supported, named
    TinyGraph t;
    auto ids = int_input(t, "input_ids", {kBatch, kSeq}, DataType::kInt64);
    auto id = t.node(ir::OpKind::kIdentity, "ids_copy", {ids}, {kBatch, kSeq});
    t.g.value(id).dtype = DataType::kInt64;
    t.g.outputs = {id};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("graph output 'ids_copy_out' has dtype int64"), std::string::npos) << s.message();
  }
  {  // an int64 activation into a float op (Softmax of ids): refused, naming the node
    TinyGraph t;
    auto ids = int_input(t, "input_ids", {kBatch, kSeq}, DataType::kInt64);
    auto sm = t.node(ir::OpKind::kNeg, "neg_ids", {ids}, {kBatch, kSeq});
    t.g.value(sm).dtype = DataType::kInt64;
    t.g.outputs = {sm};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("neg_ids"), std::string::npos) << s.message();
  }
  {  // a bool graph input: refused, naming the input
    TinyGraph t;
    auto b = int_input(t, "flags", {kBatch, kSeq}, DataType::kBool);
    auto c = t.node(ir::OpKind::kCast, "cast", {b}, {kBatch, kSeq}, {{"to", ir::Attribute::of_int(int64_t{1})}});
    t.g.outputs = {c};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("graph input 'flags' has dtype bool"), std::string::npos) << s.message();
  }
#endif
}

#ifdef KILN_HAVE_CUDA
StatusOr<std::vector<Tensor>> run_gpu(const ir::Graph& g, const std::vector<Tensor>& in, bool fp16) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, shapes));
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.tf32 = false;
  KILN_ASSIGN_OR_RETURN(auto model, cuda::GpuModel::create(g, vs, o));
  KILN_ASSIGN_OR_RETURN(auto ctx, model->create_context());
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(ctx->run(in, &out));
  return out;
}

void expect_gpu_matches(const ir::Graph& g, const std::vector<Tensor>& in, double tol32, double tol16) {
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  for (bool fp16 : {false, true}) {
    auto got = run_gpu(g, in, fp16);
    ASSERT_TRUE(got.ok()) << (fp16 ? "[fp16] " : "[fp32] ") << got.status().to_string();
    EXPECT_LE(relative_diff(*ref, *got), fp16 ? tol16 : tol32) << (fp16 ? "[fp16]" : "[fp32]");
  }
}
#endif

TEST(GpuIntInputs, EmbeddingGatherLayerNormMatchesReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  // Negative ids count from the end of the table (ONNX), on both paths.
  for (DataType dt : {DataType::kInt64, DataType::kInt32})
    expect_gpu_matches(embedding_graph(dt), {int_tensor(dt, {kBatch, kSeq}, -kVocab, kVocab - 1, 5)}, 1e-5, 2e-2);
#endif
}

TEST(GpuIntInputs, MaskCastChainMatchesReference) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  expect_gpu_matches(mask_graph(),
                     {random_tensor({kBatch, 4, kSeq, kSeq}, 21), int_tensor(DataType::kInt64, {kBatch, kSeq}, 0, 1, 22)},
                     1e-5, 2e-2);
#endif
}

// Out-of-range ids (undefined in ONNX; the CPU reference rejects them) read nothing out of
// bounds on the GPU: their rows are zeros, the in-range rows are the table's.
TEST(GpuIntInputs, OutOfRangeIdsGiveZeroRows) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  TinyGraph t;
  auto ids = int_input(t, "input_ids", {4}, DataType::kInt64);
  Tensor table = random_tensor({kVocab, kHidden}, 31);
  auto emb = t.node(ir::OpKind::kGather, "embed", {t.constant("table", table), ids}, {4, kHidden});
  t.g.outputs = {emb};
  Tensor in(DataType::kInt64, {4});
  const int64_t id[4] = {3, kVocab, -kVocab - 1, -1};  // ok, too big, too small, last row
  for (int i = 0; i < 4; ++i) in.data<int64_t>()[i] = id[i];
  auto got = run_gpu(t.g, {in}, false);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const float* y = (*got)[0].data<float>();
  for (int64_t h = 0; h < kHidden; ++h) {
    EXPECT_EQ(y[h], table.data<float>()[3 * kHidden + h]);
    EXPECT_EQ(y[kHidden + h], 0.f);
    EXPECT_EQ(y[2 * kHidden + h], 0.f);
    EXPECT_EQ(y[3 * kHidden + h], table.data<float>()[(kVocab - 1) * kHidden + h]);
  }
#endif
}

// Engines built for cuda take integer inputs in their declared dtype and name the input otherwise.
TEST(GpuIntInputs, EngineChecksInputDtypes) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.tf32 = false;
  auto plan = build_from_graph(embedding_graph(DataType::kInt64), c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto e = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto ctx = (*e)->create_execution_context();
  Status bad = ctx->set_input("input_ids", random_tensor({kBatch, kSeq}, 3));
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("input_ids"), std::string::npos) << bad.message();
  Tensor ids = int_tensor(DataType::kInt64, {kBatch, kSeq}, 0, kVocab - 1, 4);
  ASSERT_TRUE(ctx->set_input("input_ids", ids).ok());
  Status run = ctx->execute();
  ASSERT_TRUE(run.ok()) << run.to_string();
  auto ref = interpret(embedding_graph(DataType::kInt64), {ids});
  ASSERT_TRUE(ref.ok());
  auto out = ctx->output("ln_out");
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_LE(relative_diff(*ref, {*out}), 1e-5);
#endif
}

// BERT-base end to end: built for cuda (fp32, TF32 off) from the ONNX file, against the CPU
// plan on the same token ids (in the vocabulary) and a 0/1 mask with padding in one row.
TEST(GpuIntInputs, BertBaseEndToEndMatchesCpu) {
  REQUIRE_GPU();
  const std::string path = model_path("bert_base.onnx");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  auto run = [&](TargetDevice target, const std::vector<std::pair<std::string, Tensor>>& in) -> StatusOr<std::vector<Tensor>> {
    BuilderConfig c;
    c.target = target;
    c.tf32 = false;
    OptimizationProfile p;
    for (const auto& [name, t] : in) KILN_RETURN_IF_ERROR(p.set_dimensions(name, t.shape(), t.shape(), t.shape()));
    c.profiles = {p};
    KILN_ASSIGN_OR_RETURN(auto plan, Builder::build(path, c));
    KILN_ASSIGN_OR_RETURN(auto e, Runtime::deserialize_engine(plan));
    auto ctx = e->create_execution_context();
    for (const auto& [name, t] : in) KILN_RETURN_IF_ERROR(ctx->set_input(name, t));
    KILN_RETURN_IF_ERROR(ctx->execute());
    std::vector<Tensor> out;
    for (const IOTensor& io : e->io_tensors()) {
      if (io.is_input) continue;
      KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(io.desc.name));
      out.push_back(t);
    }
    return out;
  };
  Tensor ids = int_tensor(DataType::kInt64, {2, 128}, 0, 30521, 41);
  Tensor mask(DataType::kInt64, {2, 128});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<int64_t>()[i] = (i / 128 == 1 && i % 128 >= 100) ? 0 : 1;
  std::vector<std::pair<std::string, Tensor>> in = {{"input_ids", ids}, {"attention_mask", mask}};
  auto cpu = run(TargetDevice::kCpu, in);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  auto gpu = run(TargetDevice::kCuda, in);
  ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
  EXPECT_LE(relative_diff(*cpu, *gpu), 1e-3);
}

}  // namespace
}  // namespace kiln::testing
