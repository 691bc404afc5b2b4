// CPU reference kernels for the internal ops that fusion passes create. They reuse the
// registered kernel of the op they extend (FusedConv runs the Conv kernel) and then apply the
// fused epilogue in place, so the fused and unfused graphs compute the same values.
#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_kernel.h"

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

}  // namespace

void register_transformer_kernels(KernelRegistry& r);  // ops_fused_transformer.cc

void register_fused_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kFusedConv, fused_conv);
  register_transformer_kernels(r);
}

}  // namespace kiln::cpu
