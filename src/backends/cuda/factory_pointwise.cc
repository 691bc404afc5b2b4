// Elementwise layers with numpy broadcasting (ONNX Operators.md: Add, Sub, Mul, Div, Pow; Relu,
// Sigmoid, Tanh, Erf, Exp, Sqrt, Neg, Abs, Reciprocal, Log, Sin, Cos, HardSwish, Gelu (approximate none /
// tanh), LeakyRelu, Elu, HardSigmoid, Clip with opset < 11 attributes or 11+ constant bounds),
// FusedPointwise (passes/fuse_pointwise: a register program run per output element,
// ir/pointwise_program.h, at most ir::kMaxPwInputs inputs) and, as one-node programs of the same
// kernel (lower_pw_op), the ops the fixed kernel lacks: Selu ... Atanh, float Mod, PRelu, Clip with
// activation bounds, variadic Max / Min / Sum / Mean. Rank <= kMaxRank, fp32 / fp16 / bf16. The
// output is NHWC when a 4-D activation input is (or as the plan's "layout" attribute says);
// activation inputs follow the output's layout, constants are uploaded in its physical order
// (packed in the plan), broadcast dims read with stride 0.
#include <cmath>

#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"
#include "ir/pointwise_program.h"

namespace kiln::cuda {
namespace {

// NHWC when any of `inputs`' current activations is a 4-D NHWC one (not layout-free) and the
// output is 4-D; constants and omitted inputs do not count.
bool follows_nhwc(const LowerContext& ctx, const std::vector<ir::ValueId>& inputs, const Shape& out_s) {
  bool out_nhwc = false;
  for (const ir::ValueId v : inputs) {
    if (v == ir::kNoValue || ctx.graph().value(v).constant) continue;
    const int a = ctx.bound(v);
    if (a < 0) continue;
    const Shape& s = ctx.value_shape(a);
    out_nhwc |= ctx.value_nhwc(a) && out_s.size() == 4 && s.size() == 4 && !layout_free(s);
  }
  return out_nhwc;
}

// The output's layout: the plan's "layout" attribute when present, else follows_nhwc.
bool output_nhwc(const LowerContext& ctx, const ir::Node& n, const std::vector<ir::ValueId>& inputs, const Shape& out_s) {
  if (n.has_attr("layout")) return ctx.nhwc(n, false) && out_s.size() == 4 && !layout_free(out_s);
  return follows_nhwc(ctx, inputs, out_s);
}

// Element strides of a dense operand of physical shape `phys` (the output's rank), 0 where it broadcasts.
void broadcast_strides(const Shape& phys, int rank, int64_t* strides) {
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    strides[i] = phys[i] == 1 ? 0 : stride;
    stride *= phys[i];
  }
}

Shape physical(const Shape& s, bool nhwc) { return (nhwc && s.size() == 4) ? Shape{s[0], s[2], s[3], s[1]} : s; }

}  // namespace

