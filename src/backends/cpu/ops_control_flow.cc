// CPU reference kernels for the control-flow ops If, Loop and Scan. Bodies run through
// ctx.run_subgraph (the interpreter resolves outer-scope names); these kernels only move
// tensors in and out: slicing scan inputs, stacking scan outputs, threading loop state.
// Sequence/optional values (Tensor::kind()) pass through If outputs and Loop state as they are;
// scan inputs and outputs must be tensors.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "backends/cpu/ops_control.h"
#include "core/numerics.h"

namespace kiln::cpu {
namespace {

const ir::Graph* graph_attr(const KernelContext& ctx, const std::string& name) {
  auto it = ctx.node().attrs.find(name);
  if (it == ctx.node().attrs.end() || it->second.kind != ir::Attribute::Kind::kGraph) return nullptr;
  return it->second.g.get();
}

// Bytes per element, or 0 for dtypes these byte-moving helpers cannot slice (packed 4-bit, string).
size_t elem_bytes(DataType dt) {
  if (dt == DataType::kString || dt == DataType::kUndefined || dtype_bits(dt) % 8 != 0) return 0;
  return dtype_storage_bytes(dt, 1);
}

// The sub-tensor at index `i` of `axis`, with that axis removed.
Tensor take(const Tensor& t, int axis, int64_t i) {
  Shape s = t.shape();
  const int64_t len = s[axis];
  s.erase(s.begin() + axis);
  Tensor out(t.dtype(), s);
  const size_t eb = elem_bytes(t.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= t.dim(d);
  for (int d = axis + 1; d < t.rank(); ++d) inner *= t.dim(d);
  const auto* src = static_cast<const uint8_t*>(t.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(dst + o * inner * eb, src + ((o * len + i) * inner) * eb, inner * eb);
  return out;
}

// Stacks `items` (equal shapes) along a new `axis`; `items[k]` lands at index order[k].
// With no items the result has shape `empty_shape` (the body's declared per-iteration shape
// with a 0-extent axis inserted).
Tensor stack(const std::vector<Tensor>& items, int axis, DataType dt, const Shape& empty_shape) {
  if (items.empty()) return Tensor(dt, empty_shape);
  const Tensor& first = items[0];
  Shape s = first.shape();
  const int64_t len = static_cast<int64_t>(items.size());
  s.insert(s.begin() + axis, len);
  Tensor out(first.dtype(), s);
  const size_t eb = elem_bytes(first.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= first.dim(d);
  for (int d = axis; d < first.rank(); ++d) inner *= first.dim(d);
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t k = 0; k < len; ++k) {
    const auto* src = static_cast<const uint8_t*>(items[k].raw());
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + ((o * len + k) * inner) * eb, src + o * inner * eb, inner * eb);
  }
  return out;
}

// The declared dtype and shape of body output `idx`, used for scan outputs of zero iterations.
void declared_output(const ir::Graph& body, size_t idx, int axis, DataType* dt, Shape* empty_shape) {
  const ir::Value& v = body.value(body.outputs[idx]);
  *dt = v.dtype == DataType::kUndefined ? DataType::kFloat32 : v.dtype;
  Shape s;
  if (v.shape) {
    for (const ir::Dim& d : *v.shape) s.push_back(d.is_known() ? d.value : 0);
  }
  axis = std::clamp(axis, 0, static_cast<int>(s.size()));
  s.insert(s.begin() + axis, 0);
  *empty_shape = s;
}

Status check_bool_scalar(const KernelContext& ctx, const Tensor& t, const char* what, bool* v) {
  if (t.numel() != 1) return ctx.fail(std::string(what) + " must hold exactly one element, got shape " + shape_str(t.shape()));
  if (t.dtype() == DataType::kString) return ctx.fail(std::string(what) + " must be bool");
  *v = load_as_double(t.dtype(), t.raw(), 0) != 0;
  return Status::Ok();
}

// Operator If, since version 1: runs then_branch or else_branch (no inputs) by `cond`.
Status if_op(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  bool cond = false;
  KILN_RETURN_IF_ERROR(check_bool_scalar(ctx, ctx.in(0), "cond", &cond));
  const ir::Graph* branch = graph_attr(ctx, cond ? "then_branch" : "else_branch");
  if (!branch) return ctx.fail(std::string("missing graph attribute '") + (cond ? "then_branch" : "else_branch") + "'");
  if (!branch->inputs.empty()) return ctx.fail("If branches take no inputs, the branch declares " + std::to_string(branch->inputs.size()));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph(*branch, {}));
  if (static_cast<int>(outs.size()) != ctx.num_outputs())
    return ctx.fail("branch produces " + std::to_string(outs.size()) + " outputs, the node has " + std::to_string(ctx.num_outputs()));
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (ctx.output_wanted(i)) ctx.set_output(i, outs[i]);
  return Status::Ok();
}

// Operator Loop, since version 1 (11 and 13 relax shape rules; 16 adds optional types):
// body(iter_num, cond, v...) -> (cond, v..., scan...); runs while iter < M and cond.
// Scan outputs are the per-iteration values stacked along a new axis 0.
Status loop_op(KernelContext& ctx) {
  const ir::Graph* body = graph_attr(ctx, "body");
  if (!body) return ctx.fail("missing graph attribute 'body'");
  const int n_state = ctx.num_inputs() - 2;
  if (n_state < 0) return ctx.fail("Loop takes at least 2 inputs (M, cond)");
  if (static_cast<int>(body->inputs.size()) != n_state + 2)
    return ctx.fail("body takes " + std::to_string(body->inputs.size()) + " inputs, expected " + std::to_string(n_state + 2));
  const int n_scan = static_cast<int>(body->outputs.size()) - 1 - n_state;
  if (n_scan < 0) return ctx.fail("body produces too few outputs (" + std::to_string(body->outputs.size()) + ")");
  if (ctx.num_outputs() > n_state + n_scan)
    return ctx.fail("node has " + std::to_string(ctx.num_outputs()) + " outputs, the body yields " + std::to_string(n_state + n_scan));

  int64_t max_trip = std::numeric_limits<int64_t>::max();
  if (ctx.has_input(0)) {
    if (ctx.in(0).numel() != 1 || !dtype_is_integer(ctx.in(0).dtype())) return ctx.fail("M must be one int64 value");
    max_trip = load_as_int64(ctx.in(0).dtype(), ctx.in(0).raw(), 0);
  }
  bool cond = true;
  if (ctx.has_input(1)) KILN_RETURN_IF_ERROR(check_bool_scalar(ctx, ctx.in(1), "cond", &cond));
  std::vector<Tensor> state;
  for (int i = 0; i < n_state; ++i) {
    if (!ctx.has_input(2 + i)) return ctx.fail("loop-carried input " + std::to_string(i) + " is missing");
    state.push_back(ctx.in(2 + i));
  }

  std::vector<std::vector<Tensor>> scans(n_scan);
  for (int64_t iter = 0; iter < max_trip && cond; ++iter) {
    std::vector<Tensor> in;
    in.push_back(Tensor::scalar<int64_t>(DataType::kInt64, iter));
    in.push_back(Tensor::scalar<uint8_t>(DataType::kBool, cond ? 1 : 0));
    for (const Tensor& t : state) in.push_back(t);
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph(*body, in));
    KILN_RETURN_IF_ERROR(check_bool_scalar(ctx, outs[0], "body output cond", &cond));
    for (int i = 0; i < n_state; ++i) state[i] = outs[1 + i];
    for (int k = 0; k < n_scan; ++k) {
      const Tensor& t = outs[1 + n_state + k];
      if (!t.is_tensor()) return ctx.unsupported_here("scan output " + std::to_string(k) + " is a sequence or optional");
      if (!elem_bytes(t.dtype())) return ctx.unsupported_here(std::string("scan output of dtype ") + dtype_name(t.dtype()));
      if (!scans[k].empty() && (t.shape() != scans[k][0].shape() || t.dtype() != scans[k][0].dtype()))
        return ctx.fail("scan output " + std::to_string(k) + " changes shape across iterations: " +
                        shape_str(scans[k][0].shape()) + " then " + shape_str(t.shape()));
      scans[k].push_back(t);
    }
  }
  for (int i = 0; i < n_state; ++i)
    if (ctx.output_wanted(i)) ctx.set_output(i, state[i]);
  for (int k = 0; k < n_scan; ++k) {
    if (!ctx.output_wanted(n_state + k)) continue;
    DataType dt;
    Shape empty;
    declared_output(*body, 1 + n_state + k, 0, &dt, &empty);
    ctx.set_output(n_state + k, stack(scans[k], 0, dt, empty));
  }
  return Status::Ok();
}

// One scan over `len` steps: the shared core of Scan-8 (per batch entry) and Scan-9+.
struct ScanSpec {
  const ir::Graph* body;
  int n_state;
  int n_scan_in;
  int n_scan_out;
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
};

Status run_scan(const KernelContext& ctx, const ScanSpec& sp, std::vector<Tensor> state,
                const std::vector<Tensor>& xs, int64_t len, std::vector<Tensor>* final_state,
                std::vector<Tensor>* scan_outs) {
  std::vector<std::vector<Tensor>> steps(sp.n_scan_out);
  for (int64_t t = 0; t < len; ++t) {
    std::vector<Tensor> in = state;
    for (int j = 0; j < sp.n_scan_in; ++j) {
      const int64_t idx = sp.in_dirs[j] ? len - 1 - t : t;
      in.push_back(take(xs[j], static_cast<int>(sp.in_axes[j]), idx));
    }
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outs, ctx.run_subgraph(*sp.body, in));
    for (int i = 0; i < sp.n_state; ++i) state[i] = outs[i];
    for (int k = 0; k < sp.n_scan_out; ++k) {
      const Tensor& y = outs[sp.n_state + k];
      if (!y.is_tensor()) return ctx.unsupported_here("scan output " + std::to_string(k) + " is a sequence or optional");
      if (!elem_bytes(y.dtype())) return ctx.unsupported_here(std::string("scan output of dtype ") + dtype_name(y.dtype()));
      if (!steps[k].empty() && (y.shape() != steps[k][0].shape() || y.dtype() != steps[k][0].dtype()))
        return ctx.fail("scan output " + std::to_string(k) + " changes shape across iterations");
      if (sp.out_axes[k] < 0 || sp.out_axes[k] > y.rank())
        return ctx.fail("scan_output_axes[" + std::to_string(k) + "] is out of range for rank " + std::to_string(y.rank() + 1));
      steps[k].push_back(y);
    }
  }
  *final_state = std::move(state);
  scan_outs->clear();
  for (int k = 0; k < sp.n_scan_out; ++k) {
    if (sp.out_dirs[k]) std::reverse(steps[k].begin(), steps[k].end());
    DataType dt;
    Shape empty;
    declared_output(*sp.body, sp.n_state + k, static_cast<int>(sp.out_axes[k]), &dt, &empty);
    scan_outs->push_back(stack(steps[k], static_cast<int>(std::max<int64_t>(sp.out_axes[k], 0)), dt, empty));
  }
  return Status::Ok();
}

