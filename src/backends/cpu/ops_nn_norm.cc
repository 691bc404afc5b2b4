// CPU kernels for the normalization ops: BatchNormalization (inference; training mode with
// batch statistics), InstanceNormalization, LayerNormalization, GroupNormalization, LRN,
// LpNormalization and MeanVarianceNormalization, per their ONNX operator specs. Statistics
// accumulate in double; variances are population variances (divide by the count), as in the
// specs' reference formulas.
#include <cmath>

#include "backends/cpu/ops_nn_common.h"

namespace kiln::cpu::nn {
namespace {

// Runs f(T{}) on float32 or float64 data (halves already promoted by to_compute).
template <typename F>
Status float_or_double(const Tensor& x, F&& f) {
  return x.dtype() == DataType::kFloat32 ? f(float{}) : f(double{});
}

std::vector<double> as_doubles(const Tensor& t) { return tensor_to_doubles(t); }

// Sets output i (cast back to the op's dtype) when it is wanted.
Status set_out(KernelContext& ctx, int i, const Tensor& t, DataType dt) {
  if (!ctx.output_wanted(i)) return Status::Ok();
  KILN_ASSIGN_OR_RETURN(Tensor o, from_compute(t, dt));
  ctx.set_output(i, o);
  return Status::Ok();
}

// "Operator BatchNormalization, since version 1": y = (x - mean) / sqrt(var + eps) * scale + B.
// Opsets < 9 have `spatial` (0: parameters per C x spatial element); opset 14 has training_mode
// (batch statistics; running stats updated with `momentum`); opsets < 14 train when the extra
// outputs (mean, var, saved_mean, saved_var) are requested.
Status batch_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(5));
  const Tensor& x0 = ctx.in(0);
  if (x0.rank() < 2) return ctx.fail("X rank " + std::to_string(x0.rank()) + ", expected at least 2");
  const int64_t n = x0.dim(0), c = x0.dim(1), s = x0.numel() / std::max<int64_t>(1, n * c);
  const bool spatial = ctx.opset() >= 9 || ctx.attr_int("spatial", 1) != 0;
  const int64_t pcount = spatial ? c : c * s;  // parameter count
  for (int i = 1; i < 5; ++i)
    if (ctx.in(i).numel() != pcount)
      return ctx.fail("input " + std::to_string(i) + " " + shape_str(ctx.in(i).shape()) + " has " +
                      std::to_string(ctx.in(i).numel()) + " values, expected " + std::to_string(pcount));
  bool training = ctx.opset() >= 14 ? ctx.attr_int("training_mode", 0) != 0 : ctx.output_wanted(1);
  if (ctx.opset() < 7 && ctx.attr_int("is_test", 0) != 0) training = false;
  const double eps = ctx.attr_float("epsilon", 1e-5f), momentum = ctx.attr_float("momentum", 0.9f);
  std::vector<double> scale = as_doubles(ctx.in(1)), bias = as_doubles(ctx.in(2));
  std::vector<double> mean = as_doubles(ctx.in(3)), var = as_doubles(ctx.in(4));
  std::vector<double> bmean(pcount, 0), bvar(pcount, 0);
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  const int64_t per = spatial ? s : 1;  // consecutive elements sharing one parameter
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    if (training) {
      const double count = static_cast<double>(n * per);
      for (int64_t b = 0; b < n; ++b)
        for (int64_t p = 0; p < pcount; ++p)
          for (int64_t i = 0; i < per; ++i) bmean[p] += xp[(b * pcount + p) * per + i];
      for (double& v : bmean) v /= count;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t p = 0; p < pcount; ++p)
          for (int64_t i = 0; i < per; ++i) {
            const double d = xp[(b * pcount + p) * per + i] - bmean[p];
            bvar[p] += d * d;
          }
      for (double& v : bvar) v /= count;
    }
    const std::vector<double>& um = training ? bmean : mean;
    const std::vector<double>& uv = training ? bvar : var;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t p = 0; p < pcount; ++p) {
        const double k = scale[p] / std::sqrt(uv[p] + eps), off = bias[p] - um[p] * k;
        const int64_t base = (b * pcount + p) * per;
        for (int64_t i = 0; i < per; ++i) yp[base + i] = static_cast<T>(xp[base + i] * k + off);
      }
    return Status::Ok();
  }));
  KILN_RETURN_IF_ERROR(set_out(ctx, 0, y, x0.dtype()));
  if (!training) return Status::Ok();
  // Running statistics (outputs 1, 2) and, for opsets < 14, the saved batch statistics (3, 4).
  auto stats = [&](const std::vector<double>& v) -> StatusOr<Tensor> {
    const Tensor& like = ctx.in(3);
    Tensor t(DataType::kFloat64, like.shape());
    for (int64_t i = 0; i < pcount; ++i) t.data<double>()[i] = v[i];
    return cast_tensor(t, like.dtype());
  };
  std::vector<double> rmean(pcount), rvar(pcount);
  for (int64_t p = 0; p < pcount; ++p) {
    rmean[p] = mean[p] * momentum + bmean[p] * (1 - momentum);
    rvar[p] = var[p] * momentum + bvar[p] * (1 - momentum);
  }
  const std::vector<double>* outs[4] = {&rmean, &rvar, &bmean, &bvar};
  for (int i = 1; i <= 4; ++i) {
    if (!ctx.output_wanted(i)) continue;
    KILN_ASSIGN_OR_RETURN(Tensor t, stats(*outs[i - 1]));
    ctx.set_output(i, t);
  }
  return Status::Ok();
}