Status lower_pointwise(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  PointwiseOp op;
  float alpha = 0, beta = 0;
  bool binary = false;
  switch (n.op) {
    case ir::OpKind::kAdd: op = PointwiseOp::kAdd; binary = true; break;
    case ir::OpKind::kSub: op = PointwiseOp::kSub; binary = true; break;
    case ir::OpKind::kMul: op = PointwiseOp::kMul; binary = true; break;
    case ir::OpKind::kDiv: op = PointwiseOp::kDiv; binary = true; break;
    case ir::OpKind::kPow: op = PointwiseOp::kPow; binary = true; break;
    case ir::OpKind::kRelu: op = PointwiseOp::kRelu; break;
    case ir::OpKind::kSigmoid: op = PointwiseOp::kSigmoid; break;
    case ir::OpKind::kTanh: op = PointwiseOp::kTanh; break;
    case ir::OpKind::kErf: op = PointwiseOp::kErf; break;
    case ir::OpKind::kExp: op = PointwiseOp::kExp; break;
    case ir::OpKind::kSqrt: op = PointwiseOp::kSqrt; break;
    case ir::OpKind::kNeg: op = PointwiseOp::kNeg; break;
    case ir::OpKind::kAbs: op = PointwiseOp::kAbs; break;
    case ir::OpKind::kReciprocal: op = PointwiseOp::kReciprocal; break;
    case ir::OpKind::kLog: op = PointwiseOp::kLog; break;
    case ir::OpKind::kSin: op = PointwiseOp::kSin; break;
    case ir::OpKind::kCos: op = PointwiseOp::kCos; break;
    case ir::OpKind::kHardSwish: op = PointwiseOp::kHardSwish; break;
    case ir::OpKind::kGelu:
      op = n.attr_string("approximate", "none") == "tanh" ? PointwiseOp::kGeluTanh : PointwiseOp::kGeluErf;
      break;
    case ir::OpKind::kLeakyRelu: op = PointwiseOp::kLeakyRelu; alpha = n.attr_float("alpha", 0.01f); break;
    case ir::OpKind::kElu: op = PointwiseOp::kElu; alpha = n.attr_float("alpha", 1.f); break;
    case ir::OpKind::kHardSigmoid:
      op = PointwiseOp::kHardSigmoid;
      alpha = n.attr_float("alpha", 0.2f);
      beta = n.attr_float("beta", 0.5f);
      break;
    case ir::OpKind::kClip: {
      op = PointwiseOp::kClip;
      alpha = -INFINITY;
      beta = INFINITY;
      if (n.opset < 11) {
        alpha = n.attr_float("min", alpha);
        beta = n.attr_float("max", beta);
      } else {
        for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
          if (n.inputs[k] == ir::kNoValue) continue;
          const auto& c = ctx.graph().value(n.inputs[k]).constant;
          if (!c) return unsupported(where + "Clip bounds must be constants");
          (k == 1 ? alpha : beta) = static_cast<float>(load_as_double(c->dtype(), c->raw(), 0));
        }
      }
      break;
    }
    default: return unsupported(where + "no CUDA tactic for this op");
  }
  const Shape& out_s = ctx.shape(n.outputs[0]);
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above " + std::to_string(kMaxRank));
  const std::vector<ir::ValueId> operands(n.inputs.begin(), n.inputs.begin() + (binary ? 2 : 1));
  const bool out_nhwc = output_nhwc(ctx, n, operands, out_s);
  BroadcastDesc d;
  d.rank = static_cast<int>(out_s.size());
  const Shape phys_out = physical(out_s, out_nhwc);
  for (int i = 0; i < d.rank; ++i) d.out_dims[i] = phys_out[i];
  std::vector<int> ins;
  for (size_t k = 0; k < operands.size(); ++k) {
    Shape phys;
    const DataType dt = ctx.dtype(operands[k]);
    if (k == 1 && n.op == ir::OpKind::kPow &&
        (dt == DataType::kInt32 || dt == DataType::kInt64 || dt == DataType::kUInt64) &&
        !ctx.graph().value(operands[k]).constant) {
      // An integer exponent (Pow since 12): converted to the float storage (exact below 2^24 in
      // fp32, as the CPU reference's double pow sees it), read row-major.
      if (out_nhwc) return unsupported(where + "an integer exponent with an NHWC output");
      const Shape& es = ctx.shape(operands[k]);
      if (es.size() > out_s.size()) return unsupported(where + "the exponent has a higher rank than the output");
      KILN_ASSIGN_OR_RETURN(int a, ctx.operand_as(operands[k], ctx.storage()));
      ins.push_back(a);
      phys = Shape(out_s.size() - es.size(), 1);
      phys.insert(phys.end(), es.begin(), es.end());
      broadcast_strides(phys, d.rank, d.b_strides);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(int a, ctx.pointwise_operand(operands[k], out_s, out_nhwc, &phys));
    ins.push_back(a);
    broadcast_strides(phys, d.rank, k == 0 ? d.a_strides : d.b_strides);
  }
  if (d.rank == 0) {  // scalar: one element
    d.rank = 1;
    d.out_dims[0] = 1;
  }
  const StorageType st = ctx.storage();
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, out_s, st, out_nhwc);
  auto layer = make_pointwise_layer(op, d, st, alpha, beta);
  layer->op = ir::op_name(n.op);
  ctx.add_layer(std::move(layer), n.name, ins, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

namespace {

// One program layer for `prog` over graph values `inputs` (the program's in0, in1, ...), writing
// n's output 0: each input broadcast onto the output (stride 0), the output NHWC as
// output_nhwc says. `op` names the layer's op.
Status add_pw_program(LowerContext& ctx, const ir::Node& n, const ir::PwProgram& prog,
                      const std::vector<ir::ValueId>& inputs, const std::string& op, const std::string& where) {
  if (prog.num_inputs != static_cast<int>(inputs.size()) || inputs.size() > static_cast<size_t>(ir::kMaxPwInputs))
    return unsupported(where + "the program reads " + std::to_string(prog.num_inputs) + " inputs, the layer has " +
                       std::to_string(inputs.size()) + " (at most " + std::to_string(ir::kMaxPwInputs) + ")");
  if (prog.instrs.empty() || prog.instrs.size() > static_cast<size_t>(ir::kMaxPwInstrs))
    return unsupported(where + "a program of " + std::to_string(prog.instrs.size()) + " instructions");
  const Shape& out_s = ctx.shape(n.outputs[0]);
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above " + std::to_string(kMaxRank));
  const bool out_nhwc = output_nhwc(ctx, n, inputs, out_s);
  PwDeviceProgram p;
  p.rank = static_cast<int>(out_s.size());
  const Shape phys_out = physical(out_s, out_nhwc);
  for (int i = 0; i < p.rank; ++i) p.out_dims[i] = phys_out[i];
  std::vector<int> ins;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k] == ir::kNoValue) return unsupported(where + "omitted input " + std::to_string(k));
    if (ctx.shape(inputs[k]).size() > out_s.size())
      return unsupported(where + "input " + std::to_string(k) + " has a higher rank than the output");
    Shape phys;
    KILN_ASSIGN_OR_RETURN(int a, ctx.pointwise_operand(inputs[k], out_s, out_nhwc, &phys));
    ins.push_back(a);
    broadcast_strides(phys, p.rank, p.in_strides[k]);
  }
  if (p.rank == 0) {  // scalar: one element
    p.rank = 1;
    p.out_dims[0] = 1;
  }
  p.num_inputs = static_cast<int>(ins.size());
  p.num_instrs = static_cast<int>(prog.instrs.size());
  for (int j = 0; j < p.num_instrs; ++j) {
    const ir::PwInstr& in = prog.instrs[j];
    PwDeviceInstr& d = p.instrs[j];
    d.op = static_cast<int32_t>(in.op);
    for (int q = 0; q < ir::kMaxPwArgs; ++q) {
      d.src[q] = kPwImmediate;
      d.imm[q] = 0.f;
      if (q >= ir::pw_arity(in.op)) continue;
      const ir::PwOperand& o = in.args[q];
      switch (o.kind) {
        case ir::PwOperand::Kind::kInput: d.src[q] = -1 - o.index; break;
        case ir::PwOperand::Kind::kRegister: d.src[q] = o.index; break;
        case ir::PwOperand::Kind::kImmediate: d.imm[q] = o.imm; break;
      }
    }
  }
  const StorageType st = ctx.storage();
  const int out = ctx.new_value(ctx.graph().value(n.outputs[0]).name, out_s, st, out_nhwc);
  auto layer = make_fused_pointwise_layer(p, st);
  layer->op = op;
  ctx.add_layer(std::move(layer), n.name, ins, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

ir::PwInstr instr(ir::PwOpcode op, ir::PwOperand a, ir::PwOperand b = ir::PwOperand::immediate(0),
                  ir::PwOperand c = ir::PwOperand::immediate(0)) {
  ir::PwInstr i;
  i.op = op;
  i.args = {a, b, c};
  return i;
}

}  // namespace