// Reads a per-entry attribute list (axes or directions), defaulting to zeros.
Status read_list(const KernelContext& ctx, const std::string& name, int n, std::vector<int64_t>* out) {
  *out = ctx.attr_ints(name, std::vector<int64_t>(n, 0));
  if (static_cast<int>(out->size()) != n)
    return ctx.fail("attribute '" + name + "' has " + std::to_string(out->size()) + " entries, expected " + std::to_string(n));
  return Status::Ok();
}

// Operator Scan, since version 8 (batch axis 0, sequence axis 1, optional sequence_lens input)
// and since version 9 (no batch axis; scan_input_axes/directions, scan_output_axes/directions).
Status scan_op(KernelContext& ctx) {
  ScanSpec sp;
  sp.body = graph_attr(ctx, "body");
  if (!sp.body) return ctx.fail("missing graph attribute 'body'");
  const bool v8 = ctx.opset() < 9;
  const int first = v8 ? 1 : 0;  // Scan-8 starts with the optional sequence_lens input
  const int64_t m = ctx.attr_int("num_scan_inputs", -1);
  const int n_in = ctx.num_inputs() - first;
  if (m < 1 || m > n_in) return ctx.fail("num_scan_inputs must be in [1, " + std::to_string(n_in) + "]");
  sp.n_scan_in = static_cast<int>(m);
  sp.n_state = n_in - sp.n_scan_in;
  sp.n_scan_out = static_cast<int>(sp.body->outputs.size()) - sp.n_state;
  if (static_cast<int>(sp.body->inputs.size()) != n_in || sp.n_scan_out < 0)
    return ctx.fail("body signature (" + std::to_string(sp.body->inputs.size()) + " inputs, " +
                    std::to_string(sp.body->outputs.size()) + " outputs) does not match the node");
  for (int i = first; i < ctx.num_inputs(); ++i)
    if (!ctx.has_input(i)) return ctx.fail("input " + std::to_string(i) + " is missing");
  std::vector<Tensor> xs;
  for (int j = 0; j < sp.n_scan_in; ++j) {
    xs.push_back(ctx.in(first + sp.n_state + j));
    if (!elem_bytes(xs.back().dtype())) return ctx.unsupported_here(std::string("scan input of dtype ") + dtype_name(xs.back().dtype()));
  }

  if (!v8) {
    KILN_RETURN_IF_ERROR(read_list(ctx, "scan_input_axes", sp.n_scan_in, &sp.in_axes));
    KILN_RETURN_IF_ERROR(read_list(ctx, "scan_input_directions", sp.n_scan_in, &sp.in_dirs));
    KILN_RETURN_IF_ERROR(read_list(ctx, "scan_output_axes", sp.n_scan_out, &sp.out_axes));
    KILN_RETURN_IF_ERROR(read_list(ctx, "scan_output_directions", sp.n_scan_out, &sp.out_dirs));
    int64_t len = -1;
    for (int j = 0; j < sp.n_scan_in; ++j) {
      int64_t& a = sp.in_axes[j];
      const int r = xs[j].rank();
      if (a < -r || a >= r) return ctx.fail("scan_input_axes[" + std::to_string(j) + "] is out of range for rank " + std::to_string(r));
      if (a < 0) a += r;
      const int64_t l = xs[j].dim(static_cast<int>(a));
      if (len >= 0 && l != len) return ctx.fail("scan inputs disagree on the sequence length");
      len = l;
    }
    // Negative output axes count from the end of the stacked (rank + 1) output; the
    // per-iteration rank comes from the body's declared outputs, else from the first step.
    for (int k = 0; k < sp.n_scan_out; ++k) {
      if (sp.out_axes[k] >= 0) continue;
      const ir::Value& v = sp.body->value(sp.body->outputs[sp.n_state + k]);
      if (!v.shape) return ctx.unsupported_here("negative scan_output_axes with a body output of unknown rank");
      sp.out_axes[k] += static_cast<int64_t>(v.shape->size()) + 1;
    }
    std::vector<Tensor> state, final_state, scan_outs;
    for (int i = 0; i < sp.n_state; ++i) state.push_back(ctx.in(i));
    KILN_RETURN_IF_ERROR(run_scan(ctx, sp, state, xs, len, &final_state, &scan_outs));
    for (int i = 0; i < sp.n_state; ++i)
      if (ctx.output_wanted(i)) ctx.set_output(i, final_state[i]);
    for (int k = 0; k < sp.n_scan_out; ++k)
      if (ctx.output_wanted(sp.n_state + k)) ctx.set_output(sp.n_state + k, scan_outs[k]);
    return Status::Ok();
  }

  // Scan-8: every state and scan input has a leading batch axis; scan inputs are [batch, seq, ...].
  KILN_RETURN_IF_ERROR(read_list(ctx, "directions", sp.n_scan_in, &sp.in_dirs));
  sp.in_axes.assign(sp.n_scan_in, 0);
  sp.out_axes.assign(sp.n_scan_out, 0);
  sp.out_dirs.assign(sp.n_scan_out, 0);
  int64_t batch = -1, max_len = -1;
  for (int i = 0; i < n_in; ++i) {
    const Tensor& t = ctx.in(first + i);
    const bool is_scan = i >= sp.n_state;
    if (t.rank() < (is_scan ? 2 : 1)) return ctx.fail("input " + std::to_string(first + i) + " lacks the batch/sequence axes");
    if (batch >= 0 && t.dim(0) != batch) return ctx.fail("inputs disagree on the batch size");
    batch = t.dim(0);
    if (is_scan) {
      if (max_len >= 0 && t.dim(1) != max_len) return ctx.fail("scan inputs disagree on the sequence length");
      max_len = t.dim(1);
    }
  }
  std::vector<int64_t> seq_lens(static_cast<size_t>(batch), max_len);
  if (ctx.has_input(0)) {
    const Tensor& sl = ctx.in(0);
    if (sl.numel() != batch || !dtype_is_integer(sl.dtype())) return ctx.fail("sequence_lens must hold one integer per batch entry");
    for (int64_t b = 0; b < batch; ++b) {
      seq_lens[b] = load_as_int64(sl.dtype(), sl.raw(), b);
      if (seq_lens[b] < 0 || seq_lens[b] > max_len) return ctx.fail("sequence_lens[" + std::to_string(b) + "] is out of range");
    }
  }
  std::vector<std::vector<Tensor>> states(sp.n_state), outs(sp.n_scan_out);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> state, bxs, final_state, scan_outs;
    for (int i = 0; i < sp.n_state; ++i) state.push_back(take(ctx.in(first + i), 0, b));
    // A shorter sequence scans only its first seq_lens[b] steps (reverse ones end at step 0).
    for (int j = 0; j < sp.n_scan_in; ++j) {
      Tensor x = take(xs[j], 0, b);
      std::vector<Tensor> rows;
      for (int64_t t = 0; t < seq_lens[b]; ++t) rows.push_back(take(x, 0, t));
      Shape empty = x.shape();
      empty[0] = 0;
      bxs.push_back(stack(rows, 0, x.dtype(), empty));
    }
    KILN_RETURN_IF_ERROR(run_scan(ctx, sp, state, bxs, seq_lens[b], &final_state, &scan_outs));
    for (int i = 0; i < sp.n_state; ++i) states[i].push_back(final_state[i]);
    for (int k = 0; k < sp.n_scan_out; ++k) {
      // Pad short sequences with zeros up to the full length so batch entries stack.
      Tensor y = scan_outs[k];
      if (seq_lens[b] < max_len) {
        if (seq_lens[b] == 0) return ctx.unsupported_here("a zero sequence length in Scan-8");
        Shape s = y.shape();
        s[0] = max_len;
        Tensor padded(y.dtype(), s);
        std::memcpy(padded.raw(), y.raw(), y.nbytes());
        y = padded;
      }
      outs[k].push_back(y);
    }
  }
  for (int i = 0; i < sp.n_state; ++i) {
    if (!ctx.output_wanted(i)) continue;
    Shape empty = ctx.in(first + i).shape();
    ctx.set_output(i, stack(states[i], 0, ctx.in(first + i).dtype(), empty));
  }
  for (int k = 0; k < sp.n_scan_out; ++k) {
    if (!ctx.output_wanted(sp.n_state + k)) continue;
    DataType dt;
    Shape empty;
    declared_output(*sp.body, sp.n_state + k, 0, &dt, &empty);
    empty.insert(empty.begin(), 0);
    ctx.set_output(sp.n_state + k, stack(outs[k], 0, dt, empty));
  }
  return Status::Ok();
}

}  // namespace

void register_control_flow_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kIf, if_op);
  r.add(ir::OpKind::kLoop, loop_op);
  r.add(ir::OpKind::kScan, scan_op);
}

}  // namespace kiln::cpu
