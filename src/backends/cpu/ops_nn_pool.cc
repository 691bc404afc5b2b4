// CPU kernels for the pooling ops: AveragePool, MaxPool (with Indices), LpPool, the Global*
// pools and MaxUnpool, per the ONNX operator specs ("Operator AveragePool, since version 1",
// 7: count_include_pad, 10: ceil_mode, 19: dilations; "Operator MaxPool, since version 1",
// 8: Indices/storage_order, 10: dilations/ceil_mode, 12: int8/uint8; "Operator LpPool", 18:
// ceil_mode/dilations; "Operator MaxUnpool, since version 9"). Windows are N-D; padded
// positions are skipped (AveragePool divides by the in-bounds count unless count_include_pad).
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/ops_nn_conv_core.h"

namespace kiln::cpu::nn {
namespace {

// Per spatial dim and output coordinate: the input coordinates its window reads, and how many
// window positions fall inside the padded extent (AveragePool's count_include_pad divisor).
struct WindowTable {
  std::vector<std::vector<std::vector<int64_t>>> coords;  // [dim][out] -> in-bounds input coords
  std::vector<std::vector<int64_t>> padded;               // [dim][out] -> positions within the pads
};

WindowTable build_windows(const SpatialGeom& g) {
  WindowTable t;
  t.coords.resize(g.nd());
  t.padded.resize(g.nd());
  for (int d = 0; d < g.nd(); ++d) {
    for (int64_t o = 0; o < g.out[d]; ++o) {
      std::vector<int64_t> cs;
      int64_t padded = 0;
      for (int64_t k = 0; k < g.kernel[d]; ++k) {
        const int64_t i = o * g.stride[d] - g.pad_begin[d] + k * g.dilation[d];
        if (i >= 0 && i < g.in[d]) cs.push_back(i);
        if (i >= -g.pad_begin[d] && i < g.in[d] + g.pad_end[d]) ++padded;
      }
      t.coords[d].push_back(std::move(cs));
      t.padded[d].push_back(padded);
    }
  }
  return t;
}

// Calls visit(out_flat, window_inputs, padded_count) for every output position of one plane,
// window_inputs being the row-major flat spatial offsets of the in-bounds window elements.
template <typename Visit>
void for_each_window(const SpatialGeom& g, const WindowTable& t, Visit&& visit) {
  const int nd = g.nd();
  std::vector<int64_t> oidx(nd, 0), in_strides(nd, 1), cursor(nd);
  for (int d = nd - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * g.in[d + 1];
  std::vector<int64_t> offsets;
  for (int64_t o = 0; o < g.out_size(); ++o) {
    unravel(o, g.out.data(), nd, oidx.data());
    offsets.clear();
    int64_t padded = 1;
    bool empty = false;
    for (int d = 0; d < nd; ++d) {
      padded *= t.padded[d][oidx[d]];
      empty = empty || t.coords[d][oidx[d]].empty();
    }
    if (!empty) {
      std::fill(cursor.begin(), cursor.end(), 0);
      while (true) {
        int64_t off = 0;
        for (int d = 0; d < nd; ++d) off += t.coords[d][oidx[d]][cursor[d]] * in_strides[d];
        offsets.push_back(off);
        int d = nd - 1;
        for (; d >= 0; --d) {
          if (++cursor[d] < static_cast<int64_t>(t.coords[d][oidx[d]].size())) break;
          cursor[d] = 0;
        }
        if (d < 0) break;
      }
    }
    visit(o, offsets, padded);
  }
}

// Pool geometry from the node; Global* pools use a window over the whole spatial extent.
Status pool_geom(const KernelContext& ctx, const Tensor& x, bool global, SpatialGeom* g) {
  if (x.rank() < 3) return ctx.fail("X rank " + std::to_string(x.rank()) + ", expected at least 3");
  if (global) {
    g->in.assign(x.shape().begin() + 2, x.shape().end());
    g->kernel = g->in;
    const int nd = g->nd();
    g->stride.assign(nd, 1);
    g->dilation.assign(nd, 1);
    g->pad_begin.assign(nd, 0);
    g->pad_end.assign(nd, 0);
    g->out.assign(nd, 1);
    for (int64_t v : g->in)
      if (v <= 0) return ctx.fail("empty spatial dim");
    return Status::Ok();
  }
  if (!ctx.has_attr("kernel_shape")) return ctx.fail("kernel_shape attribute is required");
  return make_geom(ctx, x.shape(), ctx.attr_ints("kernel_shape"), ctx.attr_int("ceil_mode", 0) != 0, true, g);
}

Shape pool_out_shape(const Tensor& x, const SpatialGeom& g) {
  Shape s{x.dim(0), x.dim(1)};
  s.insert(s.end(), g.out.begin(), g.out.end());
  return s;
}

enum class Reduce { kAverage, kLp };

// AveragePool / LpPool / GlobalAveragePool / GlobalLpPool in float or double.
template <typename T>
void pool_reduce(const SpatialGeom& g, Reduce mode, bool count_pad, double p, int64_t planes, const T* x, T* y) {
  const WindowTable t = build_windows(g);
  const int64_t in_sz = g.in_size(), out_sz = g.out_size();
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * in_sz;
    T* yp = y + pl * out_sz;
    for_each_window(g, t, [&](int64_t o, const std::vector<int64_t>& offs, int64_t padded) {
      double acc = 0;
      if (mode == Reduce::kAverage) {
        for (int64_t off : offs) acc += xp[off];
        const int64_t count = count_pad ? padded : static_cast<int64_t>(offs.size());
        yp[o] = static_cast<T>(count > 0 ? acc / static_cast<double>(count) : 0.0);
      } else {
        for (int64_t off : offs) acc += std::pow(std::fabs(static_cast<double>(xp[off])), p);
        yp[o] = static_cast<T>(std::pow(acc, 1.0 / p));
      }
    });
  }
}

Status reduce_pool(KernelContext& ctx, Reduce mode, bool global) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  SpatialGeom g;
  KILN_RETURN_IF_ERROR(pool_geom(ctx, x0, global, &g));
  // LpPool-1 took p as a float attribute; later versions as an int.
  double p = 2.0;
  if (mode == Reduce::kLp && ctx.has_attr("p")) {
    const auto& a = ctx.node().attrs.at("p");
    p = a.kind == ir::Attribute::Kind::kFloat ? a.f : static_cast<double>(a.i);
  }
  if (mode == Reduce::kLp && !(p > 0)) return ctx.fail("p must be positive");
  const bool count_pad = ctx.attr_int("count_include_pad", 0) != 0;
  KILN_ASSIGN_OR_RETURN(Tensor x, to_compute(ctx, x0));
  Tensor y(x.dtype(), pool_out_shape(x, g));
  const int64_t planes = x.dim(0) * x.dim(1);
  if (x.dtype() == DataType::kFloat32) pool_reduce<float>(g, mode, count_pad, p, planes, x.data<float>(), y.data<float>());
  else pool_reduce<double>(g, mode, count_pad, p, planes, x.data<double>(), y.data<double>());
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, x0.dtype()));
  ctx.set_output(0, out);
  return Status::Ok();
}

