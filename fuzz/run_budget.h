// Harness-only work budget for one fuzz run (not a library limit): before run_small runs an
// engine, the harness re-infers the layer graph's shapes at the inputs it will feed and skips the
// run when any value or the estimated arithmetic is large. A mutated plan may carry attributes
// (pads, kernel, strides) that disagree with its recorded shapes; the engine then honestly computes
// the large result (up to the 256 MiB allocation limit of fuzz_common.h), which under ASan took
// up to 15 s per input and kept fuzz_plan_run near 500 executions/s. The library's own checks are
// unchanged; only the fuzzer declines to spend its time on such runs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/numerics.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "kiln/tensor.h"

namespace kiln::fuzz {

// Largest value (elements) and largest estimated work (element operations, see graph_cost) of a
// run the harness performs. A run at the limit takes ~0.1 s under ASan at -O1 (the slow Conv
// inputs ran ~200M element operations/s).
constexpr double kMaxRunValueElements = double{1 << 20};
constexpr double kMaxRunCost = double{1 << 24};
// Loops whose trip count is not a small constant are not run (the count may come from data).
constexpr int64_t kMaxLoopTrips = 64;

namespace budget_detail {

// Elements of `v` when every dim is known; nullopt otherwise.
inline std::optional<double> numel(const ir::Graph& g, ir::ValueId id) {
  if (id == ir::kNoValue) return 0.0;
  const ir::Value& v = g.value(id);
  if (v.kind != ir::ValueKind::kTensor || !v.shape) return std::nullopt;
  double n = 1;
  for (const ir::Dim& d : *v.shape) {
    if (!d.is_known()) return std::nullopt;
    n *= static_cast<double>(d.value);
  }
  return n;
}

inline std::optional<double> dim(const ir::Graph& g, ir::ValueId id, size_t i) {
  if (id == ir::kNoValue) return std::nullopt;
  const ir::Value& v = g.value(id);
  if (!v.shape || i >= v.shape->size() || !(*v.shape)[i].is_known()) return std::nullopt;
  return static_cast<double>((*v.shape)[i].value);
}

// The largest dim of `id` (an upper bound of a contraction length); nullopt when unknown.
inline std::optional<double> max_dim(const ir::Graph& g, ir::ValueId id) {
  if (id == ir::kNoValue || !g.value(id).shape) return std::nullopt;
  double m = 1;
  for (const ir::Dim& d : *g.value(id).shape) {
    if (!d.is_known()) return std::nullopt;
    m = d.value > m ? static_cast<double>(d.value) : m;
  }
  return m;
}

inline std::optional<int64_t> constant_scalar(const ir::Graph& g, ir::ValueId id) {
  if (id == ir::kNoValue) return std::nullopt;
  const ir::Value& v = g.value(id);
  if (!v.constant || v.constant->numel() != 1 || !dtype_is_integer(v.constant->dtype())) return std::nullopt;
  return load_as_int64(v.constant->dtype(), v.constant->raw(), 0);
}

}  // namespace budget_detail

// Estimated element operations of running `g` (shapes already inferred): every value read and
// written, plus the inner loop of the contracting ops (Conv*: output x weight elements per output
// channel; MatMul / Gemm / Attention / Einsum: output x the largest dim of any operand; pools: output
// x window), subgraphs by their trip count. nullopt: a value or the total is past the limits above,
// or a Loop's trip count is not a small constant (the harness then does not run the engine).
// Terms whose shapes are unknown (data-dependent sizes) are left out and set *unknown.
inline std::optional<double> graph_cost(const ir::Graph& g, bool* unknown) {
  using namespace budget_detail;
  double total = 0;
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    double in = 0, out = 0;
    for (ir::ValueId v : n.inputs) {
      auto e = numel(g, v);
      if (!e) { *unknown = true; continue; }
      in += *e;
    }
    for (ir::ValueId v : n.outputs) {
      auto e = numel(g, v);
      if (!e) { *unknown = true; continue; }
      if (*e > kMaxRunValueElements) return std::nullopt;
      out += *e;
    }
    double cost = in + out;
    const ir::ValueId a = n.inputs.empty() ? ir::kNoValue : n.inputs[0];
    switch (n.op) {
      case ir::OpKind::kConv: case ir::OpKind::kFusedConv: case ir::OpKind::kConvInteger:
      case ir::OpKind::kConvTranspose: case ir::OpKind::kQLinearConv: {
        const ir::ValueId w = n.inputs.size() > 3 && n.op == ir::OpKind::kQLinearConv ? n.inputs[3]
                              : n.inputs.size() > 1 ? n.inputs[1] : ir::kNoValue;
        auto we = numel(g, w);
        auto w0 = dim(g, w, 0);
        auto ie = numel(g, a);
        if (!we || !w0 || !ie) { *unknown = true; break; }
        cost += (out > *ie ? out : *ie) * (*we / (*w0 > 0 ? *w0 : 1));
        break;
      }
      case ir::OpKind::kMatMul: case ir::OpKind::kMatMulBias: case ir::OpKind::kGemm: case ir::OpKind::kMatMulInteger:
      case ir::OpKind::kQLinearMatMul: case ir::OpKind::kAttention: case ir::OpKind::kEinsum: {
        double k = 1;
        for (ir::ValueId v : n.inputs) {
          auto m = max_dim(g, v);
          if (!m) { *unknown = true; continue; }
          k = *m > k ? *m : k;
        }
        cost += out * k;
        break;
      }
      case ir::OpKind::kMaxPool: case ir::OpKind::kAveragePool: case ir::OpKind::kLpPool: {
        double window = 1;
        for (int64_t kd : n.attr_ints("kernel_shape")) window *= static_cast<double>(kd > 0 ? kd : 1);
        cost += out * window;
        break;
      }
      case ir::OpKind::kLSTM: case ir::OpKind::kGRU: case ir::OpKind::kRNN: {
        auto w = numel(g, n.inputs.size() > 1 ? n.inputs[1] : ir::kNoValue);
        auto r = numel(g, n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue);
        auto seq = dim(g, a, 0), batch = dim(g, a, 1);
        if (!w || !r || !seq || !batch) { *unknown = true; break; }
        cost += *seq * *batch * (*w + *r);
        break;
      }
      default:
        break;
    }
    double trips = 1;
    if (n.op == ir::OpKind::kLoop) {
      auto m = constant_scalar(g, a);
      if (!m || *m < 0 || *m > kMaxLoopTrips) return std::nullopt;
      trips = static_cast<double>(*m);
    } else if (n.op == ir::OpKind::kScan) {
      trips = out;  // an upper bound of the sequence length
    }
    for (const auto& [name, attr] : n.attrs) {
      if (attr.kind != ir::Attribute::Kind::kGraph || !attr.g) continue;
      auto sub = graph_cost(*attr.g, unknown);
      if (!sub) return std::nullopt;
      cost += trips * *sub;
    }
    total += cost;
    if (total > kMaxRunCost) return std::nullopt;
  }
  return total;
}

enum class RunBudget {
  kWithin,       // run it
  kOver,         // past the limits: skip the run
  kCapped,       // shape inference refuses the graph or leaves sizes unknown: run it with single
                 // allocations capped at kMaxRunValueElements (8-byte) elements
};

// Whether running `engine_graph` on inputs of `input_shapes` (by name) stays inside the budget:
// the shapes are re-inferred from the layers' attributes on a copy of the graph (the shapes a plan
// records are not trusted here), then graph_cost decides.
inline RunBudget check_run_budget(const ir::Graph& engine_graph, const std::map<std::string, Shape>& input_shapes) {
  ir::Graph g = engine_graph;
  if (!ir::infer_shapes(g, &input_shapes).ok()) return RunBudget::kCapped;
  bool unknown = false;
  if (!graph_cost(g, &unknown)) return RunBudget::kOver;
  return unknown ? RunBudget::kCapped : RunBudget::kWithin;
}

}  // namespace kiln::fuzz