// Normalizes `groups` consecutive runs of `len` elements: y = (x - mean) / sqrt(var + eps) then
// y * scale[param(group, i)] + bias[...]; param maps (group, element) to a parameter index.
template <typename T, typename Param>
void normalize_runs(const T* x, T* y, int64_t groups, int64_t len, double eps, const std::vector<double>& scale,
                    const std::vector<double>* bias, Param param, double* means, double* inv_stds) {
  for (int64_t gi = 0; gi < groups; ++gi) {
    const T* xp = x + gi * len;
    T* yp = y + gi * len;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; ++i) mean += xp[i];
    mean /= static_cast<double>(len);
    for (int64_t i = 0; i < len; ++i) var += (xp[i] - mean) * (xp[i] - mean);
    var /= static_cast<double>(len);
    const double inv = 1.0 / std::sqrt(var + eps);
    if (means) means[gi] = mean;
    if (inv_stds) inv_stds[gi] = inv;
    for (int64_t i = 0; i < len; ++i) {
      const int64_t p = param(gi, i);
      yp[i] = static_cast<T>((xp[i] - mean) * inv * scale[p] + (bias ? (*bias)[p] : 0.0));
    }
  }
}

// "Operator InstanceNormalization, since version 1": per (n, c) over the spatial dims.
Status instance_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& x0 = ctx.in(0);
  if (x0.rank() < 3) return ctx.fail("X rank " + std::to_string(x0.rank()) + ", expected at least 3");
  const int64_t c = x0.dim(1), s = x0.numel() / std::max<int64_t>(1, x0.dim(0) * c);
  if (ctx.in(1).numel() != c || ctx.in(2).numel() != c) return ctx.fail("scale and B must have C values");
  const std::vector<double> scale = as_doubles(ctx.in(1)), bias = as_doubles(ctx.in(2));
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    normalize_runs<T>(x.data<T>(), y.data<T>(), x.dim(0) * c, s, eps, scale, &bias,
                      [c](int64_t g, int64_t) { return g % c; }, nullptr, nullptr);
    return Status::Ok();
  }));
  return set_out(ctx, 0, y, x0.dtype());
}

// Index of each element of `to` (row-major) in a tensor of shape `from` that broadcasts to it
// unidirectionally (right-aligned, size-1 dims repeat); empty vector if it does not.
std::vector<int64_t> broadcast_map(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return {};
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[i + lead]) return {};
  std::vector<int64_t> map(shape_numel(to));
  std::vector<int64_t> idx(to.size(), 0);
  for (int64_t t = 0; t < static_cast<int64_t>(map.size()); ++t) {
    int64_t f = 0;
    for (size_t i = 0; i < from.size(); ++i) f = f * from[i] + (from[i] == 1 ? 0 : idx[i + lead]);
    map[t] = f;
    for (int d = static_cast<int>(to.size()) - 1; d >= 0; --d) {
      if (++idx[d] < to[d]) break;
      idx[d] = 0;
    }
  }
  return map;
}

