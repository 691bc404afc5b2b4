// CPU reference kernels for ONNX sequence and optional ops (SequenceConstruct/Empty/At/Insert/
// Erase/Length, SplitToSequence, ConcatFromSequence, SequenceMap, Optional, OptionalHasElement,
// OptionalGetElement). Sequences are Tensor::sequence values (shared, immutable element lists;
// see docs/decisions/0003-sequence-values.md), so these kernels never copy element data except
// to split or concatenate. Registers TfIdfVectorizer (ops_sequence_tfidf.cc) too.
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_kernel.h"
#include "core/numerics.h"
#include "core/onnx_dtype.h"

namespace kiln::cpu {

void register_sequence_tfidf_kernels(KernelRegistry& r);  // ops_sequence_tfidf.cc

namespace {

const char* kind_name(const Tensor& t) {
  return t.is_sequence() ? "a sequence" : t.is_none() ? "an empty optional" : "a tensor";
}

Status require_sequence(const KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.fail("input " + std::to_string(i) + " (a sequence) is missing");
  if (!ctx.in(i).is_sequence()) return ctx.fail("input " + std::to_string(i) + " must be a sequence, got " + kind_name(ctx.in(i)));
  return Status::Ok();
}

Status require_tensor(const KernelContext& ctx, int i) {
  if (!ctx.has_input(i)) return ctx.fail("input " + std::to_string(i) + " (a tensor) is missing");
  if (!ctx.in(i).is_tensor()) return ctx.fail("input " + std::to_string(i) + " must be a tensor, got " + kind_name(ctx.in(i)));
  return Status::Ok();
}

// Reads a position input (one int32/int64 value) and normalizes it into [0, n) (or [0, n]
// when `inclusive_end`, for insertion); negative positions count from the back.
Status read_position(const KernelContext& ctx, int i, int64_t n, bool inclusive_end, int64_t* pos) {
  const Tensor& p = ctx.in(i);
  if (!p.is_tensor() || p.numel() != 1 || (p.dtype() != DataType::kInt32 && p.dtype() != DataType::kInt64))
    return ctx.fail("position must be one int32/int64 value, got " + std::string(dtype_name(p.dtype())) + " " + shape_str(p.shape()));
  int64_t v = load_as_int64(p.dtype(), p.raw(), 0);
  const int64_t hi = inclusive_end ? n : n - 1;
  if (v < -n || v > hi)
    return ctx.fail("position " + std::to_string(v) + " is out of range [" + std::to_string(-n) + ", " + std::to_string(hi) +
                    "] for a sequence of " + std::to_string(n));
  *pos = v < 0 ? v + n : v;
  return Status::Ok();
}

// Bytes per element for byte-moving split/concat, 0 where unsupported (strings, packed 4-bit).
size_t elem_bytes(DataType dt) {
  if (dt == DataType::kString || dt == DataType::kUndefined || dtype_bits(dt) % 8 != 0) return 0;
  return dtype_storage_bytes(dt, 1);
}

// Operator SequenceEmpty, since version 11: `dtype` (a TensorProto.DataType code, default float).
Status sequence_empty(KernelContext& ctx) {
  DataType dt = DataType::kFloat32;
  if (ctx.has_attr("dtype")) {
    dt = dtype_from_onnx(static_cast<int>(ctx.attr_int("dtype", 1)));
    if (dt == DataType::kUndefined) return ctx.unsupported_here("dtype code " + std::to_string(ctx.attr_int("dtype", 1)));
  }
  ctx.set_output(0, Tensor::sequence(dt, {}));
  return Status::Ok();
}

// Operator SequenceConstruct, since version 11: the inputs (one dtype) in order.
Status sequence_construct(KernelContext& ctx) {
  if (ctx.num_inputs() < 1) return ctx.fail("takes at least one tensor");
  std::vector<Tensor> items;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    KILN_RETURN_IF_ERROR(require_tensor(ctx, i));
    if (ctx.in(i).dtype() != ctx.in(0).dtype())
      return ctx.fail("input " + std::to_string(i) + " has dtype " + dtype_name(ctx.in(i).dtype()) + ", input 0 has " +
                      dtype_name(ctx.in(0).dtype()));
    items.push_back(ctx.in(i));
  }
  ctx.set_output(0, Tensor::sequence(ctx.in(0).dtype(), std::move(items)));
  return Status::Ok();
}

// Operator SequenceAt, since version 11: element `position` (in [-n, n-1]).
Status sequence_at(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  KILN_RETURN_IF_ERROR(require_tensor(ctx, 1));
  const auto& items = ctx.in(0).items();
  int64_t pos;
  KILN_RETURN_IF_ERROR(read_position(ctx, 1, static_cast<int64_t>(items.size()), false, &pos));
  ctx.set_output(0, items[pos]);
  return Status::Ok();
}

// Operator SequenceInsert, since version 11: inserts `tensor` before `position` (in [-n, n];
// default n, i.e. appends). The tensor's dtype must be the sequence's.
Status sequence_insert(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  KILN_RETURN_IF_ERROR(require_tensor(ctx, 1));
  const Tensor& seq = ctx.in(0);
  const Tensor& t = ctx.in(1);
  std::vector<Tensor> items = seq.items();
  if (!items.empty() && t.dtype() != seq.dtype())
    return ctx.fail(std::string("tensor dtype ") + dtype_name(t.dtype()) + " differs from the sequence's " + dtype_name(seq.dtype()));
  int64_t pos = static_cast<int64_t>(items.size());
  if (ctx.has_input(2)) KILN_RETURN_IF_ERROR(read_position(ctx, 2, pos, true, &pos));
  items.insert(items.begin() + pos, t);
  ctx.set_output(0, Tensor::sequence(t.dtype(), std::move(items)));
  return Status::Ok();
}

// Operator SequenceErase, since version 11: removes element `position` (default -1, the last).
Status sequence_erase(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  std::vector<Tensor> items = ctx.in(0).items();
  const int64_t n = static_cast<int64_t>(items.size());
  int64_t pos = n - 1;
  if (ctx.has_input(1)) {
    KILN_RETURN_IF_ERROR(read_position(ctx, 1, n, false, &pos));
  } else if (n == 0) {
    return ctx.fail("cannot erase from an empty sequence");
  }
  items.erase(items.begin() + pos);
  ctx.set_output(0, Tensor::sequence(ctx.in(0).dtype(), std::move(items)));
  return Status::Ok();
}

// Operator SequenceLength, since version 11: the element count as an int64 scalar.
Status sequence_length(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  ctx.set_output(0, Tensor::scalar<int64_t>(DataType::kInt64, static_cast<int64_t>(ctx.in(0).items().size())));
  return Status::Ok();
}

// Copies [begin, begin + len) of `axis` of x (viewed as [outer, dim, inner]) into a new tensor.
Tensor slice_axis(const Tensor& x, int axis, int64_t begin, int64_t len, size_t eb) {
  Shape s = x.shape();
  const int64_t dim = s[axis];
  s[axis] = len;
  Tensor out(x.dtype(), s);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const auto* src = static_cast<const uint8_t*>(x.raw());
  auto* dst = static_cast<uint8_t*>(out.raw());
  const size_t row = static_cast<size_t>(len * inner) * eb;
  for (int64_t o = 0; o < outer; ++o)
    if (row) std::memcpy(dst + o * row, src + static_cast<size_t>((o * dim + begin) * inner) * eb, row);
  return out;
}

// Operator SplitToSequence, since version 11: splits `input` along `axis` into pieces of the
// lengths in `split` (a 1-D list summing to the axis extent, or one chunk size whose last chunk
// may be shorter); without `split`, into size-1 pieces, dropping the axis unless `keepdims`.
Status split_to_sequence(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_tensor(ctx, 0));
  const Tensor& x = ctx.in(0);
  if (x.rank() < 1) return ctx.fail("input must have rank >= 1");
  const size_t eb = elem_bytes(x.dtype());
  if (!eb) return ctx.unsupported_here(std::string("dtype ") + dtype_name(x.dtype()));
  int64_t axis = ctx.attr_int("axis", 0);
  if (axis < -x.rank() || axis >= x.rank())
    return ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(x.rank()));
  if (axis < 0) axis += x.rank();
  const int ax = static_cast<int>(axis);
  const int64_t dim = x.dim(ax);
  std::vector<int64_t> lengths;
  bool squeeze = false;
  if (ctx.has_input(1)) {
    const Tensor& sp = ctx.in(1);
    if (!sp.is_tensor() || !dtype_is_integer(sp.dtype()) || sp.rank() > 1)
      return ctx.fail("split must be an integer scalar or 1-D tensor");
    if (sp.rank() == 0) {
      const int64_t chunk = load_as_int64(sp.dtype(), sp.raw(), 0);
      if (chunk <= 0) return ctx.fail("split chunk size must be positive, got " + std::to_string(chunk));
      for (int64_t b = 0; b < dim; b += chunk) lengths.push_back(std::min(chunk, dim - b));
    } else {
      int64_t sum = 0;
      for (int64_t i = 0; i < sp.numel(); ++i) {
        const int64_t l = load_as_int64(sp.dtype(), sp.raw(), i);
        if (l < 0) return ctx.fail("split has a negative length " + std::to_string(l));
        lengths.push_back(l);
        sum += l;
      }
      if (sum != dim) return ctx.fail("split lengths sum to " + std::to_string(sum) + ", axis extent is " + std::to_string(dim));
    }
  } else {
    lengths.assign(static_cast<size_t>(dim), 1);
    squeeze = ctx.attr_int("keepdims", 1) == 0;
  }
  std::vector<Tensor> items;
  int64_t begin = 0;
  for (int64_t l : lengths) {
    Tensor piece = slice_axis(x, ax, begin, l, eb);
    if (squeeze) {
      Shape s = piece.shape();
      s.erase(s.begin() + ax);
      piece = piece.reshaped(s);
    }
    items.push_back(std::move(piece));
    begin += l;
  }
  ctx.set_output(0, Tensor::sequence(x.dtype(), std::move(items)));
  return Status::Ok();
}

