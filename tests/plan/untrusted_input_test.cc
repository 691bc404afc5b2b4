// Regression tests for issue 15 (a black-box campaign of mutated models, plans and inputs):
// each crash, abort or silent wrong answer it found is a model built here and an assertion that
// Kiln now answers with a Status (or the CLI with exit code 2) whose message names the problem.
// The ones that crashed the process run through the CLI, so a regression fails one test instead
// of the test binary.
// The CLI-driven ones are in untrusted_cli_test.cc.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/checked_size.h"
#include "plan/untrusted_test_util.h"

namespace kiln {
namespace {

using namespace untrusted;

// Found by fuzz_onnx_build: Expand to a 72-element shape input built a plan (rank 72) that the
// plan reader then refused; ranks past the plan's limit are now refused at build, naming the node.
TEST(UntrustedInput, RankPastTheLimitIsRefusedAtBuild) {
  OnnxModel m;
  m.input("data", kF32, {int64_t{3}, int64_t{1}});
  m.input("new_shape", onnx::TensorProto::INT64, {int64_t{72}});
  m.node("Expand", {"data", "new_shape"}, {"expanded"}, "expand0");
  output_any_shape(m, "expanded");
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  expect_message(plan.status(), StatusCode::kInvalidArgument, "node 'expand0' (Expand): output 'expanded': rank 72");
  OnnxModel declared;
  declared.input("x", kF32, std::vector<testing::OnnxDim>(65, int64_t{1}));
  declared.node("Relu", {"x"}, {"y"}, "relu0");
  output_any_shape(declared, "y");
  expect_message(import(declared).status(), StatusCode::kInvalidModel, "value 'x': rank 65");
}

// Found by fuzz_plan_run (UBSan): Reshape multiplied the target dims without overflow checks.
TEST(UntrustedInput, ReshapeTargetPastInt64IsAnError) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{4}});
  m.input("shape", onnx::TensorProto::INT64, {int64_t{3}});
  m.node("Reshape", {"x", "shape"}, {"y"}, "reshape0");
  output_any_shape(m, "y");
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->create_execution_context();
  Tensor shape(DataType::kInt64, {3});
  shape.data<int64_t>()[0] = int64_t{3298534876422};
  shape.data<int64_t>()[1] = int64_t{137438953474};
  shape.data<int64_t>()[2] = -1;
  ASSERT_TRUE(ctx->set_input("x", Tensor(DataType::kFloat32, {4})).ok());
  ASSERT_TRUE(ctx->set_input("shape", shape).ok());
  expect_message(ctx->execute(), StatusCode::kInvalidArgument, "node 'reshape0' (Reshape): shape [3298534876422,137438953474,-1]");
}

// A kernel allocating past the limits (the interpreter's catch) is a Status naming the node.
TEST(UntrustedInput, KernelAllocationFailureNamesTheNode) {
  OnnxModel m;
  m.input("shape", onnx::TensorProto::INT64, {int64_t{2}});
  m.node("ConstantOfShape", {"shape"}, {"y"}, "fill0");
  output_any_shape(m, "y");
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  Tensor shape(DataType::kInt64, {2});
  shape.data<int64_t>()[0] = int64_t{1} << 30;
  shape.data<int64_t>()[1] = int64_t{1} << 30;  // 2^60 floats
  ASSERT_TRUE(ctx->set_input("shape", shape).ok());
  Status s = ctx->execute();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node 'fill0' (ConstantOfShape)"), std::string::npos) << s.to_string();
  shape.data<int64_t>()[0] = int64_t{1} << 20;
  shape.data<int64_t>()[1] = int64_t{1} << 22;  // 2^42 floats = 16 TiB: past physical memory
  ASSERT_TRUE(ctx->set_input("shape", shape).ok());
  s = ctx->execute();
  expect_message(s, StatusCode::kOutOfMemory, "cannot allocate 17592186044416 bytes");
}

TEST(UntrustedInput, CheckedSizes) {
  EXPECT_EQ(*checked_numel({2, 3, 4}, "t"), 24);
  EXPECT_EQ(*checked_numel({}, "t"), 1);
  EXPECT_EQ(*checked_numel({int64_t{1} << 62, 0}, "t"), 0);
  expect_message(checked_numel({int64_t{1} << 62, 4}, "input 'x'").status(), StatusCode::kInvalidArgument,
                 "input 'x': shape [4611686018427387904,4]");
  expect_message(checked_numel({2, -1}, "t").status(), StatusCode::kInvalidArgument, "negative");
  EXPECT_EQ(*checked_nbytes(DataType::kInt4, {5}, "t"), 3);
  EXPECT_EQ(*checked_nbytes(DataType::kFloat32, {int64_t{1} << 47}, "t"), int64_t{1} << 49);
  expect_message(checked_nbytes(DataType::kFloat64, {int64_t{1} << 48}, "w").status(), StatusCode::kInvalidArgument,
                 "2^50");
  EXPECT_EQ(shape_numel({int64_t{1} << 62, 8}), INT64_MAX);  // saturates, never wraps
}