// "Operator LayerNormalization, since version 17": normalizes over dims [axis, rank); Scale and
// B broadcast to those dims; Mean / InvStdDev keep the leading dims (others 1), typed by stash_type.
Status layer_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x0 = ctx.in(0);
  int axis;
  if (!normalize_axis(ctx.attr_int("axis", -1), x0.rank(), &axis))
    return ctx.fail("axis out of range for rank " + std::to_string(x0.rank()));
  const Shape inner_shape(x0.shape().begin() + axis, x0.shape().end());
  const int64_t inner = shape_numel(inner_shape), outer = inner ? x0.numel() / inner : 0;
  const std::vector<int64_t> smap = broadcast_map(ctx.in(1).shape(), inner_shape);
  const Tensor* b0 = ctx.input(2);
  const std::vector<int64_t> bmap = b0 ? broadcast_map(b0->shape(), inner_shape) : std::vector<int64_t>{};
  if (static_cast<int64_t>(smap.size()) != inner || (b0 && static_cast<int64_t>(bmap.size()) != inner))
    return ctx.fail("Scale/B do not broadcast to the normalized shape " + shape_str(inner_shape));
  std::vector<double> scale(inner), bias(inner);
  const std::vector<double> s_raw = as_doubles(ctx.in(1));
  for (int64_t i = 0; i < inner; ++i) scale[i] = s_raw[smap[i]];
  if (b0) {
    const std::vector<double> b_raw = as_doubles(*b0);
    for (int64_t i = 0; i < inner; ++i) bias[i] = b_raw[bmap[i]];
  }
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  std::vector<double> means(outer), inv(outer);
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    normalize_runs<T>(x.data<T>(), y.data<T>(), outer, inner, eps, scale, &bias,
                      [](int64_t, int64_t i) { return i; }, means.data(), inv.data());
    return Status::Ok();
  }));
  KILN_RETURN_IF_ERROR(set_out(ctx, 0, y, x0.dtype()));
  const DataType stash = ctx.attr_int("stash_type", 1) == 1 ? DataType::kFloat32 : x0.dtype();
  Shape stat_shape(x0.shape().begin(), x0.shape().begin() + axis);
  stat_shape.resize(x0.rank(), 1);
  const std::vector<double>* stats[2] = {&means, &inv};
  for (int i = 1; i <= 2; ++i) {
    if (!ctx.output_wanted(i)) continue;
    Tensor t(DataType::kFloat64, stat_shape);
    std::copy(stats[i - 1]->begin(), stats[i - 1]->end(), t.data<double>());
    KILN_ASSIGN_OR_RETURN(Tensor o, cast_tensor(t, stash));
    ctx.set_output(i, o);
  }
  return Status::Ok();
}

// "Operator GroupNormalization, since version 18": channels split into num_groups groups,
// each normalized over its channels x spatial; scale/bias per group (opset 18) or per channel (21).
Status group_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(3));
  const Tensor& x0 = ctx.in(0);
  if (x0.rank() < 2) return ctx.fail("X rank " + std::to_string(x0.rank()) + ", expected at least 2");
  const int64_t groups = ctx.attr_int("num_groups", 0), c = x0.dim(1);
  if (groups <= 0 || c % groups != 0) return ctx.fail("num_groups must be positive and divide C");
  const int64_t s = x0.numel() / std::max<int64_t>(1, x0.dim(0) * c), cg = c / groups;
  const int64_t np = ctx.in(1).numel();
  if ((np != c && np != groups) || ctx.in(2).numel() != np) return ctx.fail("scale and bias must have C or num_groups values");
  const std::vector<double> scale = as_doubles(ctx.in(1)), bias = as_doubles(ctx.in(2));
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  const double eps = ctx.attr_float("epsilon", 1e-5f);
  const bool per_channel = np == c;
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    normalize_runs<T>(x.data<T>(), y.data<T>(), x.dim(0) * groups, cg * s, eps, scale, &bias,
                      [&](int64_t g, int64_t i) { return per_channel ? (g % groups) * cg + i / s : g % groups; },
                      nullptr, nullptr);
    return Status::Ok();
  }));
  return set_out(ctx, 0, y, x0.dtype());
}

