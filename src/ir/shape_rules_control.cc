// Shape rules of control flow (If: both branches merged, or the taken one when the condition is
// constant; Loop and Scan: bodies inferred from the carried/sliced inputs, scan outputs gain the
// iteration axis), NonMaxSuppression (data-dependent count), and the signal ops DFT, STFT, the
// window generators and MelWeightMatrix.
#include <algorithm>

#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

using Types = std::vector<std::pair<DataType, std::optional<SymShape>>>;

// The most precise shape that holds for both a and b.
std::optional<SymShape> merge_shapes(const std::optional<SymShape>& a, const std::optional<SymShape>& b) {
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  SymShape r(a->size());
  for (size_t i = 0; i < r.size(); ++i)
    if ((*a)[i] == (*b)[i]) r[i] = (*a)[i];
  return r;
}

// Only a branch that can run is checked: with a constant condition the other branch is never
// inferred, and with a runtime condition a branch whose inference fails (it cannot run at these
// shapes) is left to fail at run time, with the kernel's error naming it, if it is ever taken.
// Outputs the model leaves untyped take their types from the branches.
Status if_rule(ShapeContext& ctx) {
  const auto cond = ctx.const_ints(0);
  if (cond && cond->size() == 1) {
    const char* taken = (*cond)[0] ? "then_branch" : "else_branch";
    KILN_ASSIGN_OR_RETURN(Types t, ctx.infer_subgraph(taken, {}));
    if (static_cast<int>(t.size()) < ctx.num_outputs())
      return ctx.fail(std::string(taken) + " has " + std::to_string(t.size()) + " outputs for " +
                      std::to_string(ctx.num_outputs()) + " node outputs");
    for (int k = 0; k < ctx.num_outputs(); ++k) ctx.set_output(k, t[k].first, t[k].second);
    return Status::Ok();
  }
  StatusOr<Types> then_r = ctx.infer_subgraph("then_branch", {});
  StatusOr<Types> else_r = ctx.infer_subgraph("else_branch", {});
  if (!then_r.ok() && !else_r.ok()) return then_r.status();
  if (!then_r.ok()) then_r = else_r;
  if (!else_r.ok()) else_r = then_r;
  const Types& then_t = *then_r;
  const Types& else_t = *else_r;
  if (then_t.size() != else_t.size() || static_cast<int>(then_t.size()) < ctx.num_outputs())
    return ctx.fail("branches have " + std::to_string(then_t.size()) + " and " + std::to_string(else_t.size()) +
                    " outputs for " + std::to_string(ctx.num_outputs()) + " node outputs");
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    const DataType dt = then_t[k].first != DataType::kUndefined ? then_t[k].first : else_t[k].first;
    ctx.set_output(k, dt, merge_shapes(then_t[k].second, else_t[k].second));
  }
  return Status::Ok();
}

Status loop_rule(ShapeContext& ctx) {
  const int n_carried = ctx.num_inputs() - 2;
  if (n_carried < 0) return ctx.fail("expects at least 2 inputs (M, cond)");
  Types body_in{{DataType::kInt64, SymShape{}}, {DataType::kBool, SymShape{}}};
  for (int i = 0; i < n_carried; ++i) body_in.emplace_back(ctx.dtype(2 + i), ctx.shape(2 + i));
  KILN_ASSIGN_OR_RETURN(Types body_out, ctx.infer_subgraph("body", body_in));
  if (static_cast<int>(body_out.size()) < 1 + n_carried)
    return ctx.fail("body has " + std::to_string(body_out.size()) + " outputs, expected at least " + std::to_string(1 + n_carried));
  for (int i = 0; i < n_carried; ++i) {
    const auto& o = body_out[1 + i];
    ctx.set_output(i, o.first != DataType::kUndefined ? o.first : ctx.dtype(2 + i), merge_shapes(ctx.shape(2 + i), o.second));
  }
  // Scan outputs stack every iteration's value: the trip count is known only for a pure
  // for-loop (constant M, no condition input).
  Dim trips;
  if (auto m = ctx.const_ints(0); m && m->size() == 1 && !ctx.has_input(1)) trips = Dim::known((*m)[0]);
  for (int k = n_carried; k < ctx.num_outputs(); ++k) {
    const auto& o = body_out[1 + k];
    std::optional<SymShape> s;
    if (o.second) {
      s = *o.second;
      s->insert(s->begin(), trips);
    }
    ctx.set_output(k, o.first, s);
  }
  return Status::Ok();
}

