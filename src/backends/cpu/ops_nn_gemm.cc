// CPU kernels for Gemm, MatMul, MatMulInteger and QLinearMatMul. Float types go through
// OpenBLAS (fp16/bf16 in float32), integer types through plain loops; the integer ops accumulate
// exactly in int32 per ONNX "Operator MatMulInteger, since version 10" and "Operator
// QLinearMatMul, since version 10" (requantize: saturate(round_half_even(acc * sa * sb / sy) + zy)).
#include <algorithm>
#include <cmath>

#include "backends/cpu/ops_nn_common.h"

namespace kiln::cpu::nn {

// x - zero_point as int32, the zero point per tensor (1 value) or per index along `axis`
// (per row of A: axis = rank-2; per column of B: axis = rank-1).
Status shift_to_int32(const KernelContext& ctx, const Tensor& x, const Tensor* zp, int axis, const char* what,
                      Tensor* out) {
  if (!is_8bit(x.dtype())) return ctx.unsupported_here(std::string(what) + " must be int8 or uint8");
  if (zp && zp->dtype() != x.dtype()) return ctx.fail(std::string(what) + " zero point dtype differs");
  const int64_t extent = x.rank() > 0 && axis >= 0 ? x.dim(axis) : 1;
  const int64_t nz = zp ? zp->numel() : 1;
  if (zp && nz != 1 && nz != extent)
    return ctx.unsupported_here(std::string(what) + " zero point " + shape_str(zp->shape()) +
                                " is neither per tensor nor per " + (axis == x.rank() - 1 ? "column" : "row"));
  int64_t inner = 1;
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  *out = Tensor(DataType::kInt32, x.shape());
  int32_t* o = out->data<int32_t>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t zi = nz == 1 ? 0 : (i / inner) % extent;
    const int32_t z = zp ? static_cast<int32_t>(load_as_int64(zp->dtype(), zp->raw(), zi)) : 0;
    o[i] = static_cast<int32_t>(load_as_int64(x.dtype(), x.raw(), i)) - z;
  }
  return Status::Ok();
}

// Per-tensor (1 value) or per-index scale as float.
Status scale_values(const KernelContext& ctx, const Tensor& s, int64_t extent, const char* what, std::vector<float>* v) {
  if (!dtype_is_float(s.dtype())) return ctx.fail(std::string(what) + " must be a float tensor");
  if (s.numel() != 1 && s.numel() != extent)
    return ctx.unsupported_here(std::string(what) + " " + shape_str(s.shape()) + " is not per tensor or per axis");
  v->resize(s.numel());
  for (int64_t i = 0; i < s.numel(); ++i) (*v)[i] = static_cast<float>(load_as_double(s.dtype(), s.raw(), i));
  return Status::Ok();
}

namespace {

// numpy.matmul shapes: 1-D operands are promoted ([K] -> [1,K] for A, [K,1] for B) and the
// promoted dim dropped from the result; batch dims broadcast.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  Shape out;
  std::vector<int64_t> a_index, b_index;  // per output batch: which A / B matrix it reads
};

Status plan_matmul(const KernelContext& ctx, const Shape& sa, const Shape& sb, MatMulPlan* p) {
  if (sa.empty() || sb.empty()) return ctx.fail("MatMul operands must have rank >= 1");
  Shape a = sa, b = sb;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  p->m = a[a.size() - 2];
  p->k = a.back();
  p->n = b.back();
  if (b[b.size() - 2] != p->k)
    return ctx.fail("inner dims differ: A " + shape_str(sa) + ", B " + shape_str(sb));
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const size_t rank = std::max(ba.size(), bb.size());
  Shape batch(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + ba.size() >= rank ? ba[i + ba.size() - rank] : 1;
    const int64_t db = i + bb.size() >= rank ? bb[i + bb.size() - rank] : 1;
    if (da != db && da != 1 && db != 1)
      return ctx.fail("batch dims do not broadcast: A " + shape_str(sa) + ", B " + shape_str(sb));
    batch[i] = da == 1 ? db : da;
  }
  const int64_t nb = shape_numel(batch);
  p->a_index.assign(nb, 0);
  p->b_index.assign(nb, 0);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t t = 0; t < nb; ++t) {
    int64_t ia = 0, ib = 0;
    for (size_t i = 0; i < rank; ++i) {
      if (i + ba.size() >= rank) ia = ia * ba[i + ba.size() - rank] + (ba[i + ba.size() - rank] == 1 ? 0 : idx[i]);
      if (i + bb.size() >= rank) ib = ib * bb[i + bb.size() - rank] + (bb[i + bb.size() - rank] == 1 ? 0 : idx[i]);
    }
    p->a_index[t] = ia;
    p->b_index[t] = ib;
    for (int i = static_cast<int>(rank) - 1; i >= 0; --i) {
      if (++idx[i] < batch[i]) break;
      idx[i] = 0;
    }
  }
  p->out = batch;
  if (sa.size() > 1) p->out.push_back(p->m);
  if (sb.size() > 1) p->out.push_back(p->n);
  return Status::Ok();
}

