// Elementwise layers with numpy broadcasting (ONNX Operators.md: Add, Sub, Mul, Div, Pow; Relu,
// Sigmoid, Tanh, Erf, Exp, Sqrt, Neg, Abs, Reciprocal, Log, Sin, Cos, HardSwish, Gelu (approximate none /
// tanh), LeakyRelu, Elu, HardSigmoid, Clip with opset < 11 attributes or 11+ constant bounds) and
// FusedPointwise (passes/fuse_pointwise: a register program run per output element,
// ir/pointwise_program.h, at most ir::kMaxPwInputs inputs). Rank <= 6, fp32 / fp16 / bf16. The
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
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
  const std::vector<ir::ValueId> operands(n.inputs.begin(), n.inputs.begin() + (binary ? 2 : 1));
  const bool out_nhwc = output_nhwc(ctx, n, operands, out_s);
  BroadcastDesc d;
  d.rank = static_cast<int>(out_s.size());
  const Shape phys_out = physical(out_s, out_nhwc);
  for (int i = 0; i < d.rank; ++i) d.out_dims[i] = phys_out[i];
  std::vector<int> ins;
  for (size_t k = 0; k < operands.size(); ++k) {
    Shape phys;
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

Status lower_fused_pointwise(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  auto prog = ir::parse_pw_program(n.attr_string("program", ""));
  if (!prog.ok()) return unsupported(where + prog.status().message());
  if (prog->num_inputs != static_cast<int>(n.inputs.size()) || n.inputs.size() > static_cast<size_t>(ir::kMaxPwInputs))
    return unsupported(where + "the program reads " + std::to_string(prog->num_inputs) + " inputs, the layer has " +
                       std::to_string(n.inputs.size()));
  const Shape& out_s = ctx.shape(n.outputs[0]);
  if (out_s.size() > static_cast<size_t>(kMaxRank)) return unsupported(where + "rank above 6");
  const bool out_nhwc = output_nhwc(ctx, n, n.inputs, out_s);
  PwDeviceProgram p;
  p.rank = static_cast<int>(out_s.size());
  const Shape phys_out = physical(out_s, out_nhwc);
  for (int i = 0; i < p.rank; ++i) p.out_dims[i] = phys_out[i];
  std::vector<int> ins;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == ir::kNoValue) return unsupported(where + "omitted input " + std::to_string(k));
    Shape phys;
    KILN_ASSIGN_OR_RETURN(int a, ctx.pointwise_operand(n.inputs[k], out_s, out_nhwc, &phys));
    ins.push_back(a);
    broadcast_strides(phys, p.rank, p.in_strides[k]);
  }
  if (p.rank == 0) {  // scalar: one element
    p.rank = 1;
    p.out_dims[0] = 1;
  }
  p.num_inputs = static_cast<int>(ins.size());
  p.num_instrs = static_cast<int>(prog->instrs.size());
  for (int j = 0; j < p.num_instrs; ++j) {
    const ir::PwInstr& in = prog->instrs[j];
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
  ctx.add_layer(make_fused_pointwise_layer(p, st), n.name, ins, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
