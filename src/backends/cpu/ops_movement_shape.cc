// CPU reference kernels, movement family: ops that only change the shape (Reshape, Flatten,
// Squeeze, Unsqueeze, Identity, Dropout at inference) and ops that make small tensors from
// shapes (Shape, Size, ConstantOfShape, Range, EyeLike). View-like ops share the input's
// storage (Tensor::reshaped), so they work on every dtype, packed 4-bit included.
#include <algorithm>
#include <cmath>
#include <random>

#include "backends/cpu/dispatch.h"
#include "core/checked_size.h"
#include "backends/cpu/ops_movement_common.h"
#include "core/onnx_dtype.h"

namespace kiln::cpu::movement {
namespace {

// Operator Reshape, since version 1 (`shape` attribute) / 5 (`shape` input) / 14 (allowzero):
// 0 copies the input dim (unless allowzero), -1 is inferred from the remaining size.
Status reshape(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  std::vector<int64_t> spec;
  if (ctx.opset() < 5) {
    spec = ctx.attr_ints("shape");
  } else {
    if (!ctx.has_input(1)) return ctx.fail("the shape input is required");
    auto r = read_ints(ctx, ctx.in(1), "shape");
    if (!r.ok()) return r.status();
    spec = *r;
  }
  const bool allow_zero = ctx.opset() >= 14 && ctx.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allow_zero) {
      if (static_cast<int>(i) >= x.rank())
        return ctx.fail("shape[" + std::to_string(i) + "] = 0 copies a dim the input lacks");
      d = x.dim(static_cast<int>(i));
    } else if (d == -1) {
      if (infer >= 0) return ctx.fail("shape has more than one -1");
      infer = static_cast<int>(i);
      continue;
    } else if (d < 0) {
      return ctx.fail("shape has a negative dim " + std::to_string(d));
    }
    out[i] = d;
    if (!checked_mul(known, d, &known))
      return ctx.fail("shape " + shape_str(spec) + " has more elements than int64 can count");
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      return ctx.fail("cannot infer the -1 dim of shape for input " + shape_str(x.shape()));
    out[infer] = x.numel() / known;
  }
  if (shape_numel(out) != x.numel())
    return ctx.fail("cannot reshape " + shape_str(x.shape()) + " to " + shape_str(out));
  ctx.set_output(0, x.reshaped(out));
  return Status::Ok();
}

// Operator Flatten, since version 1 (axis in [0, r]) / 11 (negative axis).
Status flatten(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < -x.rank() || axis > x.rank()) return ctx.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < x.rank(); ++i) (i < axis ? outer : inner) *= x.dim(i);
  ctx.set_output(0, x.reshaped({outer, inner}));
  return Status::Ok();
}

// Squeeze/Unsqueeze axes: attribute before opset 13, optional (Squeeze) / required input after.
StatusOr<std::vector<int64_t>> squeeze_axes(const KernelContext& ctx, bool* given) {
  *given = false;
  if (ctx.opset() < 13) {
    *given = ctx.has_attr("axes");
    return ctx.attr_ints("axes");
  }
  if (!ctx.has_input(1)) return std::vector<int64_t>{};
  *given = true;
  return read_ints(ctx, ctx.in(1), "axes");
}

// Operator Squeeze, since version 1 / 13: removes the listed size-1 dims (all when none listed).
Status squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  bool given;
  auto axes = squeeze_axes(ctx, &given);
  if (!axes.ok()) return axes.status();
  std::vector<bool> drop(x.rank(), false);
  if (!given || axes->empty()) {
    for (int i = 0; i < x.rank(); ++i) drop[i] = x.dim(i) == 1;
  }
  for (int64_t a : *axes) {
    auto ax = norm_axis(ctx, a, x.rank(), "axes entry");
    if (!ax.ok()) return ax.status();
    if (x.dim(*ax) != 1)
      return ctx.fail("cannot squeeze dim " + std::to_string(*ax) + " of size " + std::to_string(x.dim(*ax)));
    drop[*ax] = true;
  }
  Shape out;
  for (int i = 0; i < x.rank(); ++i)
    if (!drop[i]) out.push_back(x.dim(i));
  ctx.set_output(0, x.reshaped(out));
  return Status::Ok();
}

// Operator Unsqueeze, since version 1 / 13: inserts size-1 dims at `axes` of the output.
Status unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  bool given;
  auto axes = squeeze_axes(ctx, &given);
  if (!axes.ok()) return axes.status();
  if (!given) return ctx.fail("axes are required");
  const int out_rank = x.rank() + static_cast<int>(axes->size());
  std::vector<bool> ins(out_rank, false);
  for (int64_t a : *axes) {
    auto ax = norm_axis(ctx, a, out_rank, "axes entry");
    if (!ax.ok()) return ax.status();
    if (ins[*ax]) return ctx.fail("axes has a duplicate entry " + std::to_string(a));
    ins[*ax] = true;
  }
  Shape out;
  int k = 0;
  for (int i = 0; i < out_rank; ++i) out.push_back(ins[i] ? 1 : x.dim(k++));
  ctx.set_output(0, x.reshaped(out));
  return Status::Ok();
}

