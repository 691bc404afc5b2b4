// Tiny ONNX models written with the onnx protobuf C++ API, for builder/plan/runtime/CLI tests.
#pragma once

#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
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
  // An initializer of an integer element type (int8, uint8, int32, ...): one int32_data entry
  // per element (onnx.proto, for 8- to 32-bit types).
  void int_initializer(const std::string& name, int elem_type, const std::vector<int64_t>& dims,
                       const std::vector<int32_t>& data) {
    auto* t = m_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem_type);
    for (int64_t d : dims) t->add_dims(d);
    for (int32_t v : data) t->add_int32_data(v);
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

// A Q/DQ CNN + MLP shaped like ONNX Runtime's static quantizer output (QDQ format: int8
// activations with zero points, int8 per-channel weights, int32 biases DQ'd with scale
// s_in * s_w; MaxPool and Reshape wrapped in Q/DQ pairs sharing their input's parameters),
// except that the Flatten before the Gemm is not re-quantized — as QAT exports write it when the
// linear layer's input quantizer sits on the tensor before a view — so the Gemm reads
// Flatten(DQ(Q(.))), not DQ(Q(.)):
//   x [batch, 3, 8, 8] -> FQ(sx, zx) -> Conv(DQ(W1 [16, 3, 3, 3], axis 0), DQ(b1 int32)), pads 1
//     -> Relu -> FQ(s1, z1) -> MaxPool 2x2/2 -> FQ(s1, z1) -> Reshape [-1, 16, 16] -> FQ(s1, z1)
//     -> Flatten -> Gemm(DQ(W2 [32, 256], axis 0), DQ(b2 int32)), transB
//     -> Relu -> FQ(s2, z2) -> MatMul(DQ(W3 [32, 16], axis 1)) + DQ(b3 int32) -> y [batch, 16]
// (FQ = QuantizeLinear then DequantizeLinear with the same scale and zero point.) Weights from
// fixed formulas.
inline OnnxModel ort_qdq_cnn_mlp_model() {
  constexpr int kI8 = onnx::TensorProto::INT8, kI32 = onnx::TensorProto::INT32;
  OnnxModel m(13);
  m.input("x", kF32, {std::string("batch"), int64_t{3}, int64_t{8}, int64_t{8}});
  const float sx = 4.f / 255.f, s1 = 0.03f, s2 = 0.02f;
  const int zx = -5, z1 = -100, z2 = 3;
  auto act = [&m](const std::string& name, float s, int z) {
    m.initializer(name + "_scale", {}, {s});
    m.int_initializer(name + "_zero_point", onnx::TensorProto::INT8, {}, {z});
  };
  act("x", sx, zx);
  act("a1", s1, z1);
  act("a2", s2, z2);
  auto fq = [&m](const std::string& in, const std::string& params, const std::string& out) {
    m.node("QuantizeLinear", {in, params + "_scale", params + "_zero_point"}, {out + "_quantized"}, out + "_QuantizeLinear");
    m.node("DequantizeLinear", {out + "_quantized", params + "_scale", params + "_zero_point"}, {out},
           out + "_DequantizeLinear");
  };
  auto int_attr = [](onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  };
  auto ints_attr = [](onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t e : v) a->add_ints(e);
  };
  // A per-channel int8 weight (codes from a formula, zero points 0) and its int32 bias, DQ'd.
  auto weight = [&](const std::string& name, const std::vector<int64_t>& dims, int axis, float s_in, float s0, int salt) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    const int64_t channels = dims[axis];
    std::vector<int32_t> codes(n), zeros(channels, 0), bias(channels);
    for (int64_t i = 0; i < n; ++i) codes[i] = static_cast<int32_t>((i * (37 + salt)) % 255) - 127;
    std::vector<float> scales(channels), bias_scales(channels);
    for (int64_t c = 0; c < channels; ++c) {
      scales[c] = s0 * (1.f + 0.05f * static_cast<float>((c * 7) % 11));
      bias_scales[c] = s_in * scales[c];
      bias[c] = static_cast<int32_t>((c * 13 + salt) % 41) * 40 - 800;
    }
    m.int_initializer(name, kI8, dims, codes);
    m.initializer(name + "_scale", {channels}, scales);
    m.int_initializer(name + "_zero_point", kI8, {channels}, zeros);
    int_attr(m.node("DequantizeLinear", {name, name + "_scale", name + "_zero_point"}, {name + "_dequantized"},
                    name + "_DequantizeLinear"),
             "axis", axis);
    m.int_initializer(name + "_bias", kI32, {channels}, bias);
    m.initializer(name + "_bias_scale", {channels}, bias_scales);
    m.int_initializer(name + "_bias_zero_point", kI32, {channels}, std::vector<int32_t>(channels, 0));
    int_attr(m.node("DequantizeLinear", {name + "_bias", name + "_bias_scale", name + "_bias_zero_point"},
                    {name + "_bias_dequantized"}, name + "_bias_DequantizeLinear"),
             "axis", 0);
  };
  fq("x", "x", "x_dq");
  weight("W1", {16, 3, 3, 3}, 0, sx, 0.002f, 0);
  auto* conv = m.node("Conv", {"x_dq", "W1_dequantized", "W1_bias_dequantized"}, {"conv"}, "conv1");
  ints_attr(conv, "pads", {1, 1, 1, 1});
  ints_attr(conv, "kernel_shape", {3, 3});
  m.node("Relu", {"conv"}, {"relu1"}, "relu1");
  fq("relu1", "a1", "relu1_dq");
  auto* pool = m.node("MaxPool", {"relu1_dq"}, {"pool"}, "pool1");
  ints_attr(pool, "kernel_shape", {2, 2});
  ints_attr(pool, "strides", {2, 2});
  fq("pool", "a1", "pool_dq");
  m.proto().mutable_graph()->add_initializer()->CopyFrom([] {
    onnx::TensorProto t;
    t.set_name("reshape_shape");
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(3);
    for (int64_t v : {int64_t{-1}, int64_t{16}, int64_t{16}}) t.add_int64_data(v);
    return t;
  }());
  m.node("Reshape", {"pool_dq", "reshape_shape"}, {"reshaped"}, "reshape1");
  fq("reshaped", "a1", "reshaped_dq");
  int_attr(m.node("Flatten", {"reshaped_dq"}, {"flat"}, "flatten1"), "axis", 1);
  weight("W2", {32, 256}, 0, s1, 0.0005f, 3);
  int_attr(m.node("Gemm", {"flat", "W2_dequantized", "W2_bias_dequantized"}, {"fc1"}, "fc1"), "transB", 1);
  m.node("Relu", {"fc1"}, {"relu2"}, "relu2");
  fq("relu2", "a2", "relu2_dq");
  weight("W3", {32, 16}, 1, s2, 0.004f, 5);
  m.node("MatMul", {"relu2_dq", "W3_dequantized"}, {"fc2"}, "fc2");
  m.node("Add", {"fc2", "W3_bias_dequantized"}, {"y"}, "fc2_bias");
  m.output("y", kF32, {std::string("batch"), int64_t{16}});
  return m;
}

