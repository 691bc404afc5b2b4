// Pointwise-region fusion (TensorRT's pointwise fusion, XLA's loop fusion):
//   g_k(... g_2(g_1(a, b), c) ...)  ->  FusedPointwise(a, b, c, ...){program="r0=g1(in0,in1); r1=g2(r0,in2); ..."}
// for single-output regions (chains and small DAGs) of float32/float16 elementwise layers —
// Add Sub Mul Div Max Min Pow(scalar constant exponent) Relu LeakyRelu Sigmoid Tanh Exp Log Sqrt
// Reciprocal Neg Abs Erf Clip HardSigmoid HardSwish Gelu Softplus Elu, and per-tensor
// QuantizeLinear -> DequantizeLinear pairs (INT8/UINT8/FP8 E4M3FN/E5M2; a lone pair is fused alone
// too, so a Q/DQ model's activations need no Q/DQ layers). Every value computed
// inside a region is read only inside it (not a graph output, not read by a subgraph); scalar
// constants become immediates, activations and other constants become inputs (at most 8,
// numpy-broadcast, so the output is their broadcast); regions of one layer stay as they are.
// Regions grow upwards from their last layer, visited in reverse topological order.
#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <optional>

#include "ir/pointwise_program.h"
#include "passes/passes.h"
#include "passes/pattern.h"

namespace kiln::passes {

namespace {

namespace pt = pattern;
using ir::OpKind;
using ir::PwOpcode;

// One layer as one instruction: operand k is the value vals[k], or the immediate imm[k] when
// vals[k] is kNoValue.
struct Step {
  PwOpcode op = PwOpcode::kAdd;
  int nargs = 0;
  std::array<ir::ValueId, ir::kMaxPwArgs> vals{ir::kNoValue, ir::kNoValue, ir::kNoValue};
  std::array<float, ir::kMaxPwArgs> imm{};
  ir::NodeId also = -1;  // a layer absorbed with this one (a Q/DQ pair's QuantizeLinear)
};

bool fusable_dtype(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; }

// A one-element float constant of rank <= max_rank (so dropping it changes no shape).
bool immediate_of(const ir::Graph& g, ir::ValueId v, int max_rank, float* out) {
  if (v == ir::kNoValue || !g.value(v).constant || !fusable_dtype(g.value(v).constant->dtype())) return false;
  double d;
  if (!pt::scalar_constant(g, v, max_rank, &d)) return false;
  *out = static_cast<float>(d);
  return true;
}

// Operand k of `s` from value v: an immediate when v is a scalar constant that may drop
// (rank <= max_rank), else the value itself (a float activation or constant).
bool set_operand(const ir::Graph& g, Step* s, int k, ir::ValueId v, int max_rank) {
  if (v == ir::kNoValue) return false;
  if (immediate_of(g, v, max_rank, &s->imm[k])) return true;
  if (!fusable_dtype(g.value(v).dtype) || g.value(v).kind != ir::ValueKind::kTensor) return false;
  s->vals[k] = v;
  return true;
}

// A fixed parameter operand (attribute-sourced): always an immediate.
void set_param(Step* s, int k, float v) { s->imm[k] = v; }

std::optional<Step> binary_step(const ir::Graph& g, const ir::Node& n, PwOpcode op) {
  if (n.inputs.size() != 2) return std::nullopt;
  Step s;
  s.op = op;
  s.nargs = 2;
  for (int k = 0; k < 2; ++k)
    if (!set_operand(g, &s, k, n.inputs[k], pt::rank_of(g, n.inputs[1 - k]))) return std::nullopt;
  if (s.vals[0] == ir::kNoValue && s.vals[1] == ir::kNoValue) return std::nullopt;  // constant folding's job
  return s;
}

std::optional<Step> unary_step(const ir::Graph& g, const ir::Node& n, PwOpcode op, int nargs = 1) {
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue || g.value(n.inputs[0]).constant) return std::nullopt;
  Step s;
  s.op = op;
  s.nargs = nargs;
  if (!set_operand(g, &s, 0, n.inputs[0], -1)) return std::nullopt;
  return s;
}

// Clip's bounds: attributes before opset 11, optional scalar constant inputs since.
std::optional<Step> clip_step(const ir::Graph& g, const ir::Node& n) {
  auto s = unary_step(g, n, PwOpcode::kClip, 3);
  if (!s) return std::nullopt;
  float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
  if (n.opset < 11) {
    lo = n.attr_float("min", lo);
    hi = n.attr_float("max", hi);
  } else {
    for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
      if (n.inputs[k] == ir::kNoValue) continue;
      if (!immediate_of(g, n.inputs[k], 1, k == 1 ? &lo : &hi)) return std::nullopt;
    }
  }
  set_param(&*s, 1, lo);
  set_param(&*s, 2, hi);
  return s;
}