Status average_pool(KernelContext& ctx) { return reduce_pool(ctx, Reduce::kAverage, false); }
Status global_average_pool(KernelContext& ctx) { return reduce_pool(ctx, Reduce::kAverage, true); }
Status lp_pool(KernelContext& ctx) { return reduce_pool(ctx, Reduce::kLp, false); }
Status global_lp_pool(KernelContext& ctx) { return reduce_pool(ctx, Reduce::kLp, true); }

// Row-major spatial offset -> column-major one (MaxPool storage_order = 1).
int64_t column_major(const SpatialGeom& g, int64_t off) {
  int64_t r = 0, stride = 1;
  std::vector<int64_t> idx(g.nd());
  unravel(off, g.in.data(), g.nd(), idx.data());
  for (int d = 0; d < g.nd(); ++d) {
    r += idx[d] * stride;
    stride *= g.in[d];
  }
  return r;
}

template <typename T>
void max_pool_plane(const SpatialGeom& g, const WindowTable& t, int64_t planes, bool col_major, const T* x, T* y,
                    int64_t* indices) {
  const int64_t in_sz = g.in_size(), out_sz = g.out_size();
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * in_sz;
    for_each_window(g, t, [&](int64_t o, const std::vector<int64_t>& offs, int64_t) {
      T best = std::numeric_limits<T>::lowest();
      if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
      int64_t arg = offs.empty() ? 0 : offs[0];
      for (int64_t off : offs)
        if (xp[off] > best) {
          best = xp[off];
          arg = off;
        }
      y[pl * out_sz + o] = best;
      if (indices) indices[pl * out_sz + o] = pl * in_sz + (col_major ? column_major(g, arg) : arg);
    });
  }
}

