// CPU reference kernels, movement family: joining and cutting (Concat, Split, Slice, Pad).
// Concat/Split copy contiguous blocks per outer index; Slice is one strided copy; Pad maps each
// output coordinate to an input coordinate per axis (or to the constant). Element copies go by
// byte size, so every byte-sized dtype is handled by the same code.
#include <algorithm>
#include <cstring>

#include "backends/cpu/ops_movement_common.h"

namespace kiln::cpu::movement {
namespace {

// Operator Concat, since version 1 (axis default 1) / 4 (axis required) / 11 (negative axis).
Status concat(KernelContext& ctx) {
  if (ctx.num_inputs() == 0 || !ctx.has_input(0)) return ctx.fail("needs at least one input");
  const Tensor& x0 = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x0);
  if (!es.ok()) return es.status();
  if (ctx.opset() >= 4 && !ctx.has_attr("axis")) return ctx.fail("the axis attribute is required");
  auto axis = norm_axis(ctx, ctx.attr_int("axis", 1), x0.rank());
  if (!axis.ok()) return axis.status();
  Shape out = x0.shape();
  out[*axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.fail("input " + std::to_string(i) + " is missing");
    const Tensor& t = ctx.in(i);
    if (t.dtype() != x0.dtype()) return ctx.fail("inputs have different dtypes");
    if (t.rank() != x0.rank()) return ctx.fail("inputs have different ranks");
    for (int k = 0; k < t.rank(); ++k)
      if (k != *axis && t.dim(k) != x0.dim(k))
        return ctx.fail("input " + std::to_string(i) + " has shape " + shape_str(t.shape()) + ", incompatible with " +
                        shape_str(x0.shape()));
    out[*axis] += t.dim(*axis);
  }
  int64_t outer = 1;
  for (int k = 0; k < *axis; ++k) outer *= out[k];
  const int64_t inner = shape_strides(out).at(*axis);
  Tensor y(x0.dtype(), out);
  char* dst = static_cast<char*>(y.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.in(i);
      const size_t block = static_cast<size_t>(t.dim(*axis) * inner) * *es;
      std::memcpy(dst, static_cast<const char*>(t.raw()) + o * block, block);
      dst += block;
    }
  ctx.set_output(0, y);
  return Status::Ok();
}

// Operator Split, since version 1 / 2 (split attribute) / 13 (split input) / 18 (num_outputs:
// chunks of ceil(d/n), the last one smaller).
Status split(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  auto axis = norm_axis(ctx, ctx.attr_int("axis", 0), x.rank());
  if (!axis.ok()) return axis.status();
  const int64_t d = x.dim(*axis);
  const int n = ctx.num_outputs();
  std::vector<int64_t> sizes;
  const bool split_input = (ctx.opset() == 1 || ctx.opset() >= 13) && ctx.has_input(1);
  if (split_input) {
    auto s = read_ints(ctx, ctx.in(1), "split");
    if (!s.ok()) return s.status();
    sizes = *s;
  } else if (ctx.opset() < 13 && ctx.has_attr("split")) {
    sizes = ctx.attr_ints("split");
  }
  if (sizes.empty()) {
    const int64_t parts = ctx.opset() >= 18 && ctx.has_attr("num_outputs") ? ctx.attr_int("num_outputs", n) : n;
    if (parts != n || n <= 0) return ctx.fail("num_outputs does not match the node's outputs");
    const bool even = d % n == 0;
    if (!even && ctx.opset() < 18)
      return ctx.fail("dim " + std::to_string(d) + " does not split evenly into " + std::to_string(n));
    const int64_t chunk = (d + n - 1) / n;
    for (int i = 0; i < n; ++i) sizes.push_back(std::clamp<int64_t>(d - chunk * i, 0, chunk));
  }
  if (static_cast<int>(sizes.size()) != n)
    return ctx.fail("split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(n) + " outputs");
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) return ctx.fail("split sizes must be non-negative");
    total += s;
  }
  if (total != d) return ctx.fail("split sizes sum to " + std::to_string(total) + ", expected " + std::to_string(d));
  int64_t outer = 1;
  for (int k = 0; k < *axis; ++k) outer *= x.dim(k);
  const int64_t inner = shape_strides(x.shape()).at(*axis);
  int64_t begin = 0;
  for (int i = 0; i < n; ++i) {
    Shape s = x.shape();
    s[*axis] = sizes[i];
    Tensor y(x.dtype(), s);
    const size_t block = static_cast<size_t>(sizes[i] * inner) * *es;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(static_cast<char*>(y.raw()) + o * block,
                  static_cast<const char*>(x.raw()) + ((o * d + begin) * inner) * *es, block);
    begin += sizes[i];
    if (ctx.output_wanted(i)) ctx.set_output(i, y);
  }
  return Status::Ok();
}

