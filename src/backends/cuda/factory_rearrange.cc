// DepthToSpace (DCR / CRD), SpaceToDepth and Tile with constant repeats (ONNX Operators.md, each
// op's section): reshape-transpose-reshape moves and repetition, each one strided copy
// (kernels_more.h launch_strided_copy) of a row-major output viewed as at most kMaxRank dims, any element
// type (the float and the exact tables). Also EyeLike and ConstantOfShape (their output shapes only;
// any output type).
// The CPU reference: backends/cpu (ops_movement*).
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

// One strided copy from x (row-major) to n's output 0 with descriptor d.
Status add_copy(LowerContext& ctx, const ir::Node& n, const StridedDesc& d) {
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  ctx.add_layer(make_strided_copy_layer(ir::op_name(n.op), d, static_cast<int>(storage_bytes(ctx.storage()))), n.name,
                {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace

StatusOr<StridedDesc> plan_depth_space(const ir::Node& n, const Shape& in) {
  if (in.size() != 4) return unsupported(n.describe() + ": input rank " + std::to_string(in.size()) + " (4-D only)");
  const int64_t b = n.attr_int("blocksize", 0);
  if (b < 1) return invalid_argument(n.describe() + ": blocksize must be >= 1");
  const int64_t N = in[0], C = in[1], H = in[2], W = in[3];
  StridedDesc d;
  d.rank = 6;
  if (n.op == ir::OpKind::kDepthToSpace) {
    if (C % (b * b) != 0) return invalid_argument(n.describe() + ": channels not divisible by blocksize^2");
    const int64_t c2 = C / (b * b);
    const bool crd = n.attr_string("mode", "DCR") == "CRD";
    // Output [N, C/b^2, H*b, W*b] as [N, c', H, i, W, j]: DCR reads x[n, (i*b + j)*c' + c', h, w],
    // CRD x[n, c'*b*b + i*b + j, h, w].
    const int64_t dims[6] = {N, c2, H, b, W, b};
    const int64_t st[6] = {C * H * W, crd ? b * b * H * W : H * W, W, crd ? b * H * W : b * c2 * H * W, 1,
                           crd ? H * W : c2 * H * W};
    for (int k = 0; k < 6; ++k) {
      d.out_dims[k] = dims[k];
      d.src_strides[k] = st[k];
    }
  } else {
    if (H % b != 0 || W % b != 0)
      return invalid_argument(n.describe() + ": height or width not divisible by blocksize");
    // Output [N, C*b*b, H/b, W/b] as [N, i, j, C, h', w'], reading x[n, c, h'*b + i, w'*b + j].
    const int64_t dims[6] = {N, b, b, C, H / b, W / b};
    const int64_t st[6] = {C * H * W, W, 1, H * W, b * W, b};
    for (int k = 0; k < 6; ++k) {
      d.out_dims[k] = dims[k];
      d.src_strides[k] = st[k];
    }
  }
  return d;
}

namespace {

// Tile's repeats (constant input 1), one per input dim.
StatusOr<std::vector<int64_t>> tile_repeats(const ir::Node& n, const ir::Graph& g, const Shape& in) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(n.describe() + ": repeats is required");
  const auto& rc = g.value(n.inputs[1]).constant;
  if (!rc) return unsupported(n.describe() + ": repeats must be a constant on the GPU path");
  if (rc->numel() != static_cast<int64_t>(in.size()))
    return invalid_argument(n.describe() + ": repeats has " + std::to_string(rc->numel()) + " entries for rank " +
                            std::to_string(in.size()));
  std::vector<int64_t> reps;
  for (size_t k = 0; k < in.size(); ++k) {
    const auto r = static_cast<int64_t>(load_as_double(rc->dtype(), rc->raw(), static_cast<int64_t>(k)));
    if (r < 0) return invalid_argument(n.describe() + ": negative repeat " + std::to_string(r));
    reps.push_back(r);
  }
  return reps;
}

// The strided copy of Tile(x of shape `in`, reps): output dim k (d_k * r_k) viewed as [r_k, d_k]
// when r_k != 1, the repeat read with stride 0. Unsupported past kMaxRank dims.
StatusOr<StridedDesc> tile_desc(const ir::Node& n, const Shape& in, const std::vector<int64_t>& reps) {
  const auto st = row_strides(in);
  std::vector<int64_t> dims, strides;
  for (size_t k = 0; k < in.size(); ++k) {
    if (reps[k] != 1) {
      dims.push_back(reps[k]);
      strides.push_back(0);
    }
    dims.push_back(in[k]);
    strides.push_back(st[k]);
  }
  if (dims.size() > static_cast<size_t>(kMaxRank))
    return unsupported(n.describe() + ": more than " + std::to_string(kMaxRank) + " dims once repeats are split out (input rank " +
                       std::to_string(in.size()) + ")");
  if (dims.empty()) {  // rank 0: one element
    dims.push_back(1);
    strides.push_back(0);
  }
  StridedDesc d;
  d.rank = static_cast<int>(dims.size());
  for (int k = 0; k < d.rank; ++k) {
    d.out_dims[k] = dims[k];
    d.src_strides[k] = strides[k];
  }
  return d;
}

}  // namespace

StatusOr<StridedDesc> plan_tile(const ir::Node& n, const ir::Graph& g, const Shape& in) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, tile_repeats(n, g, in));
  return tile_desc(n, in, reps);
}

