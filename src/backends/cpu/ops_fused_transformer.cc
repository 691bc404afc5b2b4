// CPU reference kernels of the internal transformer layers: Attention (fuse_attention),
// MatMulBias (fuse_matmul_add; the MatMul kernel, then the bias), RMSNormalization (fuse_rmsnorm)
// and QuantLinear (fuse_qdq_linear); semantics in ops.def and docs/decisions/0006-attention-op.md.
// float16/bfloat16 compute in float32 (as the unfused MatMul/Softmax kernels do), float64 in
// float64. The softmax subtracts the row maximum before exp (numerically stable).
#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cpu/ops_nn_common.h"
#include "core/numerics.h"
#include "ir/pointwise_opcode.h"

namespace kiln::cpu {

namespace {

// Strides (in elements) that read a mask broadcast to `full` (numpy rules, right-aligned);
// false when the mask does not broadcast to `full` without growing it.
bool broadcast_strides(const Shape& mask, const Shape& full, std::vector<int64_t>* strides) {
  if (mask.size() > full.size()) return false;
  strides->assign(full.size(), 0);
  int64_t s = 1;
  for (int i = static_cast<int>(mask.size()) - 1, j = static_cast<int>(full.size()) - 1; i >= 0; --i, --j) {
    if (mask[i] != 1 && mask[i] != full[j]) return false;
    (*strides)[j] = mask[i] == 1 ? 0 : s;
    s *= mask[i];
  }
  return true;
}

template <typename T>
struct AttentionArgs {
  const T *q, *k, *v;
  T* y;
  int64_t batch, hq, hkv, sq, sk, d, dv;
  // Element strides of the flattened batch index, the head and the sequence position of Q, K,
  // V and Y (the last dim is contiguous): [*, H, S, D] or, head_layout "bshd", [*, S, H, D].
  int64_t qs[3], ks[3], vs[3], ys[3];
  T scale;
  bool causal;
  const T* add_mask;       // additive mask or nullptr
  const uint8_t* keep;     // bool mask (1 = attend) or nullptr
  std::vector<int64_t> boff;  // mask offset per flattened batch index
  std::vector<int64_t> ms;    // mask strides of the head, query and key dims
};

template <typename T>
void run_attention(const AttentionArgs<T>& a) {
  const T kNegInf = -std::numeric_limits<T>::infinity();
  std::vector<T> s(static_cast<size_t>(a.sq * a.sk));
  const int64_t group = a.hq / a.hkv;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.hq; ++h) {
      const int64_t kvh = h / group;
      const T* q = a.q + b * a.qs[0] + h * a.qs[1];
      const T* k = a.k + b * a.ks[0] + kvh * a.ks[1];
      const T* v = a.v + b * a.vs[0] + kvh * a.vs[1];
      T* y = a.y + b * a.ys[0] + h * a.ys[1];
      nn::gemm<T>(false, true, a.sq, a.sk, a.d, a.scale, q, a.qs[2], k, a.ks[2], T(0), s.data(), a.sk);
      for (int64_t i = 0; i < a.sq; ++i) {
        T* row = s.data() + i * a.sk;
        const int64_t mrow = a.boff[b] + h * a.ms[0] + i * a.ms[1];
        if (a.add_mask)
          for (int64_t j = 0; j < a.sk; ++j) row[j] += a.add_mask[mrow + j * a.ms[2]];
        if (a.keep)
          for (int64_t j = 0; j < a.sk; ++j)
            if (!a.keep[mrow + j * a.ms[2]]) row[j] = kNegInf;
        if (a.causal)
          for (int64_t j = std::max<int64_t>(0, i + a.sk - a.sq + 1); j < a.sk; ++j) row[j] = kNegInf;
        T mx = kNegInf;
        for (int64_t j = 0; j < a.sk; ++j) mx = std::max(mx, row[j]);
        if (mx == kNegInf) {  // every key excluded: the row's output is zero (no NaN from -inf - -inf)
          std::fill(row, row + a.sk, T(0));
          continue;
        }
        T sum = 0;
        for (int64_t j = 0; j < a.sk; ++j) sum += (row[j] = std::exp(row[j] - mx));
        const T inv = T(1) / sum;
        for (int64_t j = 0; j < a.sk; ++j) row[j] *= inv;
      }
      nn::gemm<T>(false, false, a.sq, a.dv, a.sk, T(1), s.data(), a.sk, v, a.vs[2], T(0), y, a.ys[2]);
    }
}

// Element strides (batch, head, sequence) of a row-major tensor of `heads` x `seq` x `d` per
// batch index, stored [*, H, S, D] or (bshd) [*, S, H, D].
void head_strides(bool bshd, int64_t heads, int64_t seq, int64_t d, int64_t (&st)[3]) {
  st[0] = heads * seq * d;
  st[1] = bshd ? d : seq * d;
  st[2] = bshd ? heads * d : d;
}

Status attention(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const std::string layout = ctx.attr_string("head_layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return ctx.fail("head_layout '" + layout + "' is neither \"bhsd\" nor \"bshd\"");
  const bool bshd = layout == "bshd";
  const Tensor &q0 = ctx.in(0), &k0 = ctx.in(1), &v0 = ctx.in(2);
  const int r = q0.rank();
  // Dim indices of the heads and the sequence (bshd swaps them).
  const int hx = bshd ? -2 : -3, sx = bshd ? -3 : -2;
  if (r < 3 || k0.rank() != r || v0.rank() != r)
    return ctx.fail("Q, K, V must have one rank >= 3, got " + shape_str(q0.shape()) + ", " + shape_str(k0.shape()) +
                    ", " + shape_str(v0.shape()));
  if (k0.dtype() != q0.dtype() || v0.dtype() != q0.dtype())
    return ctx.fail(std::string("Q, K, V dtypes differ: ") + dtype_name(q0.dtype()) + ", " + dtype_name(k0.dtype()) +
                    ", " + dtype_name(v0.dtype()));
  int64_t batch = 1;
  for (int i = 0; i < r - 3; ++i) {
    if (k0.dim(i) != q0.dim(i) || v0.dim(i) != q0.dim(i))
      return ctx.fail("batch dims differ: Q " + shape_str(q0.shape()) + ", K " + shape_str(k0.shape()) + ", V " +
                      shape_str(v0.shape()));
    batch *= q0.dim(i);
  }
  const int64_t hq = q0.dim(hx), sq = q0.dim(sx), d = q0.dim(-1);
  const int64_t hkv = k0.dim(hx), sk = k0.dim(sx), dv = v0.dim(-1);
  if (v0.dim(hx) != hkv || v0.dim(sx) != sk || k0.dim(-1) != d)
    return ctx.fail("K " + shape_str(k0.shape()) + " / V " + shape_str(v0.shape()) + " do not fit Q " +
                    shape_str(q0.shape()) +
                    (bshd ? " (head_layout bshd: expected K [*, Sk, Hkv, D], V [*, Sk, Hkv, Dv])"
                          : " (expected K [*, Hkv, Sk, D], V [*, Hkv, Sk, Dv])"));
  if (hkv == 0 ? hq != 0 : hq % hkv != 0)
    return ctx.fail("query heads " + std::to_string(hq) + " are not a multiple of kv heads " + std::to_string(hkv));
  Shape out_shape = q0.shape();
  out_shape.back() = dv;
  Shape full = q0.shape();
  full[r - 3] = hq;
  full[r - 2] = sq;
  full.back() = sk;  // the scores' shape [*, Hq, Sq, Sk] (either layout)

  KILN_ASSIGN_OR_RETURN(Tensor q, nn::to_compute(ctx, q0));
  KILN_ASSIGN_OR_RETURN(Tensor k, nn::to_compute(ctx, k0));
  KILN_ASSIGN_OR_RETURN(Tensor v, nn::to_compute(ctx, v0));
  Tensor mask;
  std::vector<int64_t> strides;
  if (const Tensor* m = ctx.input(3)) {
    if (!broadcast_strides(m->shape(), full, &strides))
      return ctx.fail("mask " + shape_str(m->shape()) + " does not broadcast to the scores " + shape_str(full));
    const DataType md = m->dtype();
    if (md == DataType::kBool) {
      mask = *m;
    } else if (md == DataType::kFloat32 || md == DataType::kFloat16 || md == DataType::kBFloat16 ||
               md == DataType::kFloat64) {
      KILN_ASSIGN_OR_RETURN(mask, cast_tensor(*m, q.dtype()));
    } else {
      return ctx.fail(std::string("mask dtype ") + dtype_name(md) + " is neither float nor bool");
    }
  } else {
    strides.assign(full.size(), 0);
  }
  // Mask offsets: one per flattened batch index (unravelled over dims [0, r-3)), then strides
  // for the head, query and key dims.
  std::vector<int64_t> boff(static_cast<size_t>(batch), 0);
  for (int64_t bi = 0; bi < batch; ++bi) {
    int64_t rem = bi, off = 0;
    for (int i = r - 4; i >= 0; --i) {
      off += (rem % full[i]) * strides[i];
      rem /= full[i];
    }
    boff[bi] = off;
  }
  const std::vector<int64_t> ms = {strides[r - 3], strides[r - 2], strides[r - 1]};

  const bool causal = ctx.attr_int("is_causal", 0) != 0;
  Tensor y(q.dtype(), out_shape);
  auto go = [&](auto tag) {
    using T = decltype(tag);
    AttentionArgs<T> a{q.data<T>(), k.data<T>(), v.data<T>(), y.data<T>(), batch, hq, hkv, sq, sk, d, dv,
                       {}, {}, {}, {},
                       static_cast<T>(ctx.attr_float("scale", static_cast<float>(1.0 / std::sqrt(double(d))))),
                       causal, nullptr, nullptr, boff, ms};
    head_strides(bshd, hq, sq, d, a.qs);
    head_strides(bshd, hkv, sk, d, a.ks);
    head_strides(bshd, hkv, sk, dv, a.vs);
    head_strides(bshd, hq, sq, dv, a.ys);
    if (mask.defined()) {
      if (mask.dtype() == DataType::kBool) a.keep = static_cast<const uint8_t*>(mask.raw());
      else a.add_mask = mask.data<T>();
    }
    if (hkv > 0 && batch > 0) run_attention<T>(a);
  };
  if (q.dtype() == DataType::kFloat64) go(double{});
  else go(float{});
  KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(y, q0.dtype()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

template <typename T>
void run_rms_norm(const T* x, const T* scale, int64_t scale_n, T eps, T* y, int64_t outer, int64_t n) {
  for (int64_t o = 0; o < outer; ++o) {
    const T* xp = x + o * n;
    T* yp = y + o * n;
    T ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += xp[i] * xp[i];
    const T inv = T(1) / std::sqrt(ss / T(n) + eps);
    for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] * inv * scale[scale_n == 1 ? 0 : i];
  }
}

Status rms_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor &x0 = ctx.in(0), &s0 = ctx.in(1);
  int axis;
  if (!nn::normalize_axis(ctx.attr_int("axis", -1), x0.rank(), &axis))
    return ctx.fail("axis out of range for rank " + std::to_string(x0.rank()));
  int64_t outer = 1, n = 1;
  for (int i = 0; i < x0.rank(); ++i) (i < axis ? outer : n) *= x0.dim(i);
  // scale broadcasts to dims [axis, rank): one value, or exactly those dims (leading 1s allowed).
  Shape norm_dims(x0.shape().begin() + axis, x0.shape().end());
  Shape sdims = s0.shape();
  while (!sdims.empty() && sdims.front() == 1 && sdims.size() > norm_dims.size()) sdims.erase(sdims.begin());
  if (s0.numel() != 1 && sdims != norm_dims)
    return ctx.fail("scale " + shape_str(s0.shape()) + " does not match the normalized dims " + shape_str(norm_dims));
  if (s0.dtype() != x0.dtype())
    return ctx.fail(std::string("scale dtype ") + dtype_name(s0.dtype()) + " differs from X's " + dtype_name(x0.dtype()));
  KILN_ASSIGN_OR_RETURN(Tensor x, nn::to_compute(ctx, x0));
  KILN_ASSIGN_OR_RETURN(Tensor s, nn::to_compute(ctx, s0));
  Tensor y(x.dtype(), x.shape());
  const float eps = ctx.attr_float("epsilon", 1e-5f);
  if (x.dtype() == DataType::kFloat64)
    run_rms_norm<double>(x.data<double>(), s.data<double>(), s.numel(), eps, y.data<double>(), outer, n);
  else
    run_rms_norm<float>(x.data<float>(), s.data<float>(), s.numel(), eps, y.data<float>(), outer, n);
  KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(y, x0.dtype()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

// Runs the registered CPU kernel of `op` on `in`, as a node of its own with this node's name and
// `attrs`, into *out (the fused layers' parts: MatMulBias's norm, product and gate).
Status run_part(KernelContext& ctx, ir::OpKind op, std::vector<const Tensor*> in,
                std::map<std::string, ir::Attribute> attrs, Tensor* out) {
  KernelFn fn = KernelRegistry::get().find(op);
  if (!fn) return ctx.unsupported_here(std::string("no CPU ") + ir::op_name(op) + " kernel");
  ir::Node sub = ctx.node();
  sub.op = op;
  sub.inputs.resize(in.size());
  sub.attrs = std::move(attrs);
  std::vector<Tensor> outs(1);
  KernelContext sctx(sub, std::move(in), &outs, nullptr);
  KILN_RETURN_IF_ERROR(fn(sctx));
  *out = std::move(outs[0]);
  return Status::Ok();
}

// A gate (MatMulBias / QuantLinear attribute, ops.def): *y [*, 2N] float32 becomes
// program(y[..., :N], y[..., N:]) [*, N] by the FusedPointwise kernel.
Status apply_gate(KernelContext& ctx, const std::string& gate, Tensor* y) {
  const int64_t n = y->rank() ? y->dim(-1) : 1;
  if (y->rank() < 1 || n % 2 != 0) return ctx.fail("a gate needs an even product width, got " + shape_str(y->shape()));
  const int64_t h = n / 2, rows = y->numel() / std::max<int64_t>(n, 1);
  Shape hs = y->shape();
  hs.back() = h;
  Tensor lo(DataType::kFloat32, hs), hi(DataType::kFloat32, hs);
  const float* yp = y->data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(yp + r * n, yp + r * n + h, lo.data<float>() + r * h);
    std::copy(yp + r * n + h, yp + (r + 1) * n, hi.data<float>() + r * h);
  }
  return run_part(ctx, ir::OpKind::kFusedPointwise, {&lo, &hi}, {{"program", ir::Attribute::of_string(gate)}}, y);
}

// MatMulBias (ops.def): the norm prologue (input 4: the RMSNormalization kernel over A's last
// axis, as the layer it absorbed), the MatMul kernel, the bias, then the residual (input 3), the
// gate (the FusedPointwise kernel over the product's two halves) or the activation ("", Relu or
// GeluTanh), each in float32 in the unfused graph's order.
Status matmul_bias(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  KILN_ASSIGN_OR_RETURN(const nn::GemmAct act, nn::gemm_activation(ctx));
  const ir::Node& node = ctx.node();
  const Tensor* a = ctx.input(0);
  Tensor normed;
  if (node.inputs.size() > 4 && node.inputs[4] != ir::kNoValue) {
    KILN_RETURN_IF_ERROR(run_part(ctx, ir::OpKind::kRMSNormalization, {a, ctx.input(4)},
                                  {{"axis", ir::Attribute::of_int(-1)},
                                   {"epsilon", ir::Attribute::of_float(node.attr_float("norm_epsilon", 1e-5f))}},
                                  &normed));
    a = &normed;
  }
  Tensor y;
  KILN_RETURN_IF_ERROR(run_part(ctx, ir::OpKind::kMatMul, {a, ctx.input(1)}, {}, &y));
  const Tensor& b = ctx.in(2);
  if (y.dtype() != DataType::kFloat32 || b.dtype() != DataType::kFloat32)
    return ctx.unsupported_here("MatMulBias computes float32 only");
  const int64_t n = y.rank() ? y.dim(-1) : 1;
  if (b.numel() != n) return ctx.fail("bias " + shape_str(b.shape()) + " does not match N = " + std::to_string(n));
  float* yp = y.data<float>();
  const float* bp = b.data<float>();
  for (int64_t i = 0; i < y.numel(); i += n)
    for (int64_t j = 0; j < n; ++j) yp[i + j] += bp[j];
  if (node.inputs.size() > 3 && node.inputs[3] != ir::kNoValue) {
    const Tensor& r = ctx.in(3);
    if (r.dtype() != DataType::kFloat32 || r.shape() != y.shape())
      return ctx.fail("residual " + shape_str(r.shape()) + " is not the product's shape " + shape_str(y.shape()));
    const float* rp = r.data<float>();
    for (int64_t i = 0; i < y.numel(); ++i) yp[i] += rp[i];
  }
  const std::string gate = node.attr_string("gate", "");
  if (!gate.empty()) {
    KILN_RETURN_IF_ERROR(apply_gate(ctx, gate, &y));
    yp = y.data<float>();
  }
  nn::gemm_activation_in_place(act, yp, y.numel());
  ctx.set_output(0, std::move(y));
  return Status::Ok();
}

// QuantLinear (ops.def): X quantized per tensor exactly as QuantizeLinear does (x / x_scale in
// float, round half to even, saturate), then the product with the stored 8-bit weight — int8:
// integer (q - zp) * w summed in int64 (an int32 accumulator cannot overflow for K < 2^17, and
// int64 is exact beyond); fp8: E4M3FN values summed in double — then one float scale per output
// channel and the bias. The fused form of the unfused Q/DQ graph's arithmetic: the two differ only
// by the float rounding of the unfused graph's sum.
// With attribute gate (passes::fuse_gated_gemm), then the program over Y's halves.
Status quant_linear(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  KILN_ASSIGN_OR_RETURN(Tensor x, nn::to_compute(ctx, ctx.in(0)));
  const Tensor& w = ctx.in(1);
  const Tensor& ws = ctx.in(2);
  const Tensor* b = ctx.input(3);
  if (x.dtype() != DataType::kFloat32) return ctx.unsupported_here("QuantLinear computes float32 inputs only");
  const bool fp8 = w.dtype() == DataType::kFloat8E4M3FN;
  if (!fp8 && w.dtype() != DataType::kInt8) return ctx.fail(std::string("weight is ") + dtype_name(w.dtype()) + ", expected int8 or fp8e4m3fn");
  if (w.rank() != 2 || x.rank() < 1 || x.dim(-1) != w.dim(1))
    return ctx.fail("input " + shape_str(x.shape()) + " and weight " + shape_str(w.shape()) + " do not make [*, K] x [N, K]");
  const int64_t n = w.dim(0), k = w.dim(1), m = x.numel() / std::max<int64_t>(k, 1);
  if (ws.dtype() != DataType::kFloat32 || ws.numel() != n) return ctx.fail("w_scale must be float32 [N]");
  if (b && (b->dtype() != DataType::kFloat32 || b->numel() != n)) return ctx.fail("bias must be float32 [N]");
  const float sx = ctx.attr_float("x_scale", 0.f);
  const int64_t zp = ctx.attr_int("x_zero_point", 0);
  const std::string act = ctx.attr_string("activation", "");
  if (!act.empty() && act != "Relu") return ctx.fail("activation '" + act + "', expected \"\" or Relu");
  const bool relu = act == "Relu";
  if (!(sx > 0) || !std::isfinite(sx)) return ctx.fail("x_scale must be a finite number > 0");
  if (fp8 ? zp != 0 : (zp < -128 || zp > 127)) return ctx.fail("x_zero_point " + std::to_string(zp) + " out of range");
  // Quantized X, as the integer (q - zp) or the E4M3FN value.
  std::vector<int32_t> qi(fp8 ? 0 : static_cast<size_t>(x.numel()));
  std::vector<float> qf(fp8 ? static_cast<size_t>(x.numel()) : 0);
  const float* xp = x.data<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (fp8) {
      qf[i] = ir::round_to_e4m3fn(xp[i] / sx);
    } else {
      const float q = std::clamp(std::nearbyint(xp[i] / sx) + static_cast<float>(zp), -128.f, 127.f);
      qi[i] = static_cast<int32_t>(q) - static_cast<int32_t>(zp);
    }
  }
  std::vector<float> wf(fp8 ? static_cast<size_t>(w.numel()) : 0);
  if (fp8)
    for (int64_t i = 0; i < w.numel(); ++i) wf[i] = fp8e4m3fn_to_float(w.data<uint8_t>()[i]);
  const int8_t* wi = w.data<int8_t>();
  const float* wsp = ws.data<float>();
  const float* bp = b ? b->data<float>() : nullptr;
  Shape ys = x.shape();
  ys.back() = n;
  Tensor y(DataType::kFloat32, ys);
  float* yp = y.data<float>();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t c = 0; c < n; ++c) {
      float acc;
      if (fp8) {
        double a = 0;
        for (int64_t i = 0; i < k; ++i) a += static_cast<double>(qf[r * k + i]) * wf[c * k + i];
        acc = static_cast<float>(a);
      } else {
        int64_t a = 0;
        for (int64_t i = 0; i < k; ++i) a += static_cast<int64_t>(qi[r * k + i]) * wi[c * k + i];
        acc = static_cast<float>(a);
      }
      const float v = acc * (sx * wsp[c]) + (bp ? bp[c] : 0.f);
      yp[r * n + c] = relu && v < 0.f ? 0.f : v;
    }
  const std::string gate = ctx.attr_string("gate", "");
  if (!gate.empty()) {
    if (relu) return ctx.fail("a gate with an activation");
    KILN_RETURN_IF_ERROR(apply_gate(ctx, gate, &y));
  }
  KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(y, ctx.in(0).dtype()));
  ctx.set_output(0, std::move(out));
  return Status::Ok();
}

}  // namespace

void register_transformer_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kQuantLinear, quant_linear);
  r.add(ir::OpKind::kMatMulBias, matmul_bias);
  r.add(ir::OpKind::kAttention, attention);
  r.add(ir::OpKind::kRMSNormalization, rms_norm);
}

}  // namespace kiln::cpu