template <typename T>
void run_matmul(const MatMulPlan& p, const T* a, const T* b, T* y) {
  const int64_t nb = static_cast<int64_t>(p.a_index.size());
  bool b_shared = true, a_seq = true;
  for (int64_t t = 0; t < nb; ++t) {
    b_shared = b_shared && p.b_index[t] == 0;
    a_seq = a_seq && p.a_index[t] == t;
  }
  // One B for every batch and A's matrices in order: fold the batch into M (one big GEMM).
  if (b_shared && a_seq) {
    gemm<T>(false, false, nb * p.m, p.n, p.k, T(1), a, p.k, b, p.n, T(0), y, p.n);
    return;
  }
  for (int64_t t = 0; t < nb; ++t)
    gemm<T>(false, false, p.m, p.n, p.k, T(1), a + p.a_index[t] * p.m * p.k, p.k, b + p.b_index[t] * p.k * p.n, p.n,
            T(0), y + t * p.m * p.n, p.n);
}

Status matmul(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& a0 = ctx.in(0);
  const Tensor& b0 = ctx.in(1);
  if (a0.dtype() != b0.dtype()) return ctx.fail("A and B dtypes differ");
  MatMulPlan p;
  KILN_RETURN_IF_ERROR(plan_matmul(ctx, a0.shape(), b0.shape(), &p));
  const DataType dt = a0.dtype();
  if (dtype_is_integer(dt)) {
    Tensor y(dt, p.out);
    auto run = [&](auto tag) -> Status {
      using T = decltype(tag);
      run_matmul<T>(p, a0.data<T>(), b0.data<T>(), y.data<T>());
      return Status::Ok();
    };
    Status s = dispatch_int(dt, run);
    if (!s.ok()) return ctx.unsupported_here(s.message());
    ctx.set_output(0, y);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor a, to_compute(ctx, a0));
  KILN_ASSIGN_OR_RETURN(Tensor b, to_compute(ctx, b0));
  Tensor y(a.dtype(), p.out);
  if (a.dtype() == DataType::kFloat32) run_matmul<float>(p, a.data<float>(), b.data<float>(), y.data<float>());
  else run_matmul<double>(p, a.data<double>(), b.data<double>(), y.data<double>());
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, dt));
  ctx.set_output(0, out);
  return Status::Ok();
}

// C's unidirectional broadcast to [m, n]: element (i, j) -> flat index into C.
Status c_strides(const KernelContext& ctx, const Tensor& c, int64_t m, int64_t n, int64_t* si, int64_t* sj) {
  Shape s = c.shape();
  if (s.size() > 2) return ctx.fail("C rank " + std::to_string(s.size()) + ", expected <= 2");
  while (s.size() < 2) s.insert(s.begin(), 1);
  if ((s[0] != 1 && s[0] != m) || (s[1] != 1 && s[1] != n))
    return ctx.fail("C " + shape_str(c.shape()) + " does not broadcast to [" + std::to_string(m) + "," +
                    std::to_string(n) + "]");
  *sj = s[1] == 1 ? 0 : 1;
  *si = s[0] == 1 ? 0 : s[1];
  return Status::Ok();
}

template <typename T>
void run_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, double beta, const T* a, const T* b,
              const T* c, int64_t si, int64_t sj, T* y) {
  const bool use_c = c && beta != 0;
  if (use_c)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = static_cast<T>(beta * c[i * si + j * sj]);
  gemm<T>(ta, tb, m, n, k, static_cast<T>(alpha), a, ta ? m : k, b, tb ? k : n, use_c ? T(1) : T(0), y, n);
}

