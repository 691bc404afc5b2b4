// CPU reference kernels for the internal ops that fusion passes create. FusedConv reuses the
// registered Conv kernel and applies the fused epilogue in place; FusedPointwise interprets its
// program with the scalar formulas of ir/pointwise_opcode.h (the same ones the CUDA kernel
// uses), so the fused and unfused graphs compute the same values.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/ops_elementwise_broadcast.h"
#include "ir/pointwise_program.h"

namespace kiln::cpu {

namespace {

// y = act(y) for the activations fuse_conv_epilogue accepts (ONNX definitions of each op).
Status apply_activation(const std::string& act, float alpha, float beta, float* y, int64_t n) {
  if (act.empty()) return Status::Ok();
  if (act == "Relu") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.f);
  } else if (act == "LeakyRelu") {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] < 0 ? alpha * y[i] : y[i];
  } else if (act == "Clip") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::min(std::max(y[i], alpha), beta);
  } else if (act == "Sigmoid") {
    for (int64_t i = 0; i < n; ++i) y[i] = 1.f / (1.f + std::exp(-y[i]));
  } else if (act == "Tanh") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(y[i]);
  } else if (act == "HardSigmoid") {
    for (int64_t i = 0; i < n; ++i) y[i] = std::max(0.f, std::min(1.f, alpha * y[i] + beta));
  } else if (act == "HardSwish") {
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] * std::max(0.f, std::min(1.f, y[i] / 6.f + 0.5f));
  } else if (act == "Silu") {  // x * Sigmoid(x), Sigmoid as the reference kernel evaluates it
    for (int64_t i = 0; i < n; ++i) y[i] *= ir::pw_apply(ir::PwOpcode::kSigmoid, y[i], 0, 0);
  } else if (act == "Gelu") {
    for (int64_t i = 0; i < n; ++i) y[i] = ir::pw_apply(ir::PwOpcode::kGelu, y[i], 0, 0);
  } else if (act == "GeluTanh") {
    for (int64_t i = 0; i < n; ++i) y[i] = ir::pw_apply(ir::PwOpcode::kGeluTanh, y[i], 0, 0);
  } else {
    return unsupported("fused activation '" + act + "' is not supported");
  }
  return Status::Ok();
}

Status fused_conv(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  KernelFn conv = KernelRegistry::get().find(ir::OpKind::kConv);
  if (!conv) return ctx.unsupported_here("no CPU Conv kernel");
  ir::Node conv_node = ctx.node();
  conv_node.op = ir::OpKind::kConv;
  conv_node.inputs.resize(3);
  conv_node.outputs.resize(1);
  std::vector<const Tensor*> in = {ctx.input(0), ctx.input(1), ctx.input(2)};
  std::vector<Tensor> out(1);
  KernelContext cctx(conv_node, in, &out, nullptr);
  cctx.offer_outputs(ctx.offered_outputs());  // the epilogue below runs in place on the same buffer
  KILN_RETURN_IF_ERROR(conv(cctx));
  Tensor y = std::move(out[0]);
  if (y.dtype() != DataType::kFloat32) return ctx.unsupported_here("FusedConv computes float32 only");
  if (const Tensor* r = ctx.input(3)) {
    if (r->shape() != y.shape() || r->dtype() != y.dtype())
      return ctx.fail("residual " + shape_str(r->shape()) + " does not match the conv output " + shape_str(y.shape()));
    const float* rp = r->data<float>();
    float* yp = y.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] += rp[i];
  }
  Status s = apply_activation(ctx.attr_string("activation", ""), ctx.attr_float("act_alpha", 0),
                              ctx.attr_float("act_beta", 0), y.data<float>(), y.numel());
  if (!s.ok()) return ctx.unsupported_here(s.message());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// FusedPointwise: inputs of float32/float16 (one dtype), numpy-broadcast to their common shape;