// Operator ConcatFromSequence, since version 11: concatenates the elements along `axis`
// (in [-r, r-1]), or with new_axis=1 stacks them along a new `axis` (in [-r-1, r]).
Status concat_from_sequence(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  const auto& items = ctx.in(0).items();
  if (!ctx.has_attr("axis")) return ctx.fail("missing required attribute 'axis'");
  if (items.empty()) return ctx.fail("cannot concatenate an empty sequence");
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const Tensor& first = items[0];
  const int r = first.rank();
  const int out_rank = new_axis ? r + 1 : r;
  int64_t axis = ctx.attr_int("axis", 0);
  if (out_rank == 0 || axis < -out_rank || axis >= out_rank)
    return ctx.fail("axis " + std::to_string(axis) + " is out of range for element rank " + std::to_string(r) +
                    (new_axis ? " with new_axis" : ""));
  if (axis < 0) axis += out_rank;
  const int ax = static_cast<int>(axis);
  const size_t eb = elem_bytes(first.dtype());
  if (!eb) return ctx.unsupported_here(std::string("dtype ") + dtype_name(first.dtype()));
  // View every element as [outer, len_k, inner] with len_k = 1 for stacking.
  std::vector<Tensor> parts;
  int64_t total = 0;
  for (size_t k = 0; k < items.size(); ++k) {
    const Tensor& t = items[k];
    if (t.dtype() != first.dtype() || t.rank() != r)
      return ctx.fail("element " + std::to_string(k) + " (" + dtype_name(t.dtype()) + " " + shape_str(t.shape()) +
                      ") does not match element 0 (" + dtype_name(first.dtype()) + " " + shape_str(first.shape()) + ")");
    bool same = true;
    for (int d = 0; d < r; ++d) same = same && (t.dim(d) == first.dim(d) || (!new_axis && d == ax));
    if (!same)
      return ctx.fail("element " + std::to_string(k) + " has shape " + shape_str(t.shape()) + ", element 0 has " +
                      shape_str(first.shape()) + (new_axis ? "" : " (only the axis extent may differ)"));
    Shape s = t.shape();
    if (new_axis) s.insert(s.begin() + ax, 1);
    total += s[ax];
    parts.push_back(t.reshaped(s));
  }
  Shape os = parts[0].shape();
  os[ax] = total;
  Tensor out(first.dtype(), os);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < ax; ++d) outer *= os[d];
  for (int d = ax + 1; d < out_rank; ++d) inner *= os[d];
  auto* dst = static_cast<uint8_t*>(out.raw());
  int64_t offset = 0;
  for (const Tensor& p : parts) {
    const int64_t len = p.dim(ax);
    const size_t row = static_cast<size_t>(len * inner) * eb;
    const auto* src = static_cast<const uint8_t*>(p.raw());
    for (int64_t o = 0; o < outer; ++o)
      if (row) std::memcpy(dst + static_cast<size_t>((o * total + offset) * inner) * eb, src + o * row, row);
    offset += len;
  }
  ctx.set_output(0, out);
  return Status::Ok();
}