// Garbage read: a Conv without its W input reached fuse_conv_epilogue (out-of-range index).
TEST(UntrustedInput, ConvWithoutWeightIsRejectedAtImport) {
  auto g = import(conv_model(int64_t{1}, 0, {"x"}));
  ASSERT_FALSE(g.ok());
  expect_message(g.status(), StatusCode::kInvalidModel, "node 'conv0' (Conv): has 1 inputs, expected 2 to 3");
  g = import(conv_model(int64_t{1}, 0, {"x", ""}));
  expect_message(g.status(), StatusCode::kInvalidModel, "node 'conv0' (Conv): required input 1 is missing");
}

// Silent acceptance: a Conv whose X input is empty.
TEST(UntrustedInput, ConvWithEmptyInputIsRejected) {
  auto g = import(conv_model(int64_t{1}, 0, {"", "W"}));
  expect_message(g.status(), StatusCode::kInvalidModel, "node 'conv0' (Conv): required input 0 is missing");
}

// Silent acceptance: an attribute Conv does not have.
TEST(UntrustedInput, UnknownAttributeIsAnErrorOrANamedWarning) {
  OnnxModel m = conv_model(int64_t{1});
  auto* a = m.proto().mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("fused_activation");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("Relu");
  auto g = import(m);
  expect_message(g.status(), StatusCode::kUnsupported, "node 'conv0' (Conv): attribute 'fused_activation'");
  std::vector<std::string> warnings;
  onnx_import::ImportOptions allow;
  allow.allow_unknown = true;
  allow.warnings = &warnings;
  g = import(m, allow);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("'fused_activation'"), std::string::npos) << warnings[0];
}

// Gemm's activation is Kiln's own (passes/fuse_gemm_activation.cc, docs/decisions/0058): a model
// that sets it would have its Gemm followed by a Relu it never asked for, so it is refused even
// where unknown attributes are allowed.
TEST(UntrustedInput, KilnsInternalGemmActivationIsRefusedEvenWhenUnknownAreAllowed) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{2}, int64_t{3}});
  m.initializer("w", {3, 4}, std::vector<float>(12, 0.5f));
  auto* n = m.node("Gemm", {"x", "w"}, {"y"}, "gemm0");
  auto* a = n->add_attribute();
  a->set_name("activation");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("Relu");
  output_any_shape(m, "y");
  const char* want = "node 'gemm0' (Gemm): attribute 'activation' is Kiln's internal attribute";
  expect_message(import(m).status(), StatusCode::kUnsupported, want);
  onnx_import::ImportOptions allow;
  allow.allow_unknown = true;
  std::vector<std::string> warnings;
  allow.warnings = &warnings;
  expect_message(import(m, allow).status(), StatusCode::kUnsupported, want);
  // Without the attribute the same model imports.
  n->clear_attribute();
  EXPECT_TRUE(import(m).ok());
}

TEST(UntrustedInput, AttributeOfTheWrongTypeIsRejected) {
  OnnxModel m = conv_model(int64_t{1});
  auto* a = m.proto().mutable_graph()->mutable_node(0)->add_attribute();
  a->set_name("group");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(1.0f);
  expect_message(import(m).status(), StatusCode::kInvalidModel, "attribute 'group' has type FLOAT, Conv-11 defines it as INT");
}

TEST(UntrustedInput, NewerOpsetAndIrVersionAreErrors) {
  OnnxModel m(99);
  m.input("x", kF32, {int64_t{2}});
  m.node("Relu", {"x"}, {"y"}, "relu0");
  output_any_shape(m, "y");
  expect_message(import(m).status(), StatusCode::kUnsupported, "ai.onnx opset 99 is newer than Kiln knows");
  OnnxModel ir = testing::static_model();
  ir.proto().set_ir_version(99);
  expect_message(import(ir).status(), StatusCode::kUnsupported, "ONNX IR version 99 is newer than Kiln reads");
  onnx_import::ImportOptions allow;
  allow.allow_unknown = true;
  std::vector<std::string> warnings;
  allow.warnings = &warnings;
  EXPECT_TRUE(import(ir, allow).ok());
  EXPECT_EQ(warnings.size(), 1u);
}