Status max_pool_impl(KernelContext& ctx, bool global) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  const Tensor& x0 = ctx.in(0);
  SpatialGeom g;
  KILN_RETURN_IF_ERROR(pool_geom(ctx, x0, global, &g));
  const bool col_major = ctx.attr_int("storage_order", 0) != 0;
  Tensor x = x0;
  if (is_half(x0.dtype())) {
    KILN_ASSIGN_OR_RETURN(x, to_compute(ctx, x0));
  }
  const Shape out_shape = pool_out_shape(x, g);
  Tensor y(x.dtype(), out_shape);
  Tensor idx;
  if (!global && ctx.output_wanted(1)) idx = Tensor(DataType::kInt64, out_shape);
  const WindowTable t = build_windows(g);
  const int64_t planes = x.dim(0) * x.dim(1);
  auto run = [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int8_t> ||
                  std::is_same_v<T, uint8_t>) {
      max_pool_plane<T>(g, t, planes, col_major, x.data<T>(), y.data<T>(), idx.defined() ? idx.data<int64_t>() : nullptr);
      return Status::Ok();
    } else {
      return unsupported(std::string("dtype ") + dtype_name(dtype_of<T>()) + " is not supported here");
    }
  };
  Status s = dispatch_numeric(x.dtype(), run);
  if (!s.ok()) return ctx.unsupported_here(s.message());
  KILN_ASSIGN_OR_RETURN(Tensor out, from_compute(y, x0.dtype()));
  ctx.set_output(0, out);
  if (idx.defined()) ctx.set_output(1, idx);
  return Status::Ok();
}

Status max_pool(KernelContext& ctx) { return max_pool_impl(ctx, false); }
Status global_max_pool(KernelContext& ctx) { return max_pool_impl(ctx, true); }

// MaxUnpool: scatter X into zeros at I. Indices address the unpooled tensor of the default
// shape (in - 1) * stride + kernel - pads; with an explicit output_shape each index is
// unraveled in the default shape and re-raveled in the requested one (ONNX reference).
Status max_unpool(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(2));
  const Tensor& x = ctx.in(0);
  const Tensor& ind = ctx.in(1);
  if (x.rank() < 3) return ctx.fail("X rank " + std::to_string(x.rank()) + ", expected at least 3");
  if (ind.shape() != x.shape() || ind.dtype() != DataType::kInt64) return ctx.fail("I must be int64 shaped like X");
  if (dtype_bits(x.dtype()) < 8) return ctx.unsupported_here("packed 4-bit X is not supported");
  const int nd = x.rank() - 2;
  const std::vector<int64_t> kernel = ctx.attr_ints("kernel_shape");
  const std::vector<int64_t> strides = ctx.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> pads = ctx.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (static_cast<int>(kernel.size()) != nd || static_cast<int>(strides.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    return ctx.fail("kernel_shape/strides/pads do not match the spatial rank");
  Shape dflt{x.dim(0), x.dim(1)};
  for (int d = 0; d < nd; ++d) dflt.push_back((x.dim(d + 2) - 1) * strides[d] + kernel[d] - pads[d] - pads[d + nd]);
  Shape out = dflt;
  if (const Tensor* os = ctx.input(2)) {
    if (os->rank() != 1 || os->numel() != x.rank()) return ctx.fail("output_shape must list every output dim");
    for (int i = 0; i < x.rank(); ++i) out[i] = load_as_int64(os->dtype(), os->raw(), i);
  }
  for (int i = 0; i < x.rank(); ++i)
    if (out[i] < 0 || dflt[i] <= 0) return ctx.fail("invalid output shape " + shape_str(out));
  Tensor y(x.dtype(), out);
  const int64_t total = shape_numel(dflt);
  const size_t esize = dtype_storage_bytes(x.dtype(), 1);
  std::vector<int64_t> pos(x.rank());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t k = ind.data<int64_t>()[i];
    if (k < 0 || k >= total) return ctx.fail("index " + std::to_string(k) + " out of range");
    if (out != dflt) {
      unravel(k, dflt.data(), x.rank(), pos.data());
      k = 0;
      for (int d = 0; d < x.rank(); ++d) {
        if (pos[d] >= out[d]) return ctx.fail("index falls outside output_shape");
        k = k * out[d] + pos[d];
      }
    }
    std::memcpy(static_cast<char*>(y.raw()) + k * esize, static_cast<const char*>(x.raw()) + i * esize, esize);
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_pool_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kAveragePool, average_pool);
  r.add(ir::OpKind::kGlobalAveragePool, global_average_pool);
  r.add(ir::OpKind::kLpPool, lp_pool);
  r.add(ir::OpKind::kGlobalLpPool, global_lp_pool);
  r.add(ir::OpKind::kMaxPool, max_pool);
  r.add(ir::OpKind::kGlobalMaxPool, global_max_pool);
  r.add(ir::OpKind::kMaxUnpool, max_unpool);
}

}  // namespace kiln::cpu::nn