Status identity(KernelContext& ctx) {
  ctx.set_output(0, ctx.in(0));
  return Status::Ok();
}

// Operator Dropout, since version 1 / 7 / 10 (bool mask) / 12 (ratio, training_mode inputs).
// Inference is the identity with an all-true mask. In training mode the kept elements are
// scaled by 1/(1-ratio); the random stream is the `seed` attribute's, not NumPy's.
Status dropout(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  float ratio = ctx.attr_float("ratio", 0.5f);
  bool training = false;
  if (ctx.opset() >= 12) {
    ratio = 0.5f;
    if (ctx.has_input(1)) {
      const Tensor& r = ctx.in(1);
      if (r.numel() != 1 || !dtype_is_float(r.dtype())) return ctx.fail("ratio must be a float scalar");
      ratio = static_cast<float>(load_as_double(r.dtype(), r.raw(), 0));
    }
    if (ctx.has_input(2)) {
      const Tensor& t = ctx.in(2);
      if (t.numel() != 1 || t.dtype() != DataType::kBool) return ctx.fail("training_mode must be a bool scalar");
      training = t.data<uint8_t>()[0] != 0;
    }
  }
  const DataType mask_type = ctx.opset() >= 10 ? DataType::kBool : x.dtype();
  if (!training || ratio == 0.f) {
    ctx.set_output(0, x);
    if (ctx.output_wanted(1)) {
      Tensor mask(mask_type, x.shape());
      for (int64_t i = 0; i < mask.numel(); ++i) store_from_double(mask_type, mask.raw(), i, 1.0);
      ctx.set_output(1, mask);
    }
    return Status::Ok();
  }
  if (!(ratio >= 0.f && ratio < 1.f)) return ctx.fail("ratio must be in [0, 1)");
  if (!dtype_is_float(x.dtype()) || elem_bytes(x.dtype()) == 0)
    return ctx.unsupported_here(std::string("training-mode dropout of ") + dtype_name(x.dtype()));
  std::mt19937_64 rng(static_cast<uint64_t>(ctx.attr_int("seed", 0)));
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  Tensor y(x.dtype(), x.shape()), mask(DataType::kBool, x.shape());
  const double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = uni(rng) >= ratio;
    mask.data<uint8_t>()[i] = keep;
    store_from_double(y.dtype(), y.raw(), i, keep ? load_as_double(x.dtype(), x.raw(), i) * scale : 0.0);
  }
  ctx.set_output(0, y);
  if (ctx.output_wanted(1)) ctx.set_output(1, mask);
  return Status::Ok();
}

// Operator Constant, since version 1 / 12 (value_float(s), value_int(s)). The importer folds
// Constants into values; this kernel serves graphs built or rewritten without that step.
Status constant(KernelContext& ctx) {
  const auto& attrs = ctx.node().attrs;
  if (auto it = attrs.find("value"); it != attrs.end() && it->second.t) {
    ctx.set_output(0, *it->second.t);
  } else if (ctx.has_attr("value_float")) {
    ctx.set_output(0, Tensor::scalar<float>(DataType::kFloat32, ctx.attr_float("value_float", 0.f)));
  } else if (ctx.has_attr("value_int")) {
    ctx.set_output(0, Tensor::scalar<int64_t>(DataType::kInt64, ctx.attr_int("value_int", 0)));
  } else if (ctx.has_attr("value_floats")) {
    const std::vector<float> v = ctx.attr_floats("value_floats");
    Tensor t(DataType::kFloat32, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<float>());
    ctx.set_output(0, t);
  } else if (ctx.has_attr("value_ints")) {
    const std::vector<int64_t> v = ctx.attr_ints("value_ints");
    Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.data<int64_t>());
    ctx.set_output(0, t);
  } else {
    return ctx.unsupported_here("no supported value attribute");
  }
  return Status::Ok();
}

