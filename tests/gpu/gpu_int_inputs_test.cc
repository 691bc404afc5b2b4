// Integer graph inputs on the CUDA path (token ids, attention masks): int32/int64 inputs staged
// as-is, Gather with runtime indices (embedding lookups), Cast from integers to float. Without a
// GPU: the BERT-base and GPT-2 graphs as the builder lowers them (models/ of the main checkout,
// skipped when absent) pass check_gpu_support with the fp32 and fp16 rules, and integer uses
// without a kernel are refused by name. With a GPU (GpuIntInputs* suites): out-of-range ids, the
// engine's input dtype checks and BERT end to end against the CPU plan. The small embedding / mask
// graphs against the CPU reference are rows of the op table (Embedding_*, AttentionMask_*;
// tests/op_table/).
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <filesystem>
#include <random>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "op_table/op_table.h"
#include "op_table/transformer_graphs.h"
#include "passes/pass_test_util.h"
#include "passes/passes.h"
#include "ir/shape_inference.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

// Exported models (scripts/export_models.py; not in git): KILN_MODELS_DIR, else the checkout's models/.
std::string model_path(const std::string& file) {
  const char* dir = std::getenv("KILN_MODELS_DIR");
  return std::string(dir ? dir : KILN_SOURCE_DIR "/models") + "/" + file;
}

// The graph the builder lowers for the CUDA target with a profile of min == opt == max
// (cuda_layer_graph: the builder's own pipeline — passes, precisions, layouts).
[[maybe_unused]] StatusOr<ir::Graph> pinned_layer_graph(const std::string& path, const std::map<std::string, Shape>& shapes, bool fp16) {
  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_file(path));
  BuilderConfig c;
  c.fp16 = fp16;
  OptimizationProfile p;
  for (ir::ValueId v : g.inputs) {
    auto it = shapes.find(g.value(v).name);
    if (it == shapes.end()) return invalid_argument("no shape for input '" + g.value(v).name + "'");
    KILN_RETURN_IF_ERROR(p.set_dimensions(it->first, it->second, it->second, it->second));
  }
  c.profiles.push_back(p);
  return cuda_layer_graph(g, c, nullptr);
}

void expect_model_supported(const std::string& file, const std::map<std::string, Shape>& shapes) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  const std::string path = model_path(file);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  for (bool fp16 : {false, true}) {
    auto g = pinned_layer_graph(path, shapes, fp16);
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

using op_table::embedding_graph;
using op_table::int_input;
using op_table::int_tensor;
using op_table::kBatch;
using op_table::kHidden;
using op_table::kSeq;
using op_table::kVocab;

// Integer and bool tensors run on the GPU since issue 11 (docs/decisions/0051; their ops are
// rows of the op table). What still has no kernel is refused, naming the node or input.
TEST(GpuIntInputsSupport, IntegerUsesWithoutAKernelAreRefusedByName) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  {  // an op with integer outputs but no exact kernel (Softmax of ids): refused, naming node and dtype
    TinyGraph t;
    auto ids = int_input(t, "input_ids", {kBatch, kSeq}, DataType::kInt64);
    auto sm = t.node(ir::OpKind::kSoftmax, "softmax_ids", {ids}, {kBatch, kSeq});
    t.g.value(sm).dtype = DataType::kInt64;
    t.g.outputs = {sm};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("softmax_ids"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("int64 outputs"), std::string::npos) << s.message();
  }
  {  // an int64 activation into a float computation: refused, naming the node
    TinyGraph t;
    auto ids = int_input(t, "input_ids", {kBatch, kSeq}, DataType::kInt64);
    auto r = t.node(ir::OpKind::kRelu, "relu_ids", {ids}, {kBatch, kSeq});
    t.g.outputs = {r};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("relu_ids"), std::string::npos) << s.message();
  }
  {  // a float8 graph input: refused, naming the input (uint8 .. uint32 are computed wide since
     // decision 0069: gpu_io_dtypes_test.cc; uint64 is stored as it is since 0075)
    TinyGraph t;
    auto b = int_input(t, "pixels", {kBatch, kSeq}, DataType::kFloat8E4M3FN);
    auto c = t.node(ir::OpKind::kCast, "cast", {b}, {kBatch, kSeq}, {{"to", ir::Attribute::of_int(int64_t{1})}});
    t.g.outputs = {c};
    auto vs = cuda::infer_value_shapes_by_reference(t.g, {{kBatch, kSeq}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("graph input 'pixels' has dtype "), std::string::npos) << s.message();
  }
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
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.tf32 = false;
  auto plan = build_from_graph(t.g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto e = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  auto ctx = (*e)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("input_ids", in).ok());
  Status run = ctx->execute();
  ASSERT_TRUE(run.ok()) << run.to_string();
  auto got = ctx->output("embed_out");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const float* y = got->data<float>();
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