Status scan_rule(ShapeContext& ctx) {
  const auto& n = ctx.node();
  const bool v8 = ctx.opset() > 0 && ctx.opset() < 9;  // Scan-8: sequence_lens input, batch axis 0
  const int first = v8 ? 1 : 0;
  const int m = static_cast<int>(n.attr_int("num_scan_inputs", 0));
  const int n_state = ctx.num_inputs() - first - m;
  if (m <= 0 || n_state < 0) return ctx.fail("num_scan_inputs does not match the inputs");
  const auto in_axes = n.attr_ints("scan_input_axes", std::vector<int64_t>(m, 0));
  if (static_cast<int>(in_axes.size()) != m) return ctx.fail("scan_input_axes must have num_scan_inputs entries");
  Types body_in;
  auto strip = [](const std::optional<SymShape>& s, size_t k) {
    std::optional<SymShape> r = s;
    if (r && r->size() > k) r->erase(r->begin() + k);
    return r;
  };
  for (int i = 0; i < n_state; ++i) body_in.emplace_back(ctx.dtype(first + i), v8 ? strip(ctx.shape(first + i), 0) : ctx.shape(first + i));
  Dim seq, batch;
  for (int j = 0; j < m; ++j) {
    const auto& s = ctx.shape(first + n_state + j);
    std::optional<SymShape> slice;
    if (s) {
      int64_t axis = v8 ? 1 : 0;
      if (!v8 && !normalize_axis(in_axes[j], static_cast<int>(s->size()), &axis)) return ctx.fail("scan_input_axes out of range");
      if (static_cast<int64_t>(s->size()) <= axis) return ctx.fail("scan input rank too small");
      if (j == 0) seq = (*s)[axis];
      if (v8) batch = (*s)[0];
      slice = strip(s, axis);
      if (v8) slice = strip(slice, 0);
    }
    body_in.emplace_back(ctx.dtype(first + n_state + j), slice);
  }
  KILN_ASSIGN_OR_RETURN(Types body_out, ctx.infer_subgraph("body", body_in));
  if (static_cast<int>(body_out.size()) != ctx.num_outputs()) return ctx.fail("body output count differs from the node's");
  const int k_out = ctx.num_outputs() - n_state;
  const auto out_axes = n.attr_ints("scan_output_axes", std::vector<int64_t>(k_out, 0));
  for (int i = 0; i < n_state; ++i) {
    auto s = body_out[i].second;
    if (v8 && s) s->insert(s->begin(), batch);
    ctx.set_output(i, body_out[i].first, merge_shapes(ctx.shape(first + i), s));
  }
  for (int k = 0; k < k_out; ++k) {
    auto s = body_out[n_state + k].second;
    if (s) {
      int64_t axis = k < static_cast<int>(out_axes.size()) ? out_axes[k] : 0;
      if (!normalize_axis(axis, static_cast<int>(s->size()) + 1, &axis)) return ctx.fail("scan_output_axes out of range");
      if (v8) {
        s->insert(s->begin(), seq);
        s->insert(s->begin(), batch);
      } else {
        s->insert(s->begin() + axis, seq);
      }
    }
    ctx.set_output(n_state + k, body_out[n_state + k].first, s);
  }
  return Status::Ok();
}

Status nms_rule(ShapeContext& ctx) {
  ctx.set_output(0, DataType::kInt64, SymShape{Dim{}, Dim::known(3)});
  return Status::Ok();
}