// Arity follows the node's opset: Clip-6 takes min/max as attributes, so inputs 1 and 2 there
// would be ignored; Clip-11 takes them as inputs.
TEST(UntrustedInput, ArityFollowsTheOpset) {
  auto clip = [](int opset) {
    OnnxModel m(opset);
    m.input("x", kF32, {int64_t{4}});
    m.initializer("lo", {}, {0.f});
    m.initializer("hi", {}, {1.f});
    m.node("Clip", {"x", "lo", "hi"}, {"y"}, "clip0");
    output_any_shape(m, "y");
    return m;
  };
  expect_message(import(clip(6)).status(), StatusCode::kInvalidModel, "node 'clip0' (Clip): has 3 inputs, expected 1");
  EXPECT_TRUE(import(clip(11)).ok()) << import(clip(11)).status().to_string();
}

TEST(UntrustedInput, GraphWithoutOutputsIsRejected) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{2}});
  m.node("Relu", {"x"}, {"y"}, "relu0");
  expect_message(import(m).status(), StatusCode::kInvalidModel, "has no outputs");
}

TEST(UntrustedInput, EmptyAndDuplicateNamesAreRejected) {
  OnnxModel dup_init = testing::static_model();
  dup_init.initializer("b", {3}, {0.f, 0.f, 0.f});
  expect_message(import(dup_init).status(), StatusCode::kInvalidModel, "initializer 'b' is defined twice");
  OnnxModel dup_in = testing::static_model();
  dup_in.input("x", kF32, {int64_t{2}, int64_t{3}});
  expect_message(import(dup_in).status(), StatusCode::kInvalidModel, "graph input 'x' is listed twice");
  OnnxModel empty_out = testing::static_model();
  empty_out.output("", kF32, {int64_t{1}});
  expect_message(import(empty_out).status(), StatusCode::kInvalidModel, "has an empty name");
}

// Silent wrong values: SpaceToDepth has no `mode` in ONNX; mode=CRD was ignored. It is an unknown
// attribute now, and under --allow-unknown-attributes the kernel refuses a mode it does not compute.
TEST(UntrustedInput, SpaceToDepthModeIsNotIgnored) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{1}, int64_t{2}, int64_t{2}, int64_t{2}});
  auto* n = m.node("SpaceToDepth", {"x"}, {"y"}, "s2d");
  auto* b = n->add_attribute();
  b->set_name("blocksize");
  b->set_type(onnx::AttributeProto::INT);
  b->set_i(2);
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("CRD");
  output_any_shape(m, "y");
  expect_message(import(m).status(), StatusCode::kUnsupported, "node 's2d' (SpaceToDepth): attribute 'mode'");
  onnx_import::ImportOptions allow;
  allow.allow_unknown = true;
  auto g = import(m, allow);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  BuilderConfig c = cpu_config();
  c.opt_level = 0;
  auto plan = build_from_graph(*g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok());
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", Tensor(DataType::kFloat32, {1, 2, 2, 2})).ok());
  expect_message(ctx->execute(), StatusCode::kUnsupported, "mode 'CRD'");
}

// DepthToSpace CRD (ONNX's formula): y[n, c, h*b + i, w*b + j] = x[n, c*b*b + i*b + j, h, w].
TEST(UntrustedInput, DepthToSpaceCrdFollowsTheSpec) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{1}, int64_t{8}, int64_t{2}, int64_t{3}});
  auto* n = m.node("DepthToSpace", {"x"}, {"y"}, "d2s");
  auto* b = n->add_attribute();
  b->set_name("blocksize");
  b->set_type(onnx::AttributeProto::INT);
  b->set_i(2);
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("CRD");
  output_any_shape(m, "y");
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  auto ctx = (*engine)->create_execution_context();
  Tensor x(DataType::kFloat32, {1, 8, 2, 3});
  for (int i = 0; i < 48; ++i) x.data<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  Tensor y = *ctx->output("y");
  ASSERT_EQ(y.shape(), (Shape{1, 2, 4, 6}));
  for (int c = 0; c < 2; ++c)
    for (int h = 0; h < 2; ++h)
      for (int w = 0; w < 3; ++w)
        for (int i = 0; i < 2; ++i)
          for (int j = 0; j < 2; ++j)
            EXPECT_EQ(y.data<float>()[(c * 4 + h * 2 + i) * 6 + w * 2 + j],
                      x.data<float>()[((c * 4 + i * 2 + j) * 2 + h) * 3 + w]);
}

