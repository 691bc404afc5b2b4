// Helpers for differential pass tests: build a tiny graph, run it unoptimized and optimized on
// the CPU reference, compare, then let the test assert the rewritten structure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/graph.h"
#include "passes/passes.h"
#include "backends/cpu/interpreter.h"

namespace kiln::testing {

// A scalar Q/DQ parameter of type t: a float32 scale v, an int8 zero point v, or the float8e4m3fn
// zero point (code 0) whatever v.
inline Tensor qdq_scalar(DataType t, float v) {
  Tensor s(t, Shape{});
  if (t == DataType::kFloat32) s.data<float>()[0] = v;
  else if (t == DataType::kInt8) s.data<int8_t>()[0] = static_cast<int8_t>(v);
  else s.data<uint8_t>()[0] = 0;  // float8e4m3fn 0
  return s;
}

inline Tensor random_tensor(Shape shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t(DataType::kFloat32, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

inline ir::SymShape sym(const Shape& s) {
  ir::SymShape r;
  for (int64_t d : s) r.push_back(ir::Dim::known(d));
  return r;
}

// A 1-D int64 tensor holding v (shape operands, axes, indices).
inline Tensor int64_tensor(const std::vector<int64_t>& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return t;
}

// A graph under construction with float32 values of known shape.
struct TinyGraph {
  ir::Graph g;
  TinyGraph() { g.opset_imports[""] = 17; }
  ir::ValueId input(const std::string& name, const Shape& s) {
    ir::ValueId v = g.add_value(name, DataType::kFloat32);
    g.value(v).shape = sym(s);
    g.inputs.push_back(v);
    return v;
  }
  ir::ValueId constant(const std::string& name, Tensor t) {
    ir::ValueId v = g.add_value(name, t.dtype());
    g.value(v).shape = sym(t.shape());
    g.value(v).constant = std::make_shared<Tensor>(std::move(t));
    return v;
  }
  // A 1-D int64 constant (a Reshape's shape, a Slice's starts, ...).
  ir::ValueId ints(const std::string& name, const std::vector<int64_t>& v) { return constant(name, int64_tensor(v)); }
  ir::ValueId node(ir::OpKind op, const std::string& name, std::vector<ir::ValueId> in, const Shape& out_shape,
                   std::map<std::string, ir::Attribute> attrs = {}) {
    ir::ValueId out = g.add_value(name + "_out", DataType::kFloat32);
    g.value(out).shape = sym(out_shape);
    ir::Node n;
    n.name = name;
    n.op = op;
    n.opset = 17;
    n.inputs = std::move(in);
    n.outputs = {out};
    n.attrs = std::move(attrs);
    g.add_node(std::move(n));
    return out;
  }
};

// |x - y|, NaN-aware: 0 where both are NaN or the same infinity, infinity where only one is NaN
// (std::max with a NaN argument would keep the old maximum and hide the mismatch).
inline double abs_diff_nan_aware(double x, double y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y) ? 0.0 : INFINITY;
  if (x == y) return 0.0;  // equal infinities too
  return std::fabs(x - y);
}

// Max |a - b| / max |a| over all outputs (a NaN in only one of them counts as an infinite difference).
inline double relative_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].shape(), b[k].shape());
    for (int64_t i = 0; i < a[k].numel(); ++i) {
      num = std::max(num, abs_diff_nan_aware(a[k].data<float>()[i], b[k].data<float>()[i]));
      if (std::isfinite(a[k].data<float>()[i])) den = std::max(den, static_cast<double>(std::fabs(a[k].data<float>()[i])));
    }
  }
  return den > 0 ? num / den : num;
}

// PassOptions as the builder sets them up: the CPU reference kernels as constant evaluator.
inline passes::PassOptions reference_pass_options() {
  passes::PassOptions o;
  o.evaluator = &reference_evaluator();
  return o;
}

// Runs `g` before and after `pass`; expects agreement within 1e-5 relative; returns the rewritten graph.
inline ir::Graph check_pass(const ir::Graph& g, Status (*pass)(ir::Graph&, const passes::PassOptions&),
                            const std::vector<Tensor>& inputs) {
  auto before = interpret(g, inputs);
  EXPECT_TRUE(before.ok()) << before.status().to_string();
  ir::Graph opt = g;
  Status s = pass(opt, reference_pass_options());
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(opt.topo_sort().ok());
  auto after = interpret(opt, inputs);
  EXPECT_TRUE(after.ok()) << after.status().to_string();
  if (before.ok() && after.ok()) {
    EXPECT_LE(relative_diff(*before, *after), 1e-5);
  }
  return opt;
}

// The one live node of `op` (a failure, and nullptr, where there are none or several).
inline const ir::Node* only_node(const ir::Graph& g, ir::OpKind op) {
  const ir::Node* found = nullptr;
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == op) {
      EXPECT_EQ(found, nullptr) << "more than one " << ir::op_name(op);
      if (found) return nullptr;
      found = &n;
    }
  EXPECT_NE(found, nullptr) << "no " << ir::op_name(op);
  return found;
}

inline int count_op(const ir::Graph& g, ir::OpKind op) {
  int n = 0;
  for (const auto& node : g.nodes) n += !node.removed && node.op == op;
  return n;
}

}  // namespace kiln::testing
