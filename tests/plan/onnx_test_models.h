// Tiny ONNX models written with the onnx protobuf C++ API, for builder/plan/runtime/CLI tests.
#pragma once

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

namespace kiln::testing {

using OnnxDim = std::variant<int64_t, std::string>;  // fixed extent or a symbol ("batch")

class OnnxModel {
 public:
  explicit OnnxModel(int opset = 17) {
    m_.set_ir_version(8);
    m_.set_producer_name("kiln-tests");
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }
  void input(const std::string& name, int elem_type, const std::vector<OnnxDim>& dims) {
    set_type(m_.mutable_graph()->add_input(), name, elem_type, dims);
  }
  void output(const std::string& name, int elem_type, const std::vector<OnnxDim>& dims) {
    set_type(m_.mutable_graph()->add_output(), name, elem_type, dims);
  }
  void initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& data) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : data) t->add_float_data(v);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::vector<std::string>& out,
                        const std::string& name, const std::string& domain = "") {
    auto* n = m_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    if (!domain.empty()) n->set_domain(domain);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return n;
  }
  void add_opset(const std::string& domain, int version) {
    auto* o = m_.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  // The underlying ModelProto, for tests that write what the helpers above cannot (IR
  // versions, empty types, subgraphs, external data keys).
  onnx::ModelProto& proto() { return m_; }
  std::string bytes() const { return m_.SerializeAsString(); }
  std::string save(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    f << bytes();
    return path;
  }

 private:
  static void set_type(onnx::ValueInfoProto* vi, const std::string& name, int elem_type, const std::vector<OnnxDim>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const auto& d : dims) {
      auto* dim = shape->add_dim();
      if (std::holds_alternative<int64_t>(d)) dim->set_dim_value(std::get<int64_t>(d));
      else dim->set_dim_param(std::get<std::string>(d));
    }
  }
  onnx::ModelProto m_;
};

constexpr int kF32 = onnx::TensorProto::FLOAT;

// y = Relu(x + b): x float32 [batch, 4], b a [4] initializer.
inline OnnxModel add_relu_model() {
  OnnxModel m;
  m.input("x", kF32, {std::string("batch"), int64_t{4}});
  m.initializer("b", {4}, {0.5f, -0.25f, 1.0f, -2.0f});
  m.node("Add", {"x", "b"}, {"sum"}, "add0");
  m.node("Relu", {"sum"}, {"y"}, "relu0");
  m.output("y", kF32, {std::string("batch"), int64_t{4}});
  return m;
}

// out = Relu(x + b) * 2 with a fixed x [2, 3] (needs no profile).
inline OnnxModel static_model() {
  OnnxModel m;
  m.input("x", kF32, {int64_t{2}, int64_t{3}});
  m.initializer("b", {3}, {1.f, -1.f, 0.5f});
  m.initializer("two", {1}, {2.f});
  m.node("Add", {"x", "b"}, {"s"}, "add0");
  m.node("Relu", {"s"}, {"r"}, "relu0");
  m.node("Mul", {"r", "two"}, {"out:0"}, "mul0");  // ':' exercises output file-name sanitizing
  m.output("out:0", kF32, {int64_t{2}, int64_t{3}});
  return m;
}

// y = MatMul(Relu(Gemm(x, W1^T) + b1), W2): x [batch, 4], W1 [8, 4] (transB), W2 [8, 3], weights
// from a fixed formula (for quantization tests: two layers with constant weights).
inline OnnxModel mlp_model(int opset = 17) {
  OnnxModel m(opset);
  m.input("x", kF32, {std::string("batch"), int64_t{4}});
  std::vector<float> w1(32), b1(8), w2(24);
  for (int i = 0; i < 32; ++i) w1[i] = 0.9f * static_cast<float>(((i * 37) % 61) - 30) / 30.f;
  for (int i = 0; i < 8; ++i) b1[i] = 0.01f * static_cast<float>(i - 4);
  for (int i = 0; i < 24; ++i) w2[i] = 0.5f * static_cast<float>(((i * 17) % 23) - 11) / 11.f;
  m.initializer("W1", {8, 4}, w1);
  m.initializer("b1", {8}, b1);
  m.initializer("W2", {8, 3}, w2);
  auto* g = m.node("Gemm", {"x", "W1", "b1"}, {"h"}, "fc1");
  auto* a = g->add_attribute();
  a->set_name("transB");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  m.node("Relu", {"h"}, {"r"}, "relu1");
  m.node("MatMul", {"r", "W2"}, {"y"}, "fc2");
  m.output("y", kF32, {std::string("batch"), int64_t{3}});
  return m;
}

// A fresh directory under the system temp dir, removed by the caller (or left for debugging).
inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("kiln_" + tag + "_XXXXXX")).string();
  char* p = mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

}  // namespace kiln::testing