// "Operator LRN, since version 1": y = x / (bias + alpha / size * sum of x^2 over the channel
// window [c - floor((size-1)/2), c + ceil((size-1)/2)])^beta.
Status lrn(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  if (x0.rank() < 3) return ctx.fail("X rank " + std::to_string(x0.rank()) + ", expected at least 3");
  const int64_t size = ctx.attr_int("size", 0);
  if (size <= 0) return ctx.fail("size must be positive");
  const double alpha = ctx.attr_float("alpha", 1e-4f), beta = ctx.attr_float("beta", 0.75f),
               bias = ctx.attr_float("bias", 1.0f);
  const int64_t n = x0.dim(0), c = x0.dim(1), s = x0.numel() / std::max<int64_t>(1, n * c);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t i = 0; i < s; ++i) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, ch - before); k <= std::min(c - 1, ch + after); ++k) {
            const double v = xp[(b * c + k) * s + i];
            sq += v * v;
          }
          const int64_t at = (b * c + ch) * s + i;
          yp[at] = static_cast<T>(xp[at] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
        }
    return Status::Ok();
  }));
  return set_out(ctx, 0, y, x0.dtype());
}

// "Operator LpNormalization, since version 1": x / ||x||_p along `axis` (p = 1 or 2).
Status lp_norm(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  int axis;
  if (!normalize_axis(ctx.attr_int("axis", -1), x0.rank(), &axis)) return ctx.fail("axis out of range");
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.fail("p must be 1 or 2");
  const int64_t len = x0.dim(axis);
  int64_t inner = 1;
  for (int d = axis + 1; d < x0.rank(); ++d) inner *= x0.dim(d);
  const int64_t outer = len * inner != 0 ? x0.numel() / (len * inner) : 0;
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t base = o * len * inner + i;
        double norm = 0;
        for (int64_t k = 0; k < len; ++k) {
          const double v = xp[base + k * inner];
          norm += p == 1 ? std::fabs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        for (int64_t k = 0; k < len; ++k)
          yp[base + k * inner] = static_cast<T>(norm == 0 ? 0.0 : xp[base + k * inner] / norm);
      }
    return Status::Ok();
  }));
  return set_out(ctx, 0, y, x0.dtype());
}

// "Operator MeanVarianceNormalization, since version 9" (its function body):
// (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes` (default [0, 2, 3]).
Status mvn(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  std::vector<bool> reduced(x0.rank(), false);
  for (int64_t a : ctx.attr_ints("axes", {0, 2, 3})) {
    int ax;
    if (!normalize_axis(a, x0.rank(), &ax)) return ctx.fail("axis " + std::to_string(a) + " out of range");
    reduced[ax] = true;
  }
  // Kept-dims flat index of every element.
  std::vector<int64_t> group(x0.numel());
  std::vector<int64_t> idx(x0.rank(), 0);
  int64_t ngroups = 1;
  for (int d = 0; d < x0.rank(); ++d)
    if (!reduced[d]) ngroups *= x0.dim(d);
  for (int64_t i = 0; i < x0.numel(); ++i) {
    int64_t gi = 0;
    for (int d = 0; d < x0.rank(); ++d)
      if (!reduced[d]) gi = gi * x0.dim(d) + idx[d];
    group[i] = gi;
    for (int d = x0.rank() - 1; d >= 0; --d) {
      if (++idx[d] < x0.dim(d)) break;
      idx[d] = 0;
    }
  }
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), x.shape());
  KILN_RETURN_IF_ERROR(float_or_double(x, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
    std::vector<double> sum(ngroups, 0), sq(ngroups, 0), cnt(ngroups, 0);
    for (int64_t i = 0; i < x.numel(); ++i) {
      sum[group[i]] += xp[i];
      sq[group[i]] += static_cast<double>(xp[i]) * xp[i];
      cnt[group[i]] += 1;
    }
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t gi = group[i];
      const double mean = sum[gi] / cnt[gi];
      const double sd = std::sqrt(std::max(0.0, sq[gi] / cnt[gi] - mean * mean));
      yp[i] = static_cast<T>((xp[i] - mean) / (sd + 1e-9));
    }
    return Status::Ok();
  }));
  return set_out(ctx, 0, y, x0.dtype());
}

}  // namespace

void register_norm_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kBatchNormalization, batch_norm);
  r.add(ir::OpKind::kInstanceNormalization, instance_norm);
  r.add(ir::OpKind::kLayerNormalization, layer_norm);
  r.add(ir::OpKind::kGroupNormalization, group_norm);
  r.add(ir::OpKind::kLRN, lrn);
  r.add(ir::OpKind::kLpNormalization, lp_norm);
  r.add(ir::OpKind::kMeanVarianceNormalization, mvn);
}

}  // namespace kiln::cpu::nn