// A one-element constant's value and dtype (a Q/DQ scale or zero point).
bool scalar_of(const ir::Graph& g, ir::ValueId v, double* out, DataType* dt) {
  if (v == ir::kNoValue || !g.value(v).constant || g.value(v).constant->numel() != 1) return false;
  *dt = g.value(v).constant->dtype();
  *out = tensor_to_doubles(*g.value(v).constant)[0];
  return true;
}

// DequantizeLinear(QuantizeLinear(x, s, zp), s, zp) with one per-tensor scale and zero point
// (constants, equal in both) and nothing else reading the quantized tensor (`consumers`: the
// graph's consumer table, Graph::consumers()): the value x stands
// for after 8-bit quantization, one QdqS8 / QdqU8 / QdqE4M3 instruction (ONNX Operators.md:
// y = (saturate(round(x / s) + zp) - zp) * s). INT8, UINT8 and FP8 E4M3FN (saturate = 1).
std::optional<Step> qdq_pair_step(const ir::Graph& g, const ir::Node& dq,
                                  const std::vector<std::vector<ir::NodeId>>& consumers) {
  if (dq.inputs.size() < 2 || dq.inputs[0] == ir::kNoValue) return std::nullopt;
  const ir::ValueId qv = dq.inputs[0];
  const ir::NodeId qi = g.value(qv).producer;
  if (qi < 0) return std::nullopt;
  const ir::Node& q = g.node(qi);
  if (q.removed || q.op != OpKind::kQuantizeLinear || q.inputs.size() < 2 || q.attr_int("saturate", 1) != 1)
    return std::nullopt;
  // QuantizeLinear-23's precision other than float32 (0: the scale's, float32 below): the step divides in float32.
  if (const int64_t p = q.attr_int("quantize_precision", 0); p != 0 && p != 1) return std::nullopt;
  for (ir::ValueId o : g.outputs)
    if (o == qv) return std::nullopt;
  for (ir::NodeId c : consumers[qv])
    if (c != dq.id && !g.node(c).removed) return std::nullopt;
  double qs, ds, qz = 0, dz = 0;
  DataType qst, dst, qzt = DataType::kUInt8, dzt = DataType::kUInt8;
  if (!scalar_of(g, q.inputs[1], &qs, &qst) || !scalar_of(g, dq.inputs[1], &ds, &dst) || qs != ds ||
      qst != DataType::kFloat32 || dst != DataType::kFloat32 || !(qs > 0))
    return std::nullopt;
  const bool qzp = q.inputs.size() > 2 && q.inputs[2] != ir::kNoValue;
  const bool dzp = dq.inputs.size() > 2 && dq.inputs[2] != ir::kNoValue;
  if (qzp && !scalar_of(g, q.inputs[2], &qz, &qzt)) return std::nullopt;
  if (dzp && !scalar_of(g, dq.inputs[2], &dz, &dzt)) return std::nullopt;
  if (!qzp && q.attr_int("output_dtype", 0) != 0) return std::nullopt;
  if (qz != dz || qzt != dzt || g.value(qv).dtype != qzt) return std::nullopt;
  Step s;
  s.also = qi;
  s.nargs = 3;
  switch (qzt) {
    case DataType::kInt8: s.op = PwOpcode::kQdqS8; break;
    case DataType::kUInt8: s.op = PwOpcode::kQdqU8; break;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E5M2:
      if (qz != 0) return std::nullopt;
      s.op = qzt == DataType::kFloat8E5M2 ? PwOpcode::kQdqE5M2 : PwOpcode::kQdqE4M3;
      s.nargs = 2;
      break;
    default: return std::nullopt;
  }
  if (!set_operand(g, &s, 0, q.inputs[0], -1) || s.vals[0] == ir::kNoValue) return std::nullopt;
  set_param(&s, 1, static_cast<float>(qs));
  if (s.nargs == 3) set_param(&s, 2, static_cast<float>(qz));
  return s;
}