// Operator Slice, since version 1 (starts/ends/axes attributes) / 10 (inputs, steps) / 11
// (negative axes). Clamping follows the spec: for step > 0 start, end in [0, d]; for step < 0
// start in [0, d-1], end in [-1, d-1].
Status slice(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10) {
    starts = ctx.attr_ints("starts");
    ends = ctx.attr_ints("ends");
    axes = ctx.attr_ints("axes");
  } else {
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.fail("starts and ends are required");
    auto s = read_ints(ctx, ctx.in(1), "starts");
    if (!s.ok()) return s.status();
    auto e = read_ints(ctx, ctx.in(2), "ends");
    if (!e.ok()) return e.status();
    starts = *s;
    ends = *e;
    if (ctx.has_input(3)) {
      auto a = read_ints(ctx, ctx.in(3), "axes");
      if (!a.ok()) return a.status();
      axes = *a;
    }
    if (ctx.has_input(4)) {
      auto p = read_ints(ctx, ctx.in(4), "steps");
      if (!p.ok()) return p.status();
      steps = *p;
    }
  }
  if (starts.size() != ends.size()) return ctx.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.fail("starts, ends, axes and steps must have the same length");
  const std::vector<int64_t> xs = shape_strides(x.shape());
  Shape out = x.shape();
  std::vector<int64_t> strides = xs;
  std::vector<bool> seen(x.rank(), false);
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto ax = norm_axis(ctx, axes[i], x.rank(), "axes entry");
    if (!ax.ok()) return ax.status();
    if (seen[*ax]) return ctx.fail("axes has a duplicate entry");
    seen[*ax] = true;
    const int64_t d = x.dim(*ax), step = steps[i];
    if (step == 0) return ctx.fail("steps must not be zero");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += d;
    if (end < 0) end += d;
    int64_t len;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, d);
      end = std::clamp<int64_t>(end, 0, d);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::min(std::max<int64_t>(start, 0), d - 1);
      end = std::min(std::max<int64_t>(end, -1), d - 1);
      len = start > end ? (start - end - step - 1) / -step : 0;
    }
    out[*ax] = len;
    if (len > 0) offset += start * xs[*ax];
    strides[*ax] = xs[*ax] * step;
  }
  Tensor y(x.dtype(), out);
  if (y.numel() > 0) strided_copy(x.raw(), offset, strides, out, y.raw(), *es);
  ctx.set_output(0, y);
  return Status::Ok();
}

enum class PadMode { kConstant, kEdge, kReflect, kWrap };

// Maps output coordinate o of a padded axis to an input coordinate (-1: the constant).
int64_t pad_source(int64_t o, int64_t before, int64_t d, PadMode mode) {
  int64_t i = o - before;
  if (i >= 0 && i < d) return i;
  switch (mode) {
    case PadMode::kConstant: return -1;
    case PadMode::kEdge: return std::clamp<int64_t>(i, 0, d - 1);
    case PadMode::kReflect: {  // mirror without repeating the edge, as many periods as needed
      if (d == 1) return 0;
      const int64_t p = 2 * (d - 1);
      i = ((i % p) + p) % p;
      return i < d ? i : p - i;
    }
    case PadMode::kWrap: return ((i % d) + d) % d;
  }
  return -1;
}