// Operator SequenceMap, since version 17: runs `body` once per element of input 0; every
// other input is a sequence of the same length (its i-th element is passed) or a tensor
// (passed as is). Output j collects the body's j-th output over the iterations.
Status sequence_map(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(require_sequence(ctx, 0));
  auto it = ctx.node().attrs.find("body");
  if (it == ctx.node().attrs.end() || it->second.kind != ir::Attribute::Kind::kGraph) return ctx.fail("missing graph attribute 'body'");
  const ir::Graph& body = *it->second.g;
  if (static_cast<int>(body.inputs.size()) != ctx.num_inputs() || static_cast<int>(body.outputs.size()) != ctx.num_outputs())
    return ctx.fail("body signature (" + std::to_string(body.inputs.size()) + " inputs, " + std::to_string(body.outputs.size()) +
                    " outputs) does not match the node");
  const size_t n = ctx.in(0).items().size();
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.fail("input " + std::to_string(i) + " is missing");
    if (ctx.in(i).is_none()) return ctx.fail("input " + std::to_string(i) + " is an empty optional");
    if (ctx.in(i).is_sequence() && ctx.in(i).items().size() != n)
      return ctx.fail("input " + std::to_string(i) + " has " + std::to_string(ctx.in(i).items().size()) +
                      " elements, input 0 has " + std::to_string(n));
  }
  std::vector<std::vector<Tensor>> outs(static_cast<size_t>(ctx.num_outputs()));
  for (size_t k = 0; k < n; ++k) {
    std::vector<Tensor> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.in(i).is_sequence() ? ctx.in(i).items()[k] : ctx.in(i));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> res, ctx.run_subgraph(body, in));
    for (size_t j = 0; j < outs.size(); ++j) {
      if (!res[j].is_tensor()) return ctx.fail("body output " + std::to_string(j) + " must be a tensor, got " + kind_name(res[j]));
      outs[j].push_back(std::move(res[j]));
    }
  }
  for (size_t j = 0; j < outs.size(); ++j) {
    if (!ctx.output_wanted(static_cast<int>(j))) continue;
    DataType dt = outs[j].empty() ? body.value(body.outputs[j]).dtype : outs[j][0].dtype();
    if (dt == DataType::kUndefined) dt = DataType::kFloat32;
    ctx.set_output(static_cast<int>(j), Tensor::sequence(dt, std::move(outs[j])));
  }
  return Status::Ok();
}