std::optional<int64_t> scalar_int(const ShapeContext& ctx, int i) {
  auto v = ctx.const_ints(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

// Operator DFT-17 (axis attribute, default 1) and DFT-20 (axis input, default -2): the last dim
// becomes 2 (complex), the transformed axis has dft_length entries (floor(n/2)+1 if onesided).
Status dft_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (!in) { ctx.set_output(0, ctx.dtype(0), std::nullopt); return Status::Ok(); }
  const int r = static_cast<int>(in->size());
  int64_t axis = ctx.opset() >= 20 ? scalar_int(ctx, 2).value_or(-2) : ctx.node().attr_int("axis", 1);
  if (!normalize_axis(axis, r, &axis) || axis == r - 1) return ctx.fail("axis out of range for rank " + std::to_string(r));
  SymShape out = *in;
  Dim n = (*in)[axis];
  if (ctx.has_input(1)) {
    auto len = scalar_int(ctx, 1);
    n = len ? Dim::known(*len) : Dim{};
  }
  if (ctx.node().attr_int("onesided", 0)) n = n.is_known() ? Dim::known(n.value / 2 + 1) : Dim{};
  out[axis] = n;
  out[r - 1] = Dim::known(2);
  ctx.set_output(0, ctx.dtype(0), out);
  return Status::Ok();
}

// Operator STFT-17: [batch, frames, bins, 2], frames = floor((length - frame_length)/step) + 1.
Status stft_rule(ShapeContext& ctx) {
  const auto& in = ctx.shape(0);
  if (in && in->size() != 3) return ctx.fail("signal rank " + std::to_string(in->size()) + ", expected 3");
  const auto step = scalar_int(ctx, 1);
  Dim frame_len;
  if (ctx.has_input(3)) {
    if (auto f = scalar_int(ctx, 3)) frame_len = Dim::known(*f);
  } else if (const auto& w = ctx.shape(2); w && w->size() == 1) {
    frame_len = (*w)[0];
  }
  Dim frames, bins;
  const Dim len = in ? (*in)[1] : Dim{};
  if (step && *step > 0 && len.is_known() && frame_len.is_known()) frames = Dim::known((len.value - frame_len.value) / *step + 1);
  if (frame_len.is_known()) bins = Dim::known(ctx.node().attr_int("onesided", 1) ? frame_len.value / 2 + 1 : frame_len.value);
  ctx.set_output(0, ctx.dtype(0), SymShape{in ? (*in)[0] : Dim{}, frames, bins, Dim::known(2)});
  return Status::Ok();
}

Status window_rule(ShapeContext& ctx) {
  const auto size = scalar_int(ctx, 0);
  ctx.set_output(0, dtype_from_onnx_code(ctx.node().attr_int("output_datatype", 1)), SymShape{size ? Dim::known(*size) : Dim{}});
  return Status::Ok();
}

Status mel_rule(ShapeContext& ctx) {
  const auto bins = scalar_int(ctx, 0);
  const auto dft = scalar_int(ctx, 1);
  ctx.set_output(0, dtype_from_onnx_code(ctx.node().attr_int("output_datatype", 1)),
                 SymShape{dft ? Dim::known(*dft / 2 + 1) : Dim{}, bins ? Dim::known(*bins) : Dim{}});
  return Status::Ok();
}

}  // namespace

void register_control_shape_rules(ShapeRuleTable& t) {
  t.add(OpKind::kIf, if_rule);
  t.add(OpKind::kLoop, loop_rule);
  t.add(OpKind::kScan, scan_rule);
  t.add(OpKind::kNonMaxSuppression, nms_rule);
  t.add(OpKind::kDFT, dft_rule);
  t.add(OpKind::kSTFT, stft_rule);
  for (OpKind op : {OpKind::kBlackmanWindow, OpKind::kHammingWindow, OpKind::kHannWindow}) t.add(op, window_rule);
  t.add(OpKind::kMelWeightMatrix, mel_rule);
}

}  // namespace kiln::ir