// Operator Pad, since version 1 (`paddings`) / 2 (`pads`, `value` attributes) / 11 (pads and
// constant_value inputs) / 18 (axes input) / 19 (wrap mode). Negative pads crop.
Status pad(KernelContext& ctx) {
  const Tensor& x = ctx.in(0);
  auto es = copy_elem_bytes(ctx, x);
  if (!es.ok()) return es.status();
  const int r = x.rank();
  std::vector<int64_t> pads;
  std::vector<char> value(*es, 0);
  if (ctx.opset() < 11) {
    pads = ctx.attr_ints(ctx.opset() < 2 ? "paddings" : "pads");
    store_from_double(x.dtype(), value.data(), 0, ctx.attr_float("value", 0.f));
  } else {
    if (!ctx.has_input(1)) return ctx.fail("the pads input is required");
    auto p = read_ints(ctx, ctx.in(1), "pads");
    if (!p.ok()) return p.status();
    pads = *p;
    if (ctx.has_input(2) && ctx.in(2).numel() > 0) {
      if (ctx.in(2).dtype() != x.dtype()) return ctx.fail("constant_value must have the input's dtype");
      std::memcpy(value.data(), ctx.in(2).raw(), *es);
    }
  }
  std::vector<int64_t> axes;
  if (ctx.opset() >= 18 && ctx.has_input(3)) {
    auto a = read_ints(ctx, ctx.in(3), "axes");
    if (!a.ok()) return a.status();
    axes = *a;
  } else {
    for (int i = 0; i < r; ++i) axes.push_back(i);
  }
  if (pads.size() != 2 * axes.size())
    return ctx.fail("pads has " + std::to_string(pads.size()) + " entries, expected " +
                    std::to_string(2 * axes.size()));
  std::vector<int64_t> before(r, 0), after(r, 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    auto ax = norm_axis(ctx, axes[i], r, "axes entry");
    if (!ax.ok()) return ax.status();
    before[*ax] = pads[i];
    after[*ax] = pads[i + axes.size()];
  }
  const std::string mode_name = ctx.attr_string("mode", "constant");
  PadMode mode;
  if (mode_name == "constant") mode = PadMode::kConstant;
  else if (mode_name == "edge") mode = PadMode::kEdge;
  else if (mode_name == "reflect") mode = PadMode::kReflect;
  else if (mode_name == "wrap") mode = PadMode::kWrap;
  else return ctx.fail("unknown mode '" + mode_name + "'");
  Shape out(r);
  std::vector<std::vector<int64_t>> src(r);
  for (int k = 0; k < r; ++k) {
    out[k] = x.dim(k) + before[k] + after[k];
    if (out[k] < 0) return ctx.fail("pads crop axis " + std::to_string(k) + " below zero");
    if (mode != PadMode::kConstant && x.dim(k) == 0 && out[k] > 0)
      return ctx.fail("cannot " + mode_name + "-pad an empty axis");
    for (int64_t o = 0; o < out[k]; ++o) src[k].push_back(pad_source(o, before[k], x.dim(k), mode));
  }
  if (Status st = check_out_shape(ctx, out); !st.ok()) return st;
  Tensor y(x.dtype(), out);
  const std::vector<int64_t> xs = shape_strides(x.shape());
  const int64_t n = y.numel();
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = 0;
    bool inside = true;
    for (int k = 0; k < r && inside; ++k) {
      const int64_t v = src[k][idx[k]];
      inside = v >= 0;
      s += v * xs[k];
    }
    if (inside)
      copy_elem(x.raw(), s, y.raw(), i, *es);
    else
      std::memcpy(static_cast<char*>(y.raw()) + i * *es, value.data(), *es);
    for (int k = r - 1; k >= 0; --k) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  ctx.set_output(0, y);
  return Status::Ok();
}

}  // namespace

void register_slice_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kConcat, with_inputs<concat, 1>);
  r.add(ir::OpKind::kSplit, with_inputs<split, 1>);
  r.add(ir::OpKind::kSlice, with_inputs<slice, 1>);
  r.add(ir::OpKind::kPad, with_inputs<pad, 1>);
}

}  // namespace kiln::cpu::movement
