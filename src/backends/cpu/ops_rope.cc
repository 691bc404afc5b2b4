// CPU reference kernel of Rope (ops.def; docs/decisions/0067-fused-rope.md): the rotary position
// embedding of one q or k tensor, angles from an inv_freq table (cos / sin of position * inv_freq
// in float32, as transformers' LlamaRotaryEmbedding computes them with autocast off) or cos / sin
// read from caches at each position (ONNX RotaryEmbedding-23). fp16 / bf16 X is computed in float32
// and rounded once; float64 X in double. Every position is checked before the first write.
#include <cmath>
#include <string>

#include "backends/cpu/ops_nn_common.h"
#include "backends/cpu/rope_math.h"

namespace kiln::cpu {

namespace {

// X viewed as [outer, H, inner, D]: outer = the dims before the head axis, inner = those between
// it and the last; the position of (o, h, i) is positions[o * inner + i].
struct RopeDims {
  int64_t outer = 1, heads = 1, inner = 1, d = 0, half = 0;
  bool interleaved = false;
};

// Reads positions (int32 / int64) as int64.
int64_t position_at(const Tensor& p, int64_t i) {
  return p.dtype() == DataType::kInt32 ? static_cast<int64_t>(p.data<int32_t>()[i]) : p.data<int64_t>()[i];
}

template <typename T>
void rotate(const T* x, T* y, const RopeDims& n, const std::vector<T>& cs) {
  // cs: per row (o * inner + i), half cos values then half sin values.
  for (int64_t o = 0; o < n.outer; ++o)
    for (int64_t h = 0; h < n.heads; ++h)
      for (int64_t i = 0; i < n.inner; ++i) {
        const int64_t row = o * n.inner + i;
        const T* c = cs.data() + row * 2 * n.half;
        const T* s = c + n.half;
        const int64_t base = ((o * n.heads + h) * n.inner + i) * n.d;
        const T* xp = x + base;
        T* yp = y + base;
        for (int64_t j = 0; j < n.d; ++j) yp[j] = xp[j];
        rope_rotate_row<T>(yp, n.half, n.interleaved, c, s);
      }
}

Status rope(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor &x0 = ctx.in(0), &pos = ctx.in(1);
  const bool caches = ctx.num_inputs() >= 4 && ctx.has_input(3);
  const int64_t r = x0.rank(), head_axis = ctx.attr_int("head_axis", 1);
  if (r < 2 || head_axis < 0 || head_axis > r - 2)
    return ctx.fail("X " + shape_str(x0.shape()) + " with head_axis " + std::to_string(head_axis) +
                    ": expected rank >= 2 and a head axis before the last");
  if (pos.dtype() != DataType::kInt64 && pos.dtype() != DataType::kInt32)
    return ctx.fail(std::string("positions have dtype ") + dtype_name(pos.dtype()) + ", expected int64 or int32");
  RopeDims n;
  n.d = x0.dim(static_cast<int>(r - 1));
  n.heads = x0.dim(static_cast<int>(head_axis));
  Shape want;
  for (int64_t i = 0; i + 1 < r; ++i) {
    if (i == head_axis) continue;
    want.push_back(x0.dim(static_cast<int>(i)));
    (i < head_axis ? n.outer : n.inner) *= x0.dim(static_cast<int>(i));
  }
  if (pos.shape() != want)
    return ctx.fail("positions " + shape_str(pos.shape()) + " are not X " + shape_str(x0.shape()) +
                    " without its head and last axes, " + shape_str(want));
  const int64_t rdim = ctx.attr_int("rotary_dim", 0) > 0 ? ctx.attr_int("rotary_dim", 0) : n.d;
  if (rdim % 2 != 0 || rdim > n.d)
    return ctx.fail("rotary_dim " + std::to_string(rdim) + " must be even and at most the head size " + std::to_string(n.d));
  n.half = rdim / 2;
  n.interleaved = ctx.attr_int("interleaved", 0) != 0;
  const int64_t rows = n.outer * n.inner;

  auto go = [&](auto zero) -> Status {
    using T = decltype(zero);
    KILN_ASSIGN_OR_RETURN(Tensor x, nn::to_compute(ctx, x0));
    std::vector<T> cs(static_cast<size_t>(rows * 2 * n.half));
    if (!caches) {
      const Tensor& inv = ctx.in(2);
      if (inv.dtype() != DataType::kFloat32 || inv.shape() != Shape{n.half})
        return ctx.fail("inv_freq " + shape_str(inv.shape()) + " " + dtype_name(inv.dtype()) + " is not float32 [" +
                        std::to_string(n.half) + "]");
      const float* f = inv.data<float>();
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t k = 0; k < n.half; ++k) {
          float c, s;
          rope_cos_sin(position_at(pos, row), f[k], &c, &s);
          cs[static_cast<size_t>(row * 2 * n.half + k)] = static_cast<T>(c);
          cs[static_cast<size_t>(row * 2 * n.half + n.half + k)] = static_cast<T>(s);
        }
    } else {
      KILN_ASSIGN_OR_RETURN(Tensor cc, nn::to_compute(ctx, ctx.in(2)));
      KILN_ASSIGN_OR_RETURN(Tensor sc, nn::to_compute(ctx, ctx.in(3)));
      if (cc.rank() != 2 || cc.shape() != sc.shape() || cc.dim(1) != n.half)
        return ctx.fail("cos_cache " + shape_str(cc.shape()) + " / sin_cache " + shape_str(sc.shape()) + " are not [P, " +
                        std::to_string(n.half) + "]");
      const int64_t P = cc.dim(0);
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t p = position_at(pos, row);
        if (p < 0 || p >= P)
          return ctx.fail("position " + std::to_string(p) + " (entry " + std::to_string(row) + ") is outside the caches' [0, " +
                          std::to_string(P) + ")");
        for (int64_t k = 0; k < n.half; ++k) {
          auto load = [&](const Tensor& t) {
            return t.dtype() == DataType::kFloat64 ? static_cast<T>(t.data<double>()[p * n.half + k])
                                                   : static_cast<T>(t.data<float>()[p * n.half + k]);
          };
          cs[static_cast<size_t>(row * 2 * n.half + k)] = load(cc);
          cs[static_cast<size_t>(row * 2 * n.half + n.half + k)] = load(sc);
        }
      }
    }
    Tensor y(x.dtype(), x.shape());
    if (x.numel() > 0) rotate<T>(x.data<T>(), y.data<T>(), n, cs);
    KILN_ASSIGN_OR_RETURN(Tensor out, nn::from_compute(y, x0.dtype()));
    ctx.set_output(0, std::move(out));
    return Status::Ok();
  };
  if (x0.dtype() == DataType::kFloat64) return go(double{});
  return go(float{});
}

}  // namespace

void register_rope_kernel(KernelRegistry& r) { r.add(ir::OpKind::kRope, rope); }

}  // namespace kiln::cpu