Status gemm_op(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& a0 = ctx.in(0);
  const Tensor& b0 = ctx.in(1);
  const Tensor* c0 = ctx.input(2);
  if (a0.rank() != 2 || b0.rank() != 2)
    return ctx.fail("A " + shape_str(a0.shape()) + " and B " + shape_str(b0.shape()) + " must be 2-D");
  if (a0.dtype() != b0.dtype() || (c0 && c0->dtype() != a0.dtype())) return ctx.fail("A, B and C dtypes differ");
  const bool ta = ctx.attr_int("transA", 0) != 0, tb = ctx.attr_int("transB", 0) != 0;
  const double alpha = ctx.attr_float("alpha", 1.0f), beta = ctx.attr_float("beta", 1.0f);
  const int64_t m = ta ? a0.dim(1) : a0.dim(0), k = ta ? a0.dim(0) : a0.dim(1);
  const int64_t n = tb ? b0.dim(0) : b0.dim(1), kb = tb ? b0.dim(1) : b0.dim(0);
  if (k != kb) return ctx.fail("inner dims differ: A " + shape_str(a0.shape()) + ", B " + shape_str(b0.shape()));
  KILN_ASSIGN_OR_RETURN(const GemmAct act, gemm_activation(ctx));
  int64_t si = 0, sj = 0;
  if (c0) KILN_RETURN_IF_ERROR(c_strides(ctx, *c0, m, n, &si, &sj));
  const DataType dt = a0.dtype();
  if (dtype_is_integer(dt)) {
    if (act != GemmAct::kNone) return ctx.unsupported_here("an activation epilogue on an integer Gemm");
    Tensor y(dt, {m, n});
    auto run = [&](auto tag) -> Status {
      using T = decltype(tag);
      run_gemm<T>(ta, tb, m, n, k, alpha, beta, a0.data<T>(), b0.data<T>(), c0 ? c0->data<T>() : nullptr, si, sj,
                  y.data<T>());
      return Status::Ok();
    };
    Status s = dispatch_int(dt, run);
    if (!s.ok()) return ctx.unsupported_here(s.message());
    ctx.set_output(0, y);
    return Status::Ok();
  }
  KILN_ASSIGN_OR_RETURN(Tensor a, to_compute(ctx, a0));
  KILN_ASSIGN_OR_RETURN(Tensor b, to_compute(ctx, b0));
  Tensor c;
  if (c0) {
    KILN_ASSIGN_OR_RETURN(c, to_compute(ctx, *c0));
  }
  Tensor y(a.dtype(), {m, n});
  if (a.dtype() == DataType::kFloat32)
    run_gemm<float>(ta, tb, m, n, k, alpha, beta, a.data<float>(), b.data<float>(), c0 ? c.data<float>() : nullptr,
                    si, sj, y.data<float>());
  else
    run_gemm<double>(ta, tb, m, n, k, alpha, beta, a.data<double>(), b.data<double>(),
                     c0 ? c.data<double>() : nullptr, si, sj, y.data<double>());
  if (a.dtype() == DataType::kFloat32) gemm_activation_in_place(act, y.data<float>(), y.numel());
  if (a.dtype() == DataType::kFloat64) gemm_activation_in_place(act, y.data<double>(), y.numel());
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, dt));
  ctx.set_output(0, out);
  return Status::Ok();
}

// Exact int32 product of zero-point-shifted 8-bit operands.
Status int_matmul(const KernelContext& ctx, const Tensor& a0, const Tensor* za, const Tensor& b0, const Tensor* zb,
                  MatMulPlan* p, Tensor* acc) {
  KILN_RETURN_IF_ERROR(plan_matmul(ctx, a0.shape(), b0.shape(), p));
  Tensor a, b;
  KILN_RETURN_IF_ERROR(shift_to_int32(ctx, a0, za, a0.rank() - 2, "A", &a));
  KILN_RETURN_IF_ERROR(shift_to_int32(ctx, b0, zb, b0.rank() - 1, "B", &b));
  *acc = Tensor(DataType::kInt32, p->out);
  run_matmul<int32_t>(*p, a.data<int32_t>(), b.data<int32_t>(), acc->data<int32_t>());
  return Status::Ok();
}

Status matmul_integer(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  MatMulPlan p;
  Tensor acc;
  KILN_RETURN_IF_ERROR(int_matmul(ctx, ctx.in(0), ctx.input(2), ctx.in(1), ctx.input(3), &p, &acc));
  ctx.set_output(0, acc);
  return Status::Ok();
}

Status qlinear_matmul(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(8));
  const Tensor& a0 = ctx.in(0);
  const Tensor& b0 = ctx.in(3);
  const Tensor& yzp = ctx.in(7);
  if (!is_8bit(yzp.dtype())) return ctx.unsupported_here("y_zero_point must be int8 or uint8");
  MatMulPlan p;
  Tensor acc;
  KILN_RETURN_IF_ERROR(int_matmul(ctx, a0, &ctx.in(2), b0, &ctx.in(5), &p, &acc));
  std::vector<float> sa, sb, sy;
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(1), p.m, "a_scale", &sa));
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(4), p.n, "b_scale", &sb));
  KILN_RETURN_IF_ERROR(scale_values(ctx, ctx.in(6), 1, "y_scale", &sy));
  if (yzp.numel() != 1) return ctx.unsupported_here("y_zero_point must be a scalar");
  const double zy = static_cast<double>(load_as_int64(yzp.dtype(), yzp.raw(), 0));
  const double lo = yzp.dtype() == DataType::kUInt8 ? 0 : -128, hi = yzp.dtype() == DataType::kUInt8 ? 255 : 127;
  Tensor y(yzp.dtype(), p.out);
  const int32_t* a = acc.data<int32_t>();
  for (int64_t i = 0; i < acc.numel(); ++i) {
    const int64_t col = i % p.n, row = (i / p.n) % p.m;
    const float scale = sa[sa.size() == 1 ? 0 : row] * sb[sb.size() == 1 ? 0 : col] / sy[0];
    const double q = std::nearbyint(static_cast<float>(a[i]) * scale) + zy;
    store_from_double(y.dtype(), y.raw(), i, std::clamp(q, lo, hi));
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_gemm_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kGemm, gemm_op);
  r.add(ir::OpKind::kMatMul, matmul);
  r.add(ir::OpKind::kMatMulInteger, matmul_integer);
  r.add(ir::OpKind::kQLinearMatMul, qlinear_matmul);
}

}  // namespace kiln::cpu::nn