// y (that shape and dtype) = the program evaluated per element in float. Runs over the
// innermost dim in chunks of kChunk elements: each instruction sweeps a whole chunk.
Status fused_pointwise(KernelContext& ctx) {
  auto prog = ir::parse_pw_program(ctx.attr_string("program", ""));
  if (!prog.ok()) return ctx.fail(prog.status().message());
  const int nin = ctx.num_inputs();
  if (nin < 1 || nin > ir::kMaxPwInputs || prog->num_inputs != nin)
    return ctx.fail("the program reads " + std::to_string(prog->num_inputs) + " inputs, the layer has " + std::to_string(nin));
  KILN_RETURN_IF_ERROR(ctx.require_inputs(nin));
  const DataType dt = ctx.in(0).dtype();
  std::vector<const Shape*> shapes;
  for (int k = 0; k < nin; ++k) {
    if (ctx.in(k).dtype() != dt || (dt != DataType::kFloat32 && dt != DataType::kFloat16))
      return ctx.unsupported_here("input " + std::to_string(k) + " has dtype " + dtype_name(ctx.in(k).dtype()) +
                                  "; FusedPointwise takes float32 or float16 inputs of one dtype");
    shapes.push_back(&ctx.in(k).shape());
  }
  auto out_shape = broadcast_shapes(shapes);
  if (!out_shape.ok()) return ctx.fail(out_shape.status().message());
  Tensor y(dt, *out_shape);
  const int64_t total = y.numel();
  if (total > 0) {
    // Per-input element strides over the output dims (0 where broadcast); rank-0 output -> [1].
    Shape dims = *out_shape;
    if (dims.empty()) dims = {1};
    const int r = static_cast<int>(dims.size());
    std::vector<std::vector<int64_t>> strides(nin, std::vector<int64_t>(r, 0));
    for (int k = 0; k < nin; ++k) {
      const Shape& s = ctx.in(k).shape();
      int64_t acc = 1;
      for (int d = r - 1; d >= 0; --d) {
        const int kd = d - (r - static_cast<int>(s.size()));
        if (kd < 0) break;
        if (s[kd] != 1) strides[k][d] = acc;
        acc *= s[kd];
      }
    }
    constexpr int64_t kChunk = 256;
    const int nregs = static_cast<int>(prog->instrs.size());
    std::vector<float> regs(static_cast<size_t>(nregs) * kChunk), inbuf(static_cast<size_t>(nin) * kChunk);
    const int64_t inner = dims[r - 1], outer = total / inner;
    std::vector<int64_t> idx(r, 0), off(nin, 0);
    const bool half = dt == DataType::kFloat16;
    std::vector<const void*> src_base(nin);
    for (int k = 0; k < nin; ++k) src_base[k] = ctx.in(k).raw();
    auto load = [&](int k, int64_t i) -> float {
      return half ? fp16_to_float(static_cast<const uint16_t*>(src_base[k])[i]) : static_cast<const float*>(src_base[k])[i];
    };
    void* dst_base = y.raw();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c0 = 0; c0 < inner; c0 += kChunk) {
        const int64_t m = std::min(kChunk, inner - c0);
        for (int k = 0; k < nin; ++k)
          for (int64_t i = 0; i < m; ++i) inbuf[k * kChunk + i] = load(k, off[k] + (c0 + i) * strides[k][r - 1]);
        for (int j = 0; j < nregs; ++j) {
          const ir::PwInstr& in = prog->instrs[j];
          const int na = ir::pw_arity(in.op);
          const float* src[ir::kMaxPwArgs] = {nullptr, nullptr, nullptr};
          float imm[ir::kMaxPwArgs] = {0, 0, 0};
          int64_t step[ir::kMaxPwArgs] = {0, 0, 0};
          for (int a = 0; a < na; ++a) {
            const ir::PwOperand& op = in.args[a];
            if (op.kind == ir::PwOperand::Kind::kImmediate) {
              imm[a] = op.imm;
              src[a] = &imm[a];
            } else {
              src[a] = op.kind == ir::PwOperand::Kind::kInput ? &inbuf[op.index * kChunk] : &regs[op.index * kChunk];
              step[a] = 1;
            }
          }
          for (int a = na; a < ir::kMaxPwArgs; ++a) src[a] = &imm[a];
          float* dst = &regs[j * kChunk];
          for (int64_t i = 0; i < m; ++i)
            dst[i] = ir::pw_apply(in.op, src[0][i * step[0]], src[1][i * step[1]], src[2][i * step[2]]);
        }
        const float* res = &regs[(nregs - 1) * kChunk];
        const int64_t base = o * inner + c0;
        if (half) {
          for (int64_t i = 0; i < m; ++i) static_cast<uint16_t*>(dst_base)[base + i] = float_to_fp16(res[i]);
        } else {
          std::copy(res, res + m, static_cast<float*>(dst_base) + base);
        }
      }
      // Advance the multi-index over dims 0..r-2 and the input offsets with it.
      for (int d = r - 2; d >= 0; --d) {
        ++idx[d];
        for (int k = 0; k < nin; ++k) off[k] += strides[k][d];
        if (idx[d] < dims[d]) break;
        for (int k = 0; k < nin; ++k) off[k] -= strides[k][d] * dims[d];
        idx[d] = 0;
      }
    }
  }
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

}  // namespace

void register_transformer_kernels(KernelRegistry& r);    // ops_fused_transformer.cc
void register_paged_attention_kernel(KernelRegistry& r);  // ops_paged_attention.cc
void register_rope_kernel(KernelRegistry& r);             // ops_rope.cc
void register_quant_conv_kernel(KernelRegistry& r);       // ops_quant_conv.cc

void register_fused_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kFusedConv, fused_conv);
  register_transformer_kernels(r);
  register_paged_attention_kernel(r);
  register_rope_kernel(r);
  register_quant_conv_kernel(r);
  r.add(ir::OpKind::kFusedPointwise, fused_pointwise);
}

}  // namespace kiln::cpu
