// Ops whose output extent comes from input values (docs/decisions/0074): NonMaxSuppression and
// Compress with a run-time condition make shape discovery ignore the shape a model declares for
// their outputs and mark the graph value-dependent (its engine lowers at each call's values,
// decision 0069); their CUDA factories lower only then (or, Compress / TopK / OneHot, with a
// constant size operand) and otherwise refuse, naming the operand. With a GPU (GpuValueSized):
// NonMaxSuppression and Compress through a built engine at two sets of values whose selections
// differ in size, against the CPU reference.
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"
#include "kiln/runtime.h"
#include "op_table/op_table.h"

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

// NonMaxSuppression(boxes [1, 6, 4], scores [1, 2, 6], max_out, iou, score_threshold) -> [3, 3]
// declared (the exporter's example count), every operand a graph input.
TinyGraph nms_graph() {
  TinyGraph t;
  auto boxes = t.input("boxes", {1, 6, 4});
  auto scores = t.input("scores", {1, 2, 6});
  auto max_out = op_table::int_input(t, "max_out", {1}, DataType::kInt64);
  auto iou = t.input("iou", {1});
  auto thr = t.input("score_threshold", {1});
  auto y = t.node(ir::OpKind::kNonMaxSuppression, "nms", {boxes, scores, max_out, iou, thr}, {3, 3});
  t.g.value(y).dtype = DataType::kInt64;
  t.g.outputs = {y};
  return t;
}

// Compress(x [3, 4], condition [3] bool input, axis 0) -> [2, 4] declared.
TinyGraph compress_graph() {
  TinyGraph t;
  auto x = t.input("x", {3, 4});
  auto c = op_table::int_input(t, "condition", {3}, DataType::kBool);
  auto y = t.node(ir::OpKind::kCompress, "compress", {x, c}, {2, 4}, {{"axis", ir::Attribute::of_int(0)}});
  t.g.outputs = {y};
  return t;
}

std::vector<Tensor> nms_inputs(float score_threshold) {
  Tensor boxes(DataType::kFloat32, {1, 6, 4});
  const float b[] = {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f, 0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101};
  std::memcpy(boxes.raw(), b, sizeof(b));
  Tensor scores(DataType::kFloat32, {1, 2, 6});
  const float s[] = {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
  std::memcpy(scores.raw(), s, sizeof(s));
  Tensor max_out = op_table::ints({3});
  Tensor iou(DataType::kFloat32, {1});
  iou.data<float>()[0] = 0.5f;
  Tensor thr(DataType::kFloat32, {1});
  thr.data<float>()[0] = score_threshold;
  return {boxes, scores, max_out, iou, thr};
}

TEST(GpuValueSizedLowering, NmsAndRuntimeCompressAreValueKeyedAndLower) {
  REQUIRE_CUDA_BUILD();
#ifdef KILN_HAVE_CUDA
  for (const TinyGraph& t : {nms_graph(), compress_graph()}) {
    std::vector<Shape> shapes;
    for (ir::ValueId v : t.g.inputs) {
      Shape s;
      for (const ir::Dim& d : *t.g.value(v).shape) s.push_back(d.value);
      shapes.push_back(s);
    }
    auto vs = cuda::infer_value_shapes_by_reference(t.g, shapes);
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    EXPECT_TRUE(vs->value_dependent);
    EXPECT_FALSE(vs->dependence.empty());
    Status s = cuda::check_gpu_support(t.g, *vs);
    EXPECT_TRUE(s.ok()) << s.to_string();
    // Not keyed (a made-up ValueShapes without the mark): refused, naming the operand.
    cuda::ValueShapes unkeyed = *vs;
    unkeyed.value_dependent = false;
    Status r = cuda::check_gpu_support(t.g, unkeyed);
    EXPECT_EQ(r.code(), StatusCode::kUnsupported) << r.to_string();
    EXPECT_NE(r.message().find("not keyed"), std::string::npos) << r.message();
  }
  // At given values the discovered count is the selection's, not the declared 3.
  const TinyGraph t = nms_graph();
  const std::vector<Tensor> in = nms_inputs(0.35f);  // 2 boxes kept per class
  std::vector<Shape> shapes;
  for (const Tensor& x : in) shapes.push_back(x.shape());
  auto at = cuda::infer_value_shapes_by_reference(t.g, shapes, &in);
  ASSERT_TRUE(at.ok()) << at.status().to_string();
  auto ref = interpret(t.g, in);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(at->shapes[t.g.outputs[0]], (*ref)[0].shape());
  EXPECT_EQ((*ref)[0].shape()[0], 4);  // not the declared example's 3
#endif
}

// With a GPU: the engine's selection at two thresholds (different counts) equals the CPU's.
TEST(GpuValueSized, NmsAndCompressMatchTheReferenceAtEachCallsValues) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  auto run = [](const TinyGraph& t, const std::vector<Tensor>& in) -> StatusOr<Tensor> {
    BuilderConfig c;
    c.target = TargetDevice::kCuda;
    KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(t.g, c));
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<Engine> e, Runtime::deserialize_engine(plan));
    auto ctx = e->create_execution_context();
    for (size_t i = 0; i < in.size(); ++i)
      KILN_RETURN_IF_ERROR(ctx->set_input(t.g.value(t.g.inputs[i]).name, in[i]));
    KILN_RETURN_IF_ERROR(ctx->execute());
    KILN_ASSIGN_OR_RETURN(Tensor got, ctx->output(t.g.value(t.g.outputs[0]).name));
    return got.clone();
  };
  const TinyGraph nms = nms_graph();
  for (float thr : {0.0f, 0.35f}) {  // 6 and 4 boxes
    const std::vector<Tensor> in = nms_inputs(thr);
    auto ref = interpret(nms.g, in);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto got = run(nms, in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(got->bit_equal((*ref)[0])) << "threshold " << thr;
  }
  const TinyGraph cp = compress_graph();
  for (int pattern : {0b101, 0b010}) {
    Tensor x = op_table::nonzero({3, 4}, 77);
    Tensor c(DataType::kBool, {3});
    for (int i = 0; i < 3; ++i) static_cast<uint8_t*>(c.raw())[i] = (pattern >> i) & 1;
    const std::vector<Tensor> in = {x, c};
    auto ref = interpret(cp.g, in);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    auto got = run(cp, in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_TRUE(got->bit_equal((*ref)[0])) << "pattern " << pattern;
  }
#endif
}

}  // namespace
}  // namespace kiln::testing