// An If whose branch outputs (and the If's output) carry an empty TypeProto; the then branch
// adds 1, the else branch adds a [4] tensor to a [3] one (cannot run at these shapes).
OnnxModel untyped_if_model() {
  OnnxModel m;
  m.input("cond", kBool, {});
  m.input("x", kF32, {int64_t{3}});
  auto* n = m.node("If", {"cond"}, {"y"}, "if0");
  auto branch = [&](const char* attr, int64_t len) {
    auto* a = n->add_attribute();
    a->set_name(attr);
    a->set_type(onnx::AttributeProto::GRAPH);
    auto* g = a->mutable_g();
    g->set_name(attr);
    auto* c = g->add_initializer();
    c->set_name(std::string(attr) + "_c");
    c->set_data_type(kF32);
    c->add_dims(len);
    for (int64_t i = 0; i < len; ++i) c->add_float_data(1.0f);
    auto* add = g->add_node();
    add->set_op_type("Add");
    add->set_name(std::string(attr) + "_add");
    add->add_input("x");
    add->add_input(c->name());
    add->add_output(std::string(attr) + "_out");
    auto* o = g->add_output();
    o->set_name(std::string(attr) + "_out");
    o->mutable_type();  // present but empty: allowed by ONNX
  };
  branch("then_branch", 3);
  branch("else_branch", 4);
  auto* o = m.proto().mutable_graph()->add_output();
  o->set_name("y");
  o->mutable_type();
  return m;
}

TEST(UntrustedInput, UntypedIfOutputsAreInferredAndOnlyARunnableBranchIsChecked) {
  auto g = import(untyped_if_model());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  Tensor x(DataType::kFloat32, {3});
  for (int i = 0; i < 3; ++i) x.data<float>()[i] = static_cast<float>(i);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->set_input("cond", Tensor::scalar<uint8_t>(DataType::kBool, 1)).ok());
  ASSERT_TRUE(ctx->execute().ok());
  Tensor y = *ctx->output("y");
  ASSERT_EQ(y.dtype(), DataType::kFloat32);
  ASSERT_EQ(y.shape(), (Shape{3}));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y.data<float>()[i], i + 1.0f);
  // The else branch cannot run at these shapes: taking it is a clear run-time error.
  ASSERT_TRUE(ctx->set_input("cond", Tensor::scalar<uint8_t>(DataType::kBool, 0)).ok());
  Status s = ctx->execute();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("else_branch_add"), std::string::npos) << s.to_string();
}

// A Loop whose body outputs and node outputs are untyped: the carried value's type and shape
// come from the body. y = x + 3 after three iterations of v += 1.
TEST(UntrustedInput, UntypedLoopOutputsAreInferredFromTheBody) {
  OnnxModel m;
  m.input("x", kF32, {int64_t{2}});
  auto* trips = m.proto().mutable_graph()->add_initializer();
  trips->set_name("M");
  trips->set_data_type(onnx::TensorProto::INT64);
  trips->add_int64_data(3);
  auto* n = m.node("Loop", {"M", "", "x"}, {"y"}, "loop0");
  auto* a = n->add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  body->set_name("body");
  auto typed_input = [&](const char* name, int elem) {
    auto* vi = body->add_input();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
  };
  typed_input("i", onnx::TensorProto::INT64);
  typed_input("cond_in", kBool);
  typed_input("v_in", kF32);
  auto* one = body->add_initializer();
  one->set_name("one");
  one->set_data_type(kF32);
  one->add_float_data(1.0f);
  auto add_node = [&](const char* op, std::vector<std::string> in, const char* out) {
    auto* b = body->add_node();
    b->set_op_type(op);
    b->set_name(std::string(op) + "_" + out);
    for (const auto& s : in) b->add_input(s);
    b->add_output(out);
  };
  add_node("Identity", {"cond_in"}, "cond_out");
  add_node("Add", {"v_in", "one"}, "v_out");
  for (const char* o : {"cond_out", "v_out"}) {
    auto* vi = body->add_output();
    vi->set_name(o);
    vi->mutable_type();  // empty
  }
  auto* y = m.proto().mutable_graph()->add_output();
  y->set_name("y");
  y->mutable_type();
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, cpu_config());
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  Tensor x(DataType::kFloat32, {2});
  x.data<float>()[0] = 1.5f;
  x.data<float>()[1] = -4.0f;
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  Tensor out = *ctx->output("y");
  ASSERT_EQ(out.dtype(), DataType::kFloat32);
  ASSERT_EQ(out.shape(), (Shape{2}));
  EXPECT_EQ(out.data<float>()[0], 4.5f);
  EXPECT_EQ(out.data<float>()[1], -1.0f);
}

}  // namespace
}  // namespace kiln