// The instruction a layer becomes, or nullopt when it cannot join a region (`consumers`:
// Graph::consumers()).
std::optional<Step> step_of(const ir::Graph& g, const ir::Node& n, const std::vector<std::vector<ir::NodeId>>& consumers) {
  if (n.removed || n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return std::nullopt;
  const ir::Value& y = g.value(n.outputs[0]);
  if (!fusable_dtype(y.dtype) || !y.shape || y.kind != ir::ValueKind::kTensor) return std::nullopt;
  // Multidirectional broadcasting: Add/Sub/Mul/Div/Pow since opset 7, Max/Min since 8.
  const bool bcast7 = n.opset >= 7, bcast8 = n.opset >= 8;
  switch (n.op) {
    case OpKind::kAdd: return bcast7 ? binary_step(g, n, PwOpcode::kAdd) : std::nullopt;
    case OpKind::kSub: return bcast7 ? binary_step(g, n, PwOpcode::kSub) : std::nullopt;
    case OpKind::kMul: return bcast7 ? binary_step(g, n, PwOpcode::kMul) : std::nullopt;
    case OpKind::kDiv: return bcast7 ? binary_step(g, n, PwOpcode::kDiv) : std::nullopt;
    case OpKind::kMax: return bcast8 ? binary_step(g, n, PwOpcode::kMax) : std::nullopt;
    case OpKind::kMin: return bcast8 ? binary_step(g, n, PwOpcode::kMin) : std::nullopt;
    case OpKind::kPow: {
      auto s = bcast7 ? binary_step(g, n, PwOpcode::kPow) : std::nullopt;
      // Only a scalar constant exponent (an immediate) on a tensor base.
      if (!s || s->vals[0] == ir::kNoValue || s->vals[1] != ir::kNoValue) return std::nullopt;
      return s;
    }
    case OpKind::kRelu: return unary_step(g, n, PwOpcode::kRelu);
    case OpKind::kSigmoid: return unary_step(g, n, PwOpcode::kSigmoid);
    case OpKind::kTanh: return unary_step(g, n, PwOpcode::kTanh);
    case OpKind::kExp: return unary_step(g, n, PwOpcode::kExp);
    case OpKind::kLog: return unary_step(g, n, PwOpcode::kLog);
    case OpKind::kSqrt: return unary_step(g, n, PwOpcode::kSqrt);
    case OpKind::kReciprocal: return unary_step(g, n, PwOpcode::kReciprocal);
    case OpKind::kNeg: return unary_step(g, n, PwOpcode::kNeg);
    case OpKind::kAbs: return unary_step(g, n, PwOpcode::kAbs);
    case OpKind::kErf: return unary_step(g, n, PwOpcode::kErf);
    case OpKind::kHardSwish: return unary_step(g, n, PwOpcode::kHardSwish);
    case OpKind::kSoftplus: return unary_step(g, n, PwOpcode::kSoftplus);
    case OpKind::kGelu: {
      const std::string a = n.attr_string("approximate", "none");
      if (a != "none" && a != "tanh") return std::nullopt;
      return unary_step(g, n, a == "tanh" ? PwOpcode::kGeluTanh : PwOpcode::kGelu);
    }
    case OpKind::kLeakyRelu: {
      auto s = unary_step(g, n, PwOpcode::kLeakyRelu, 2);
      if (s) set_param(&*s, 1, n.attr_float("alpha", 0.01f));
      return s;
    }
    case OpKind::kElu: {
      auto s = unary_step(g, n, PwOpcode::kElu, 2);
      if (s) set_param(&*s, 1, n.attr_float("alpha", 1.f));
      return s;
    }
    case OpKind::kHardSigmoid: {
      auto s = unary_step(g, n, PwOpcode::kHardSigmoid, 3);
      if (s) {
        set_param(&*s, 1, n.attr_float("alpha", 0.2f));
        set_param(&*s, 2, n.attr_float("beta", 0.5f));
      }
      return s;
    }
    case OpKind::kClip: return clip_step(g, n);
    case OpKind::kSoftsign: return unary_step(g, n, PwOpcode::kSoftsign);
    case OpKind::kMish: return unary_step(g, n, PwOpcode::kMish);
    case OpKind::kSign: return unary_step(g, n, PwOpcode::kSign);
    case OpKind::kRound: return unary_step(g, n, PwOpcode::kRound);
    case OpKind::kCeil: return unary_step(g, n, PwOpcode::kCeil);
    case OpKind::kFloor: return unary_step(g, n, PwOpcode::kFloor);
    case OpKind::kTan: return unary_step(g, n, PwOpcode::kTan);
    case OpKind::kAsin: return unary_step(g, n, PwOpcode::kAsin);
    case OpKind::kAcos: return unary_step(g, n, PwOpcode::kAcos);
    case OpKind::kAtan: return unary_step(g, n, PwOpcode::kAtan);
    case OpKind::kSinh: return unary_step(g, n, PwOpcode::kSinh);
    case OpKind::kCosh: return unary_step(g, n, PwOpcode::kCosh);
    case OpKind::kAsinh: return unary_step(g, n, PwOpcode::kAsinh);
    case OpKind::kAcosh: return unary_step(g, n, PwOpcode::kAcosh);
    case OpKind::kAtanh: return unary_step(g, n, PwOpcode::kAtanh);
    case OpKind::kSelu: {
      auto s = unary_step(g, n, PwOpcode::kSelu, 3);
      if (s) {
        set_param(&*s, 1, n.attr_float("alpha", 1.67326319217681884765625f));
        set_param(&*s, 2, n.attr_float("gamma", 1.05070102214813232421875f));
      }
      return s;
    }
    case OpKind::kCelu: {
      auto s = unary_step(g, n, PwOpcode::kCelu, 2);
      if (s) set_param(&*s, 1, n.attr_float("alpha", 1.f));
      return s;
    }
    case OpKind::kThresholdedRelu: {
      auto s = unary_step(g, n, PwOpcode::kThresholdedRelu, 2);
      if (s) set_param(&*s, 1, n.attr_float("alpha", 1.f));
      return s;
    }
    case OpKind::kShrink: {
      auto s = unary_step(g, n, PwOpcode::kShrink, 3);
      if (s) {
        set_param(&*s, 1, n.attr_float("lambd", 0.5f));
        set_param(&*s, 2, n.attr_float("bias", 0.f));
      }
      return s;
    }
    // Mod broadcasts multidirectionally (since 10); float Mod only (fusable_dtype).
    case OpKind::kMod: return binary_step(g, n, n.attr_int("fmod", 0) != 0 ? PwOpcode::kFmod : PwOpcode::kPyMod);
    case OpKind::kDequantizeLinear: return qdq_pair_step(g, n, consumers);
    default: return std::nullopt;
  }
}

class RegionBuilder {
 public:
  explicit RegionBuilder(ir::Graph& g) : g_(g), consumers_(g.consumers()), steps_(g.nodes.size()),
                                         taken_(g.nodes.size(), 0), escapes_(g.values.size(), 0) {
    for (const ir::Node& n : g.nodes) steps_[n.id] = step_of(g, n, consumers_);
    for (ir::ValueId v : g.outputs) escapes_[v] = 1;
    for (const std::string& name : subgraph_reads(g))
      if (ir::ValueId v = g.find_value(name); v != ir::kNoValue) escapes_[v] = 1;
  }

  void run() {
    for (int r = static_cast<int>(g_.nodes.size()) - 1; r >= 0; --r) {
      if (taken_[r] || !steps_[r]) continue;
      std::vector<char> in(g_.nodes.size(), 0);
      std::vector<ir::NodeId> region = {r};
      in[r] = 1;
      // A Q/DQ pair's QuantizeLinear counts as inside with its DequantizeLinear (it reads x).
      auto mark = [&](ir::NodeId m, char v) {
        in[m] = v;
        if (steps_[m]->also >= 0) in[steps_[m]->also] = v;
      };
      mark(r, 1);
      for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < region.size(); ++i)
          for (ir::ValueId v : steps_[region[i]]->vals) {
            const ir::NodeId p = v == ir::kNoValue ? -1 : g_.value(v).producer;
            if (p < 0 || in[p] || taken_[p] || !steps_[p] || escapes_[v]) continue;
            if (static_cast<int>(region.size()) >= ir::kMaxPwInstrs) continue;
            bool inside = true;
            for (ir::NodeId c : consumers_[v]) inside &= in[c] != 0;
            if (!inside) continue;
            mark(p, 1);
            region.push_back(p);
            if (static_cast<int>(inputs_of(region, in).size()) > ir::kMaxPwInputs) {
              mark(p, 0);
              region.pop_back();
              continue;
            }
            grew = true;
          }
      }
      // A lone Q/DQ pair becomes a one-instruction program too (the GPU runs no Q/DQ layers).
      if (region.size() < 2 && steps_[r]->also < 0) continue;
      fuse(region, in);
    }
  }

 private:
  // The region's inputs in first-use order (nodes taken in topological, i.e. id, order).
  std::vector<ir::ValueId> inputs_of(std::vector<ir::NodeId> region, const std::vector<char>& in) const {
    std::sort(region.begin(), region.end());
    std::vector<ir::ValueId> ins;
    for (ir::NodeId m : region)
      for (ir::ValueId v : steps_[m]->vals) {
        if (v == ir::kNoValue) continue;
        const ir::NodeId p = g_.value(v).producer;
        if (p >= 0 && in[p]) continue;
        if (std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
      }
    return ins;
  }

  void fuse(std::vector<ir::NodeId> region, const std::vector<char>& in) {
    const std::vector<ir::ValueId> ins = inputs_of(region, in);
    bool any_activation = false;
    for (ir::ValueId v : ins) any_activation |= !g_.value(v).constant;
    if (!any_activation) return;  // a constant region: constant folding's job
    std::sort(region.begin(), region.end());
    std::map<ir::NodeId, int> reg;
    ir::PwProgram prog;
    prog.num_inputs = static_cast<int>(ins.size());
    for (ir::NodeId m : region) {
      const Step& s = *steps_[m];
      ir::PwInstr instr;
      instr.op = s.op;
      for (int k = 0; k < s.nargs; ++k) {
        const ir::ValueId v = s.vals[k];
        if (v == ir::kNoValue) {
          instr.args[k] = ir::PwOperand::immediate(s.imm[k]);
        } else if (const ir::NodeId p = g_.value(v).producer; p >= 0 && in[p]) {
          instr.args[k] = ir::PwOperand::reg(reg.at(p));
        } else {
          instr.args[k] = ir::PwOperand::input(static_cast<int>(std::find(ins.begin(), ins.end(), v) - ins.begin()));
        }
      }
      reg[m] = static_cast<int>(prog.instrs.size());
      prog.instrs.push_back(instr);
    }
    // The last layer (the region's only exit) becomes the fused one; the others are absorbed.
    ir::Node& root = g_.node(region.back());
    std::vector<ir::Node*> absorbed;
    for (ir::NodeId m : region) {
      absorbed.push_back(&g_.node(m));
      taken_[m] = 1;
      if (const ir::NodeId also = steps_[m]->also; also >= 0) {
        absorbed.push_back(&g_.node(also));
        taken_[also] = 1;
      }
    }
    root.op = OpKind::kFusedPointwise;
    root.inputs = ins;
    root.attrs.clear();
    root.attrs["program"] = ir::Attribute::of_string(ir::pw_program_text(prog));
    pt::absorb(root, absorbed);
  }

  ir::Graph& g_;
  pt::Consumers consumers_;
  std::vector<std::optional<Step>> steps_;
  std::vector<char> taken_;    // per node: already in a fused region
  std::vector<char> escapes_;  // per value: graph output or read by a subgraph
};

}  // namespace

Status fuse_pointwise(ir::Graph& g, const PassOptions&) {
  RegionBuilder(g).run();
  return Status::Ok();
}

}  // namespace kiln::passes