Status lower_fused_pointwise(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  auto prog = ir::parse_pw_program(n.attr_string("program", ""));
  if (!prog.ok()) return unsupported(where + prog.status().message());
  return add_pw_program(ctx, n, *prog, n.inputs, "FusedPointwise", where);
}

Status lower_pw_op(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  using ir::OpKind;
  using ir::PwOpcode;
  using O = ir::PwOperand;
  const O x = O::input(0);
  ir::PwProgram prog;
  std::vector<ir::ValueId> inputs;
  if (n.inputs.empty() || n.inputs[0] == ir::kNoValue) return invalid_argument(where + "input 0 is required");
  auto unary = [&](PwOpcode op, float b = 0.f, float c = 0.f) {
    prog.instrs.push_back(instr(op, x, O::immediate(b), O::immediate(c)));
    inputs = {n.inputs[0]};
  };
  switch (n.op) {
    case OpKind::kSoftplus: unary(PwOpcode::kSoftplus); break;
    case OpKind::kSoftsign: unary(PwOpcode::kSoftsign); break;
    case OpKind::kMish: unary(PwOpcode::kMish); break;
    case OpKind::kSign: unary(PwOpcode::kSign); break;
    case OpKind::kRound: unary(PwOpcode::kRound); break;
    case OpKind::kCeil: unary(PwOpcode::kCeil); break;
    case OpKind::kFloor: unary(PwOpcode::kFloor); break;
    case OpKind::kTan: unary(PwOpcode::kTan); break;
    case OpKind::kAsin: unary(PwOpcode::kAsin); break;
    case OpKind::kAcos: unary(PwOpcode::kAcos); break;
    case OpKind::kAtan: unary(PwOpcode::kAtan); break;
    case OpKind::kSinh: unary(PwOpcode::kSinh); break;
    case OpKind::kCosh: unary(PwOpcode::kCosh); break;
    case OpKind::kAsinh: unary(PwOpcode::kAsinh); break;
    case OpKind::kAcosh: unary(PwOpcode::kAcosh); break;
    case OpKind::kAtanh: unary(PwOpcode::kAtanh); break;
    case OpKind::kSelu:
      unary(PwOpcode::kSelu, n.attr_float("alpha", 1.67326319217681884765625f),
            n.attr_float("gamma", 1.05070102214813232421875f));
      break;
    case OpKind::kCelu: unary(PwOpcode::kCelu, n.attr_float("alpha", 1.f)); break;
    case OpKind::kThresholdedRelu: unary(PwOpcode::kThresholdedRelu, n.attr_float("alpha", 1.f)); break;
    case OpKind::kShrink: unary(PwOpcode::kShrink, n.attr_float("lambd", 0.5f), n.attr_float("bias", 0.f)); break;
    case OpKind::kMod: {  // float Mod (integer Mod is an exact layer, factory_int_arith.cc)
      if (n.inputs.size() != 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "Mod takes 2 inputs");
      prog.instrs.push_back(instr(n.attr_int("fmod", 0) != 0 ? PwOpcode::kFmod : PwOpcode::kPyMod, x, O::input(1)));
      inputs = {n.inputs[0], n.inputs[1]};
      break;
    }
    case OpKind::kPRelu: {  // x < 0 ? slope * x : x, slope broadcast onto x (LeakyRelu with a tensor alpha)
      if (n.inputs.size() != 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "PRelu takes 2 inputs");
      const Shape& xs = ctx.shape(n.inputs[0]);
      const Shape& ss = ctx.shape(n.inputs[1]);
      if (ctx.shape(n.outputs[0]) != xs || ss.size() > xs.size())
        return unsupported(where + "slope " + shape_str(ss) + " does not broadcast onto X " + shape_str(xs));
      if (n.opset < 7 && ss.size() == 1 && xs.size() > 2 && ss[0] == xs[1] && ss[0] != xs.back())
        return unsupported(where + "a per-channel 1-D slope of opset < 7");
      prog.instrs.push_back(instr(PwOpcode::kLeakyRelu, x, O::input(1)));
      inputs = {n.inputs[0], n.inputs[1]};
      break;
    }
    case OpKind::kClip: {  // opset 11+: min / max optional inputs, here activations (constants: lower_pointwise)
      if (n.opset < 11) return lower_pointwise(ctx, n, where);
      bool runtime = false;
      for (size_t k = 1; k < n.inputs.size() && k < 3; ++k)
        runtime |= n.inputs[k] != ir::kNoValue && !ctx.graph().value(n.inputs[k]).constant;
      if (!runtime) return lower_pointwise(ctx, n, where);
      inputs = {n.inputs[0]};
      O bound[2] = {O::immediate(-INFINITY), O::immediate(INFINITY)};
      for (size_t k = 1; k < n.inputs.size() && k < 3; ++k) {
        if (n.inputs[k] == ir::kNoValue) continue;
        if (shape_numel(ctx.shape(n.inputs[k])) != 1)
          return invalid_argument(where + "Clip bound " + std::to_string(k) + " is not a scalar");
        bound[k - 1] = O::input(static_cast<int>(inputs.size()));
        inputs.push_back(n.inputs[k]);
      }
      prog.instrs.push_back(instr(PwOpcode::kClip, x, bound[0], bound[1]));
      break;
    }
    // Variadic, multidirectional broadcast (since 8): folded pairwise in input order as the CPU
    // reference does; Mean divides the sum by the input count. One input: x itself (x * 1, x / 1,
    // max(x, x) are x exactly, -0 and NaN included).
    case OpKind::kMax: case OpKind::kMin: case OpKind::kSum: case OpKind::kMean: {
      const size_t k_in = n.inputs.size();
      if (k_in == 0) return invalid_argument(where + "needs at least one input");
      if (k_in > static_cast<size_t>(ir::kMaxPwInputs))
        return unsupported(where + std::to_string(k_in) + " inputs (at most " + std::to_string(ir::kMaxPwInputs) + ")");
      if (n.opset < 8)
        for (ir::ValueId v : n.inputs)
          if (v == ir::kNoValue || ctx.shape(v) != ctx.shape(n.outputs[0]))
            return unsupported(where + "opset < 8 inputs of different shapes");
      const PwOpcode fold = n.op == OpKind::kMax ? PwOpcode::kMax
                            : n.op == OpKind::kMin ? PwOpcode::kMin : PwOpcode::kAdd;
      for (size_t k = 0; k < k_in; ++k) {
        if (n.inputs[k] == ir::kNoValue) return invalid_argument(where + "omitted input " + std::to_string(k));
        inputs.push_back(n.inputs[k]);
      }
      if (k_in == 1) {
        const PwOpcode one = fold == PwOpcode::kAdd ? (n.op == OpKind::kMean ? PwOpcode::kDiv : PwOpcode::kMul) : fold;
        prog.instrs.push_back(instr(one, x, fold == PwOpcode::kAdd ? O::immediate(1.f) : x));
        break;
      }
      prog.instrs.push_back(instr(fold, x, O::input(1)));
      for (size_t k = 2; k < k_in; ++k)
        prog.instrs.push_back(instr(fold, O::reg(static_cast<int>(prog.instrs.size()) - 1), O::input(static_cast<int>(k))));
      if (n.op == OpKind::kMean)
        prog.instrs.push_back(instr(PwOpcode::kDiv, O::reg(static_cast<int>(prog.instrs.size()) - 1),
                                    O::immediate(static_cast<float>(k_in))));
      break;
    }
    default: return unsupported(where + "no CUDA tactic for this op");
  }
  prog.num_inputs = static_cast<int>(inputs.size());
  return add_pw_program(ctx, n, prog, inputs, ir::op_name(n.op), where);
}

}  // namespace kiln::cuda
