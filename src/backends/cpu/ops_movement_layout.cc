// CPU reference kernels, movement family: layout permutations and repetitions (Transpose,
// Expand, Tile, DepthToSpace, SpaceToDepth) expressed as one strided copy over a view of the
// input, plus the masking copies Trilu and ReverseSequence. All copy elements by byte size.
#include <algorithm>

#include "backends/cpu/ops_movement_common.h"

namespace kiln::cpu::movement {
namespace {

// Output = input viewed as `view` (same data, row-major), permuted by `perm`.
Tensor permute_view(const Tensor& x, const Shape& view, const std::vector<int>& perm, int esize) {
  const std::vector<int64_t> st = shape_strides(view);
  Shape out_shape;
  std::vector<int64_t> src_strides;
  for (int p : perm) {
    out_shape.push_back(view[p]);
    src_strides.push_back(st[p]);
  }
  Tensor out(x.dtype(), out_shape);
  strided_copy(x.raw(), 0, src_strides, out_shape, out.raw(), esize);
  return out;
}

// Operator Transpose, since version 1: default perm reverses the dims.
Status transpose(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  std::vector<int64_t> p = ctx.attr_ints("perm");
  if (!ctx.has_attr("perm"))
    for (int i = x.rank() - 1; i >= 0; --i) p.push_back(i);
  if (static_cast<int>(p.size()) != x.rank())
    return ctx.fail("perm has " + std::to_string(p.size()) + " entries for rank " + std::to_string(x.rank()));
  std::vector<int> perm;
  std::vector<bool> seen(x.rank(), false);
  for (int64_t v : p) {
    auto a = norm_axis(ctx, v, x.rank(), "perm entry");
    if (!a.ok()) return a.status();
    if (seen[*a]) return ctx.fail("perm is not a permutation");
    seen[*a] = true;
    perm.push_back(*a);
  }
  ctx.set_output(0, permute_view(x, x.shape(), perm, *es));
  return Status::Ok();
}

// Operator Expand, since version 8: numpy-style (bidirectional) broadcast of input and shape.
Status expand(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto shp = read_ints(ctx, ctx.in(1), "shape");
  if (!shp.ok()) return shp.status();
  const int r = std::max<int>(x.rank(), static_cast<int>(shp->size()));
  Shape out(r);
  std::vector<int64_t> strides(r, 0);
  const std::vector<int64_t> xs = shape_strides(x.shape());
  for (int i = 0; i < r; ++i) {
    const int xi = i - (r - x.rank()), si = i - (r - static_cast<int>(shp->size()));
    const int64_t a = xi >= 0 ? x.dim(xi) : 1, b = si >= 0 ? (*shp)[si] : 1;
    if (b < 0) return ctx.fail("shape has a negative dim");
    if (a != b && a != 1 && b != 1)
      return ctx.fail("cannot broadcast " + shape_str(x.shape()) + " to " + shape_str(*shp));
    out[i] = a == 1 ? b : a;
    if (xi >= 0 && a != 1) strides[i] = xs[xi];
  }
  if (Status st = check_out_shape(ctx, out); !st.ok()) return st;
  Tensor y(x.dtype(), out);
  strided_copy(x.raw(), 0, strides, out, y.raw(), *es);
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator Tile, since version 6: the output viewed as [r0, d0, r1, d1, ...] reads the input
// with stride 0 along each repeat dim.
Status tile(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto rep = read_ints(ctx, ctx.in(1), "repeats");
  if (!rep.ok()) return rep.status();
  if (static_cast<int>(rep->size()) != x.rank())
    return ctx.fail("repeats has " + std::to_string(rep->size()) + " entries for rank " + std::to_string(x.rank()));
  const std::vector<int64_t> xs = shape_strides(x.shape());
  Shape view, out;
  std::vector<int64_t> strides;
  for (int i = 0; i < x.rank(); ++i) {
    if ((*rep)[i] < 0) return ctx.fail("repeats must be non-negative");
    view.insert(view.end(), {(*rep)[i], x.dim(i)});
    strides.insert(strides.end(), {0, xs[i]});
    out.push_back((*rep)[i] * x.dim(i));
  }
  if (Status st = check_out_shape(ctx, out); !st.ok()) return st;
  Tensor y(x.dtype(), out);
  strided_copy(x.raw(), 0, strides, view, y.raw(), *es);
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator DepthToSpace, since version 1 / 11 (mode DCR default, CRD):
//   DCR: [N, b, b, C/b^2, H, W] -> transpose(0,3,4,1,5,2) -> [N, C/b^2, H*b, W*b]
//   CRD: [N, C/b^2, b, b, H, W] -> transpose(0,1,4,2,5,3)
Status depth_to_space(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (x.rank() != 4) return ctx.fail("input must be 4-D, got " + shape_str(x.shape()));
  // Past 2^24, blocksize^2 would pass the tensor limit (and wrap to 0 at 2^32).
  if (b <= 0 || b > (int64_t{1} << 24) || x.dim(1) % (b * b) != 0) return ctx.fail("channels must be divisible by blocksize^2");
  const int64_t n = x.dim(0), c = x.dim(1) / (b * b), h = x.dim(2), w = x.dim(3);
  const std::string mode = ctx.attr_string("mode", "DCR");
  Tensor y;
  if (mode == "DCR") {
    y = permute_view(x, {n, b, b, c, h, w}, {0, 3, 4, 1, 5, 2}, *es);
  } else if (mode == "CRD") {
    y = permute_view(x, {n, c, b, b, h, w}, {0, 1, 4, 2, 5, 3}, *es);
  } else {
    return ctx.fail("unknown mode '" + mode + "'");
  }
  ctx.set_output(0, y.reshaped({n, c, h * b, w * b}));
  return Status::Ok();
}

// Operator SpaceToDepth, since version 1: [N, C, H/b, b, W/b, b] -> transpose(0,3,5,1,2,4).
// ONNX defines no `mode` for it (only DepthToSpace has DCR/CRD); a mode other than the one
// this computes is refused rather than ignored (the importer already rejects the attribute
// unless --allow-unknown-attributes).
Status space_to_depth(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (ctx.has_attr("mode") && ctx.attr_string("mode", "") != "DCR")
    return ctx.unsupported_here("mode '" + ctx.attr_string("mode", "") +
                                "': ONNX SpaceToDepth has no mode (its layout is DepthToSpace's DCR inverse)");
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  const int64_t b = ctx.attr_int("blocksize", 0);
  if (x.rank() != 4) return ctx.fail("input must be 4-D, got " + shape_str(x.shape()));
  if (b <= 0 || x.dim(2) % b != 0 || x.dim(3) % b != 0) return ctx.fail("H and W must be divisible by blocksize");
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2) / b, w = x.dim(3) / b;
  Tensor y = permute_view(x, {n, c, h, b, w, b}, {0, 3, 5, 1, 2, 4}, *es);
  ctx.set_output(0, y.reshaped({n, c * b * b, h, w}));
  return Status::Ok();
}

// Operator Trilu, since version 14: keeps j - i >= k (upper) or j - i <= k (lower) in the last
// two dims, zeroes the rest.
Status trilu(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  if (x.rank() < 2) return ctx.fail("input must have rank >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    auto kv = read_ints(ctx, ctx.in(1), "k");
    if (!kv.ok()) return kv.status();
    if (kv->size() != 1) return ctx.fail("k must be a scalar");
    k = (*kv)[0];
  }
  const bool upper = ctx.attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  Tensor y(x.dtype(), x.shape());
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        const int64_t e = (m * rows + i) * cols + j;
        if (keep) copy_elem(x.raw(), e, y.raw(), e, *es);
      }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator ReverseSequence, since version 10: reverses the first sequence_lens[b] steps along
// time_axis of each batch entry; time and batch axes are 0 and 1 in either order.
Status reverse_sequence(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  if (x.rank() < 2) return ctx.fail("input must have rank >= 2");
  const int64_t ba = ctx.attr_int("batch_axis", 1), ta = ctx.attr_int("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0))) return ctx.fail("batch_axis and time_axis must be 0 and 1");
  auto lens = read_ints(ctx, ctx.in(1), "sequence_lens");
  if (!lens.ok()) return lens.status();
  const int64_t nb = x.dim(static_cast<int>(ba)), nt = x.dim(static_cast<int>(ta));
  if (static_cast<int64_t>(lens->size()) != nb) return ctx.fail("sequence_lens must have batch_size entries");
  const std::vector<int64_t> st = shape_strides(x.shape());
  const int64_t inner = st[1];  // dims 2.. are contiguous
  const int64_t sb = st[ba], stt = st[ta];
  Tensor y = x.clone();
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t len = (*lens)[b];
    if (len < 0 || len > nt) return ctx.fail("sequence_lens entry " + std::to_string(len) + " is out of range");
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(static_cast<char*>(y.raw()) + (b * sb + t * stt) * *es,
                  static_cast<const char*>(x.raw()) + (b * sb + (len - 1 - t) * stt) * *es,
                  static_cast<size_t>(inner) * *es);
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_layout_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kTranspose, with_inputs<transpose, 1>);
  r.add(ir::OpKind::kExpand, with_inputs<expand, 2>);
  r.add(ir::OpKind::kTile, with_inputs<tile, 2>);
  r.add(ir::OpKind::kDepthToSpace, with_inputs<depth_to_space, 1>);
  r.add(ir::OpKind::kSpaceToDepth, with_inputs<space_to_depth, 1>);
  r.add(ir::OpKind::kTrilu, with_inputs<trilu, 1>);
  r.add(ir::OpKind::kReverseSequence, with_inputs<reverse_sequence, 2>);
}

}  // namespace kiln::cpu::movement