// Operator Shape, since version 1 / 15 (start, end: clamped slice of the dims).
Status shape_op(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  const int64_t r = x.rank();
  int64_t start = ctx.opset() >= 15 ? ctx.attr_int("start", 0) : 0;
  int64_t end = ctx.opset() >= 15 ? ctx.attr_int("end", r) : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = std::max<int64_t>(end - start, 0);
  Tensor out(DataType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = x.dim(static_cast<int>(start + i));
  ctx.set_output(0, out);
  return Status::Ok();
}

Status size_op(KernelContext& ctx) {
  ctx.set_output(0, Tensor::scalar<int64_t>(DataType::kInt64, ctx.in(0).numel()));
  return Status::Ok();
}

// Operator ConstantOfShape, since version 9: fills the shape with the one-element `value`
// attribute (float32 zero by default).
Status constant_of_shape(KernelContext& ctx) {
  auto dims = read_ints(ctx, ctx.in(0), "shape");
  if (!dims.ok()) return dims.status();
  if (ctx.in(0).rank() > 1) return ctx.fail("shape must be 1-D");
  for (int64_t d : *dims)
    if (d < 0) return ctx.fail("shape has a negative dim " + std::to_string(d));
  Tensor value = Tensor::scalar<float>(DataType::kFloat32, 0.f);
  auto it = ctx.node().attrs.find("value");
  if (it != ctx.node().attrs.end() && it->second.t) {
    value = *it->second.t;
    if (value.numel() != 1) return ctx.fail("value must hold exactly one element");
  }
  auto es = copy_elem_bytes(ctx, value);
  if (!es.ok()) return es.status();
  if (Status st = check_out_shape(ctx, *dims); !st.ok()) return st;
  Tensor out(value.dtype(), *dims);
  for (int64_t i = 0; i < out.numel(); ++i) copy_elem(value.raw(), 0, out.raw(), i, *es);
  ctx.set_output(0, out);
  return Status::Ok();
}

// Operator Range, since version 11: n = max(ceil((limit - start) / delta), 0) elements
// start + i * delta.
Status range(KernelContext& ctx) {
  const Tensor &s = ctx.in(0), &l = ctx.in(1), &d = ctx.in(2);
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) return ctx.fail("start, limit and delta must be scalars");
  if (s.dtype() != l.dtype() || s.dtype() != d.dtype()) return ctx.fail("start, limit and delta must share a dtype");
  return dispatch_numeric(s.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      const T start = s.data<T>()[0], limit = l.data<T>()[0], delta = d.data<T>()[0];
      if (delta == 0) return ctx.fail("delta must not be zero");
      const double span = static_cast<double>(limit) - static_cast<double>(start);
      const int64_t n = std::max<int64_t>(static_cast<int64_t>(std::ceil(span / static_cast<double>(delta))), 0);
      if (Status st = check_out_shape(ctx, {n}); !st.ok()) return st;
      Tensor out(s.dtype(), {n});
      for (int64_t i = 0; i < n; ++i) out.data<T>()[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      ctx.set_output(0, out);
    } else {
      const double start = to_double(s.data<T>()[0]), limit = to_double(l.data<T>()[0]),
                   delta = to_double(d.data<T>()[0]);
      if (delta == 0) return ctx.fail("delta must not be zero");
      const double count = std::ceil((limit - start) / delta);
      if (!(count < 1e12)) return ctx.fail("range is too long or not finite");
      const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
      if (Status st = check_out_shape(ctx, {n}); !st.ok()) return st;
      Tensor out(s.dtype(), {n});
      for (int64_t i = 0; i < n; ++i) out.data<T>()[i] = from_double<T>(start + static_cast<double>(i) * delta);
      ctx.set_output(0, out);
    }
    return Status::Ok();
  });
}

// Operator EyeLike, since version 9: ones on the k-th diagonal of a 2-D tensor.
Status eye_like(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  if (x.rank() != 2) return ctx.fail("input must be 2-D, got " + shape_str(x.shape()));
  DataType dt = x.dtype();
  if (ctx.has_attr("dtype")) {
    dt = dtype_from_onnx(static_cast<int>(ctx.attr_int("dtype", 1)));
    if (dt == DataType::kUndefined) return ctx.fail("unknown dtype attribute");
  }
  if (dt == DataType::kString) return ctx.unsupported_here("string output");
  const int64_t k = ctx.attr_int("k", 0);
  Tensor out(dt, x.shape());
  for (int64_t i = 0; i < x.dim(0); ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < x.dim(1)) store_from_double(dt, out.raw(), i * x.dim(1) + j, 1.0);
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

}  // namespace

void register_shape_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kReshape, with_inputs<reshape, 1>);
  r.add(ir::OpKind::kFlatten, with_inputs<flatten, 1>);
  r.add(ir::OpKind::kSqueeze, with_inputs<squeeze, 1>);
  r.add(ir::OpKind::kUnsqueeze, with_inputs<unsqueeze, 1>);
  r.add(ir::OpKind::kIdentity, with_inputs<identity, 1>);
  r.add(ir::OpKind::kReformat, with_inputs<identity, 1>);  // logical tensors: a layout change is a copy
  r.add(ir::OpKind::kDropout, with_inputs<dropout, 1>);
  r.add(ir::OpKind::kConstant, constant);
  r.add(ir::OpKind::kShape, with_inputs<shape_op, 1>);
  r.add(ir::OpKind::kSize, with_inputs<size_op, 1>);
  r.add(ir::OpKind::kConstantOfShape, with_inputs<constant_of_shape, 1>);
  r.add(ir::OpKind::kRange, with_inputs<range, 3>);
  r.add(ir::OpKind::kEyeLike, with_inputs<eye_like, 1>);
}

}  // namespace kiln::cpu::movement