// A fresh directory under the system temp dir, removed by the caller (or left for debugging).
// A residual CNN block (ResNet's bottleneck tail) for the 8-bit conv tests (docs/decisions/0078),
// x [batch, 16, 8, 8] -> y [batch, 32, 8, 8]:
//   a = Relu(conv1 3x3 pad 1 (16 -> 16, bias)(x));  y = Relu(conv2 1x1 (16 -> 32, bias)(a) + conv3 1x1 (16 -> 32)(x))
// Weights from fixed formulas.
inline OnnxModel residual_cnn_model(int opset = 17) {
  OnnxModel m(opset);
  m.input("x", kF32, {std::string("batch"), int64_t{16}, int64_t{8}, int64_t{8}});
  auto wave = [](size_t n, float amp, int salt) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = amp * std::sin(0.61f * static_cast<float>(i) + static_cast<float>(salt));
    return v;
  };
  m.initializer("W1", {16, 16, 3, 3}, wave(16 * 16 * 9, 0.2f, 1));
  m.initializer("b1", {16}, wave(16, 0.1f, 2));
  m.initializer("W2", {32, 16, 1, 1}, wave(32 * 16, 0.4f, 3));
  m.initializer("b2", {32}, wave(32, 0.1f, 4));
  m.initializer("W3", {32, 16, 1, 1}, wave(32 * 16, 0.3f, 5));
  auto* pads = m.node("Conv", {"x", "W1", "b1"}, {"c1"}, "conv1")->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i) pads->add_ints(1);
  m.node("Relu", {"c1"}, {"a"}, "relu1");
  m.node("Conv", {"a", "W2", "b2"}, {"c2"}, "conv2");
  m.node("Conv", {"x", "W3"}, {"c3"}, "conv3");
  m.node("Add", {"c2", "c3"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu2");
  m.output("y", kF32, {std::string("batch"), int64_t{32}, int64_t{8}, int64_t{8}});
  return m;
}

inline std::string make_temp_dir(const std::string& tag) {
  std::string tmpl = (std::filesystem::temp_directory_path() / ("kiln_" + tag + "_XXXXXX")).string();
  char* p = mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

}  // namespace kiln::testing