Status lower_depth_space(LowerContext& ctx, const ir::Node& n, const std::string&) {
  KILN_ASSIGN_OR_RETURN(StridedDesc d, plan_depth_space(n, ctx.shape(n.inputs[0])));
  return add_copy(ctx, n, d);
}

// Tile in one strided copy, or — when input rank + repeated dims pass 6 — in several, each
// repeating as many leading axes as fit (Tile(x, r) = Tile(Tile(x, r_a), r_b) for r = r_a * r_b
// axis by axis: repetition of different axes commutes).
Status lower_tile(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& in = ctx.shape(n.inputs[0]);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, tile_repeats(n, ctx.graph(), in));
  size_t repeated = 0;
  for (int64_t r : reps) repeated += r != 1;
  if (in.size() + repeated <= static_cast<size_t>(kMaxRank)) {
    KILN_ASSIGN_OR_RETURN(StridedDesc d, tile_desc(n, in, reps));
    return add_copy(ctx, n, d);
  }
  if (in.size() >= static_cast<size_t>(kMaxRank)) return unsupported(where + "rank " + std::to_string(in.size()) + " Tile");
  const size_t per_step = static_cast<size_t>(kMaxRank) - in.size();
  const int eb = static_cast<int>(storage_bytes(ctx.storage()));
  KILN_ASSIGN_OR_RETURN(int cur, ctx.row_major_operand(n.inputs[0]));
  Shape cur_shape = in;
  size_t k = 0;
  for (int step = 0; k < in.size(); ++step) {
    std::vector<int64_t> part(in.size(), 1);
    for (size_t taken = 0; k < in.size() && taken < per_step; ++k) {
      part[k] = reps[k];
      taken += reps[k] != 1;
    }
    while (k < in.size() && reps[k] == 1) ++k;  // nothing left to repeat there
    KILN_ASSIGN_OR_RETURN(StridedDesc d, tile_desc(n, cur_shape, part));
    Shape next = cur_shape;
    for (size_t j = 0; j < in.size(); ++j) next[j] *= part[j];
    const bool last = k >= in.size();
    const int out = last ? ctx.new_output(n)
                         : ctx.new_value(n.name + ":tile" + std::to_string(step), next, ctx.storage(), false);
    ctx.add_layer(make_strided_copy_layer(ir::op_name(n.op), d, eb), last ? n.name : n.name + ":tile" + std::to_string(step),
                  {cur}, {out}, n.origin);
    cur = out;
    cur_shape = next;
  }
  return Status::Ok();
}

Status lower_eye_like(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const Shape& in = ctx.shape(n.inputs[0]);
  if (in.size() != 2) return invalid_argument(where + "input must be 2-D, got " + shape_str(in));
  const int64_t rows = in[0], cols = in[1], k = n.attr_int("k", 0);
  const StorageType t = ctx.storage();
  // The input is a layer input for ordering only: EyeLike reads its shape, not its values.
  KILN_ASSIGN_OR_RETURN(int x, ctx.activation(n.inputs[0]));
  ctx.add_layer(make_kernel_layer("EyeLike", std::string("kiln.eye ") + storage_name(t),
                                  [=](ExecState& s, const Layer& l) {
                                    return launch_eye(s.ptr(l.outs[0]), t, rows, cols, k, s.stream);
                                  }),
                n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// ConstantOfShape: the output (its shape as the lowering knows it: shape discovery keys an engine
// by input values where the shape depends on them, docs/decisions/0069) filled with `value`
// (float32 0 by default). An integer value a float does not hold exactly is refused.
Status lower_constant_of_shape(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  double v = 0;
  auto it = n.attrs.find("value");
  if (it != n.attrs.end() && it->second.t) {
    if (it->second.t->numel() != 1) return invalid_argument(where + "value must hold exactly one element");
    v = load_as_double(it->second.t->dtype(), it->second.t->raw(), 0);
  }
  const auto f = static_cast<float>(v);
  if (static_cast<double>(f) != v && !(v != v))
    return unsupported(where + "fill value " + std::to_string(v) + " is not exact in float");
  const StorageType t = ctx.storage();
  const int64_t count = shape_numel(ctx.shape(n.outputs[0]));
  // The shape input orders the layer only: its values were read by shape discovery.
  KILN_ASSIGN_OR_RETURN(int x, ctx.activation(n.inputs[0]));
  ctx.add_layer(make_kernel_layer("ConstantOfShape", std::string("kiln.fill ") + storage_name(t),
                                  [=](ExecState& s, const Layer& l) {
                                    return launch_fill(s.ptr(l.outs[0]), t, count, f, s.stream);
                                  }),
                n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
