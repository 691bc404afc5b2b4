// CPU reference kernels, movement family: index-driven reads (Gather, GatherElements,
// GatherND) and OneHot. Indices may be int32 or int64 and negative (counted from the end);
// an out-of-range index is a clean error, never an out-of-bounds read.
#include <cstring>

#include "backends/cpu/ops_movement_common.h"
#include "core/checked_size.h"

namespace kiln::cpu::movement {
namespace {

// Index `v` into an axis of extent `d`, negative counting from the end; -1 if out of range.
inline int64_t wrap_index(int64_t v, int64_t d) {
  if (v < 0) v += d;
  return v >= 0 && v < d ? v : -1;
}

Status bad_index(const KernelContext& ctx, int64_t v, int64_t d) {
  return ctx.fail("index " + std::to_string(v) + " is out of range for a dim of " + std::to_string(d));
}

// Operator Gather, since version 1 / 11 (negative indices) / 13:
//   out[a..., i..., b...] = data[a..., indices[i...], b...] along `axis`.
Status gather(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto idx = read_ints(ctx, ctx.in(1), "indices");
  if (!idx.ok()) return idx.status();
  auto axis = norm_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (!axis.ok()) return axis.status();
  Shape out(x.shape().begin(), x.shape().begin() + *axis);
  out.insert(out.end(), ctx.in(1).shape().begin(), ctx.in(1).shape().end());
  out.insert(out.end(), x.shape().begin() + *axis + 1, x.shape().end());
  const int64_t d = x.dim(*axis);
  int64_t outer = 1;
  for (int k = 0; k < *axis; ++k) outer *= x.dim(k);
  const size_t block = static_cast<size_t>(shape_strides(x.shape())[*axis]) * *es;
  const int64_t n = static_cast<int64_t>(idx->size());
  Tensor y(x.dtype(), out);
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = wrap_index((*idx)[i], d);
      if (j < 0) return bad_index(ctx, (*idx)[i], d);
      std::memcpy(dst, static_cast<const char*>(x.raw()) + (o * d + j) * block, block);
      dst += block;
    }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator GatherElements, since version 11:
//   out[i][j][k] = data[indices[i][j][k]][j][k] (axis 0), likewise for other axes.
Status gather_elements(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& it = ctx.in(1);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto idx = read_ints(ctx, it, "indices");
  if (!idx.ok()) return idx.status();
  auto axis = norm_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (!axis.ok()) return axis.status();
  if (it.rank() != x.rank()) return ctx.fail("indices must have the rank of data");
  for (int k = 0; k < x.rank(); ++k)
    if (k != *axis && it.dim(k) > x.dim(k))
      return ctx.fail("indices shape " + shape_str(it.shape()) + " exceeds data shape " + shape_str(x.shape()));
  const std::vector<int64_t> xs = shape_strides(x.shape());
  const int r = x.rank();
  Tensor y(x.dtype(), it.shape());
  std::vector<int64_t> pos(r, 0);
  for (int64_t i = 0; i < it.numel(); ++i) {
    const int64_t j = wrap_index((*idx)[i], x.dim(*axis));
    if (j < 0) return bad_index(ctx, (*idx)[i], x.dim(*axis));
    int64_t s = 0;
    for (int k = 0; k < r; ++k) s += (k == *axis ? j : pos[k]) * xs[k];
    copy_elem(x.raw(), s, y.raw(), i, *es);
    for (int k = r - 1; k >= 0; --k) {
      if (++pos[k] < it.dim(k)) break;
      pos[k] = 0;
    }
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator GatherND, since version 11 / 12 (batch_dims): each length-m row of `indices`
// addresses a slice data[batch..., i0, ..., im-1, :]. Output shape:
// indices.shape[:-1] + data.shape[batch_dims + m:].
Status gather_nd(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const Tensor& it = ctx.in(1);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto idx = read_ints(ctx, it, "indices");
  if (!idx.ok()) return idx.status();
  const int64_t b = ctx.attr_int("batch_dims", 0);
  if (it.rank() < 1 || x.rank() < 1) return ctx.fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(x.rank(), it.rank())) return ctx.fail("batch_dims is out of range");
  const int64_t m = it.dim(-1);
  if (m < 1 || b + m > x.rank()) return ctx.fail("indices' last dim must be in [1, rank(data) - batch_dims]");
  for (int k = 0; k < b; ++k)
    if (it.dim(k) != x.dim(k)) return ctx.fail("batch dims of data and indices differ");
  Shape out(it.shape().begin(), it.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + m, x.shape().end());
  const std::vector<int64_t> xs = shape_strides(x.shape());
  int64_t batches = 1;
  for (int k = 0; k < b; ++k) batches *= x.dim(k);
  const int64_t tuples = batches == 0 ? 0 : it.numel() / m / batches;
  const int64_t batch_stride = b == 0 ? 0 : xs[b - 1];
  const int64_t slice = b + m == x.rank() ? 1 : xs[b + m - 1];
  Tensor y(x.dtype(), out);
  char* dst = static_cast<char*>(y.raw());
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t* row = idx->data() + (bi * tuples + t) * m;
      int64_t off = bi * batch_stride;
      for (int64_t j = 0; j < m; ++j) {
        const int64_t d = x.dim(static_cast<int>(b + j));
        const int64_t v = wrap_index(row[j], d);
        if (v < 0) return bad_index(ctx, row[j], d);
        off += v * xs[b + j];
      }
      std::memcpy(dst, static_cast<const char*>(x.raw()) + off * *es, static_cast<size_t>(slice) * *es);
      dst += slice * *es;
    }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator OneHot, since version 9 / 11 (negative indices count back from depth):
// out = values[1] where the index along `axis` equals indices[...], values[0] elsewhere.
Status one_hot(KernelContext& ctx) {
  const Tensor &it = ctx.in(0), &dt = ctx.in(1), &vals = ctx.in(2);
  auto es = copy_elem_bytes(ctx, vals);
  if (!es.ok()) return es.status();
  if (vals.numel() != 2) return ctx.fail("values must hold [off_value, on_value]");
  if (dt.numel() != 1 || elem_bytes(dt.dtype()) == 0 || dt.dtype() == DataType::kBool)
    return ctx.fail("depth must be a numeric scalar");
  if (elem_bytes(it.dtype()) == 0 || it.dtype() == DataType::kBool) return ctx.fail("indices must be numeric");
  const double depth_value = load_as_double(dt.dtype(), dt.raw(), 0);
  // Checked before the cast (NaN or 1e30 would be undefined); the output's size check follows.
  if (!(depth_value >= 1 && depth_value <= static_cast<double>(kMaxTensorElements))) return ctx.fail("depth must be positive");
  const int64_t depth = static_cast<int64_t>(depth_value);
  const int r = it.rank() + 1;
  auto axis = norm_axis(ctx, ctx.attr_int("axis", -1), r);
  if (!axis.ok()) return axis.status();
  Shape out = it.shape();
  out.insert(out.begin() + *axis, depth);
  if (Status st = check_out_shape(ctx, out); !st.ok()) return st;
  int64_t outer = 1;
  for (int k = 0; k < *axis; ++k) outer *= it.dim(k);
  const int64_t inner = outer == 0 ? 0 : it.numel() / outer;
  Tensor y(vals.dtype(), out);
  for (int64_t i = 0; i < y.numel(); ++i) copy_elem(vals.raw(), 0, y.raw(), i, *es);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      int64_t v = static_cast<int64_t>(load_as_double(it.dtype(), it.raw(), o * inner + in));
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) copy_elem(vals.raw(), 1, y.raw(), (o * depth + v) * inner + in, *es);
    }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_gather_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kGather, with_inputs<gather, 2>);
  r.add(ir::OpKind::kGatherElements, with_inputs<gather_elements, 2>);
  r.add(ir::OpKind::kGatherND, with_inputs<gather_nd, 2>);
  r.add(ir::OpKind::kOneHot, with_inputs<one_hot, 3>);
}

}  // namespace kiln::cpu::movement
