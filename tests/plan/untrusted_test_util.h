// Shared by the issue-15 regression tests (untrusted_input_test.cc, untrusted_cli_test.cc): a
// Conv model with a chosen batch, pads and inputs, outputs without shapes, and import helpers.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "plan/plan_test_util.h"

namespace kiln::untrusted {

using testing::kF32;
using testing::OnnxModel;
constexpr int kBool = onnx::TensorProto::BOOL;

inline void expect_message(const Status& s, StatusCode code, const std::string& part) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(part), std::string::npos) << "message: " << s.message() << "\nmissing: " << part;
}

// A graph output with an element type and no shape.
inline void output_any_shape(OnnxModel& m, const std::string& name) {
  auto* vi = m.proto().mutable_graph()->add_output();
  vi->set_name(name);
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(kF32);
}

// y = Conv(x [batch, 3, 8, 8], W [4, 3, 3, 3]) with the given pads; `inputs` overrides the
// node's inputs (a missing W, an empty X).
inline OnnxModel conv_model(testing::OnnxDim batch, int64_t pad = 0, std::vector<std::string> inputs = {"x", "W"}) {
  OnnxModel m;
  m.input("x", kF32, {batch, int64_t{3}, int64_t{8}, int64_t{8}});
  m.initializer("W", {4, 3, 3, 3}, std::vector<float>(108, 0.125f));
  auto* n = m.node("Conv", inputs, {"y"}, "conv0");
  auto* a = n->add_attribute();
  a->set_name("pads");
  a->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) a->add_ints(pad);
  output_any_shape(m, "y");
  return m;
}

inline StatusOr<ir::Graph> import(const OnnxModel& m, onnx_import::ImportOptions o = {}) {
  return onnx_import::import_model_bytes(m.bytes(), ".", o);
}

// These tests check the CPU reference path (a GPU machine would otherwise build CUDA plans).
inline BuilderConfig cpu_config() {
  BuilderConfig c;
  c.target = TargetDevice::kCpu;
  return c;
}

}  // namespace kiln::untrusted