// Operator Optional, since version 15: wraps the input, or makes an empty optional of the
// `type` attribute. A non-empty optional is represented by its value itself.
Status optional_op(KernelContext& ctx) {
  if (ctx.has_input(0)) {
    if (ctx.in(0).is_none()) return ctx.fail("input is already an optional");
    ctx.set_output(0, ctx.in(0));
    return Status::Ok();
  }
  auto it = ctx.node().attrs.find("type");
  if (it == ctx.node().attrs.end() || it->second.kind != ir::Attribute::Kind::kType)
    return ctx.fail("an Optional without input needs the 'type' attribute");
  ctx.set_output(0, Tensor::none(it->second.type_dtype));
  return Status::Ok();
}

// Operator OptionalHasElement, since version 15 (18: the input may be omitted, or a plain
// tensor/sequence): true unless the input is empty or absent.
Status optional_has_element(KernelContext& ctx) {
  const bool has = ctx.has_input(0) && !ctx.in(0).is_none();
  ctx.set_output(0, Tensor::scalar<uint8_t>(DataType::kBool, has ? 1 : 0));
  return Status::Ok();
}

// Operator OptionalGetElement, since version 15 (18: passes plain tensors/sequences through):
// the optional's value; an empty optional is an error.
Status optional_get_element(KernelContext& ctx) {
  KILN_RETURN_IF_ERROR(ctx.require_inputs(1));
  if (ctx.in(0).is_none()) return ctx.fail("the optional input is empty");
  ctx.set_output(0, ctx.in(0));
  return Status::Ok();
}

}  // namespace

void register_sequence_kernels(KernelRegistry& r) {
  r.add(ir::OpKind::kSequenceEmpty, sequence_empty);
  r.add(ir::OpKind::kSequenceConstruct, sequence_construct);
  r.add(ir::OpKind::kSequenceAt, sequence_at);
  r.add(ir::OpKind::kSequenceInsert, sequence_insert);
  r.add(ir::OpKind::kSequenceErase, sequence_erase);
  r.add(ir::OpKind::kSequenceLength, sequence_length);
  r.add(ir::OpKind::kSplitToSequence, split_to_sequence);
  r.add(ir::OpKind::kConcatFromSequence, concat_from_sequence);
  r.add(ir::OpKind::kSequenceMap, sequence_map);
  r.add(ir::OpKind::kOptional, optional_op);
  r.add(ir::OpKind::kOptionalHasElement, optional_has_element);
  r.add(ir::OpKind::kOptionalGetElement, optional_get_element);
  register_sequence_tfidf_kernels(r);
}

}  // namespace kiln::cpu
