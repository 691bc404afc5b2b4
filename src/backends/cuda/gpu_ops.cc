// The CUDA path's transformer / data-movement ops: build-time planning of each node (attributes
// and constant inputs -> kernel descriptors, following the ONNX operator sections and the CPU
// reference kernels) and the layers that enqueue the kernels of kernels_more.cu or cuBLASLt.
#include "backends/cuda/gpu_ops.h"

#include <algorithm>
#include <functional>

#include "backends/cpu/interpreter.h"
#include "backends/cuda/cuda_check.h"
#include "core/numerics.h"
#include "ir/constant_folding.h"

namespace kiln::cuda {
namespace {

Status node_error(const ir::Node& n, const std::string& what) { return unsupported(n.describe() + ": " + what); }

// Integer values of a constant input (absent: `present` false). Non-constant: an error.
StatusOr<std::vector<int64_t>> const_ints(const ir::Node& n, const ir::Graph& g, size_t k, const char* what,
                                          bool* present) {
  *present = false;
  if (k >= n.inputs.size() || n.inputs[k] == ir::kNoValue) return std::vector<int64_t>{};
  const auto& c = g.value(n.inputs[k]).constant;
  if (!c) return node_error(n, std::string(what) + " must be a constant on the GPU path");
  *present = true;
  std::vector<int64_t> v(static_cast<size_t>(c->numel()));
  for (int64_t i = 0; i < c->numel(); ++i) v[i] = static_cast<int64_t>(load_as_double(c->dtype(), c->raw(), i));
  return v;
}

StatusOr<int> norm_axis(const ir::Node& n, int64_t a, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) return invalid_argument(n.describe() + ": axis " + std::to_string(a) + " out of range for rank " + std::to_string(r));
  return static_cast<int>(a < 0 ? a + r : a);
}

StatusOr<StridedDesc> desc_of(const ir::Node& n, const Shape& out) {
  if (out.size() > static_cast<size_t>(kMaxRank)) return node_error(n, "rank above " + std::to_string(kMaxRank));
  StridedDesc d;
  d.rank = static_cast<int>(out.size());
  for (int k = 0; k < d.rank; ++k) d.out_dims[k] = out[k];
  if (d.rank == 0) {  // a scalar: one element
    d.rank = 1;
    d.out_dims[0] = 1;
    d.src_strides[0] = 0;
  }
  return d;
}

}  // namespace

int64_t dims_product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

std::vector<int64_t> row_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int i = static_cast<int>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

StatusOr<StorageType> input_storage(const std::string& name, DataType dt) {
  switch (dt) {
    case DataType::kInt64: return StorageType::kI64;
    case DataType::kInt32: return StorageType::kI32;
    case DataType::kBool: return StorageType::kBool;
    case DataType::kFloat64: return StorageType::kF64;
    case DataType::kUInt64: return StorageType::kU64;
    case DataType::kFloat16: return StorageType::kF16;
    case DataType::kBFloat16: return StorageType::kBF16;
    case DataType::kFloat32: case DataType::kUndefined: return StorageType::kF32;
    default: break;
  }
  return unsupported("graph input '" + name + "' has dtype " + dtype_name(dt) +
                     ": CUDA engines take float32, float64, float16, bfloat16, int32, int64, uint64 or bool inputs in this version");
}

DataType storage_host_dtype(StorageType t) {
  switch (t) {
    case StorageType::kI64: return DataType::kInt64;
    case StorageType::kI32: return DataType::kInt32;
    case StorageType::kBool: return DataType::kBool;
    case StorageType::kI8: return DataType::kInt8;
    case StorageType::kF8E4M3: return DataType::kFloat8E4M3FN;
    case StorageType::kF64: return DataType::kFloat64;
    case StorageType::kU64: return DataType::kUInt64;
    case StorageType::kF16: return DataType::kFloat16;
    case StorageType::kBF16: return DataType::kBFloat16;
    case StorageType::kF32: break;
  }
  return DataType::kFloat32;
}

StorageType float_io_storage(DataType dt) {
  if (dt == DataType::kFloat16) return StorageType::kF16;
  if (dt == DataType::kBFloat16) return StorageType::kBF16;
  return StorageType::kF32;
}

bool exact_storage(DataType dt, StorageType* t) {
  switch (dt) {
    case DataType::kInt64: *t = StorageType::kI64; return true;
    case DataType::kInt32: *t = StorageType::kI32; return true;
    case DataType::kBool: *t = StorageType::kBool; return true;
    case DataType::kFloat64: *t = StorageType::kF64; return true;  // docs/decisions/0075
    case DataType::kUInt64: *t = StorageType::kU64; return true;   // docs/decisions/0075
    default: return false;
  }
}

bool is_int_view(ir::OpKind op) {
  return op == ir::OpKind::kReshape || op == ir::OpKind::kFlatten || op == ir::OpKind::kSqueeze ||
         op == ir::OpKind::kUnsqueeze || op == ir::OpKind::kIdentity || op == ir::OpKind::kDropout;
}

Status check_int_operands(const ir::Node& n, const std::vector<bool>& is_int) {
  using ir::OpKind;
  for (size_t k = 0; k < is_int.size(); ++k) {
    if (!is_int[k]) continue;
    const bool ok = (k == 0 && (n.op == OpKind::kCast || n.op == OpKind::kCastLike || n.op == OpKind::kWhere ||
                                 n.op == OpKind::kEyeLike || n.op == OpKind::kConstantOfShape)) ||
                    (k == 1 && (n.op == OpKind::kGather || n.op == OpKind::kGatherND ||
                                 n.op == OpKind::kGatherElements || n.op == OpKind::kTrilu ||
                                 n.op == OpKind::kScatterElements || n.op == OpKind::kScatter ||
                                 n.op == OpKind::kScatterND || n.op == OpKind::kReverseSequence ||
                                 n.op == OpKind::kTopK || n.op == OpKind::kCompress || n.op == OpKind::kOneHot ||
                                 n.op == OpKind::kMaxUnpool ||
                                 n.op == OpKind::kNegativeLogLikelihoodLoss || n.op == OpKind::kPow ||
                                 n.op == OpKind::kSoftmaxCrossEntropyLoss)) ||
                    (k == 3 && n.op == OpKind::kAttention) || (k >= 3 && n.op == OpKind::kPagedAttention) ||
                    (k == 1 && n.op == OpKind::kRope) || (k == 0 && n.op == OpKind::kOneHot) ||
                    (k == 2 && n.op == OpKind::kRoiAlign) ||
                    ((k == 0 || k == 2) && n.op == OpKind::kDequantizeLinear) ||
                    (k == 0 && n.op == OpKind::kTfIdfVectorizer) ||
                    (k == 4 && (n.op == OpKind::kRNN || n.op == OpKind::kGRU || n.op == OpKind::kLSTM)) ||
                    n.op == OpKind::kRange;
    if (!ok)
      return node_error(n, "input " + std::to_string(k) + " is an integer, bool or float64 activation; a layer with "
                           "a float32 / float16 output takes one only as Cast's, CastLike's or Where's input 0, EyeLike's input (its "
                           "shape), ConstantOfShape's shape, the indices of Gather, GatherND, GatherElements and "
                           "the scatters and MaxUnpool, ReverseSequence's lengths, TopK's K, Compress's condition, "
                           "OneHot's indices and depth, Trilu's k, Pow's exponent, the targets of NegativeLogLikelihoodLoss "
                           "and SoftmaxCrossEntropyLoss, DequantizeLinear's x and zero point, TfIdfVectorizer's tokens, Range's operands, Attention's mask, PagedAttention's "
                           "positions, token_seq, block_table and kv_pools, Rope's positions, RoiAlign's "
                           "batch_indices, or the sequence_lens of RNN, GRU and LSTM");
  }
  return Status::Ok();
}

Status fold_shape_computations(ir::Graph& g, const ValueShapes& vs) {
  bool any = false;
  for (ir::Node& n : g.nodes) {
    if (n.removed || (n.op != ir::OpKind::kShape && n.op != ir::OpKind::kSize)) continue;
    if (n.inputs.empty() || n.outputs.empty() || n.outputs[0] == ir::kNoValue) continue;
    const ir::ValueId in = n.inputs[0];
    if (in == ir::kNoValue || static_cast<size_t>(in) >= vs.shapes.size()) continue;
    const Shape& s = vs.shapes[in];
    std::vector<int64_t> dims;
    if (n.op == ir::OpKind::kSize) {
      dims.push_back(shape_numel(s));
    } else {  // opset 15: start/end (negative counts from the back, clamped)
      const int64_t r = static_cast<int64_t>(s.size());
      int64_t start = n.attr_int("start", 0), end = n.attr_int("end", r);
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, 0, r);
      for (int64_t i = start; i < end; ++i) dims.push_back(s[i]);
    }
    const Shape out_shape = n.op == ir::OpKind::kSize ? Shape{} : Shape{static_cast<int64_t>(dims.size())};
    auto t = std::make_shared<Tensor>(DataType::kInt64, out_shape);
    for (size_t i = 0; i < dims.size(); ++i) t->data<int64_t>()[i] = dims[i];
    ir::Value& val = g.value(n.outputs[0]);
    val.constant = t;
    val.dtype = DataType::kInt64;
    ir::SymShape sym;
    for (int64_t d : out_shape) sym.push_back(ir::Dim::known(d));
    val.shape = sym;
    val.producer = -1;
    n.removed = true;
    any = true;
  }
  if (!any) return Status::Ok();
  // Visits nodes in order; the graph is topologically sorted.
  ir::fold_constant_nodes(g, reference_evaluator());
  return Status::Ok();
}

// ------------------------------------------------------------------ planning
StatusOr<StridedDesc> plan_transpose(const ir::Node& n, const Shape& in) {
  const size_t r = in.size();
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (perm.empty())
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  if (perm.size() != r) return invalid_argument(n.describe() + ": perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  Shape out(r);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < r; ++i) {
    KILN_ASSIGN_OR_RETURN(int p, norm_axis(n, perm[i], r));
    if (seen[p]) return invalid_argument(n.describe() + ": perm repeats axis " + std::to_string(p));
    seen[p] = true;
    perm[i] = p;
    out[i] = in[p];
  }
  KILN_ASSIGN_OR_RETURN(StridedDesc d, desc_of(n, out));
  const auto st = row_strides(in);
  for (size_t i = 0; i < r; ++i) d.src_strides[i] = st[perm[i]];
  return d;
}

StatusOr<StridedDesc> plan_slice(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out) {
  const size_t r = in.size();
  if (out.size() != r) return invalid_argument(n.describe() + ": output rank differs from the input's");
  std::vector<int64_t> starts, axes, steps;
  if (n.opset < 10) {
    starts = n.attr_ints("starts");
    axes = n.attr_ints("axes");
  } else {
    bool have = false;
    KILN_ASSIGN_OR_RETURN(starts, const_ints(n, g, 1, "starts", &have));
    if (!have) return invalid_argument(n.describe() + ": starts is required");
    KILN_ASSIGN_OR_RETURN(axes, const_ints(n, g, 3, "axes", &have));
    KILN_ASSIGN_OR_RETURN(steps, const_ints(n, g, 4, "steps", &have));
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return invalid_argument(n.describe() + ": starts, axes and steps differ in length");
  KILN_ASSIGN_OR_RETURN(StridedDesc d, desc_of(n, out));
  const auto st = row_strides(in);
  for (size_t i = 0; i < r; ++i) d.src_strides[i] = st[i];
  for (size_t i = 0; i < starts.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int a, norm_axis(n, axes[i], r));
    const int64_t dim = in[a], step = steps[i];
    if (step == 0) return invalid_argument(n.describe() + ": step 0");
    int64_t s = starts[i];
    if (s < 0) s += dim;
    s = step > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, std::max<int64_t>(dim - 1, 0));
    if (out[a] > 0 && (s + (out[a] - 1) * step < 0 || s + (out[a] - 1) * step >= dim))
      return internal_error(n.describe() + ": slice of axis " + std::to_string(a) + " leaves the input");
    d.src_offset += s * st[a];
    d.src_strides[a] = step * st[a];
  }
  return d;
}

StatusOr<StridedDesc> plan_expand(const ir::Node& n, const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return invalid_argument(n.describe() + ": input rank above the output's");
  KILN_ASSIGN_OR_RETURN(StridedDesc d, desc_of(n, out));
  const size_t lead = out.size() - in.size();
  const auto st = row_strides(in);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i < lead) {
      d.src_strides[i] = 0;
      continue;
    }
    const int64_t dim = in[i - lead];
    if (dim != out[i] && dim != 1) return invalid_argument(n.describe() + ": cannot broadcast " + shape_str(in) + " to " + shape_str(out));
    d.src_strides[i] = dim == 1 ? 0 : st[i - lead];
  }
  return d;
}

StatusOr<std::vector<StridedDesc>> plan_split(const ir::Node& n, const Shape& in, const std::vector<Shape>& outs) {
  KILN_ASSIGN_OR_RETURN(int axis, norm_axis(n, n.attr_int("axis", 0), in.size()));
  const auto st = row_strides(in);
  std::vector<StridedDesc> r;
  int64_t begin = 0;
  for (const Shape& o : outs) {
    if (o.size() != in.size()) return invalid_argument(n.describe() + ": output rank differs from the input's");
    KILN_ASSIGN_OR_RETURN(StridedDesc d, desc_of(n, o));
    for (size_t i = 0; i < in.size(); ++i) d.src_strides[i] = st[i];
    d.src_offset = begin * st[axis];
    begin += o[axis];
    r.push_back(d);
  }
  if (begin != in[axis]) return invalid_argument(n.describe() + ": split sizes do not add up to the axis length");
  return r;
}

namespace {

// Reduced axes that do not form one run: a copy with the kept axes first and the reduced ones
// last (each group in its order), then the reduction over the last run (inner == 1).
StatusOr<ReducePlan> plan_transposed_reduce(const ir::Node& n, const Shape& in, const std::vector<bool>& mask,
                                            ReducePlan p) {
  Shape perm_shape;
  std::vector<size_t> perm;
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < in.size(); ++i)
      if (mask[i] == (pass == 1)) {
        perm.push_back(i);
        perm_shape.push_back(in[i]);
      }
  KILN_ASSIGN_OR_RETURN(StridedDesc d, desc_of(n, perm_shape));
  const auto st = row_strides(in);
  for (size_t k = 0; k < perm.size(); ++k) d.src_strides[k] = st[perm[k]];
  size_t kept = 0;
  for (bool m : mask) kept += m ? 0 : 1;
  p.transposed = true;
  p.transpose = d;
  p.outer = dims_product(perm_shape, 0, kept);
  p.red = dims_product(perm_shape, kept, perm_shape.size());
  p.inner = 1;
  return p;
}

}  // namespace

StatusOr<ReducePlan> plan_reduce(const ir::Node& n, const ir::Graph& g, const Shape& in) {
  ReducePlan p;
  switch (n.op) {
    case ir::OpKind::kReduceSum: p.kind = ReduceKind::kSum; break;
    case ir::OpKind::kReduceMean: p.kind = ReduceKind::kMean; break;
    case ir::OpKind::kReduceMax: p.kind = ReduceKind::kMax; break;
    case ir::OpKind::kReduceMin: p.kind = ReduceKind::kMin; break;
    case ir::OpKind::kReduceProd: p.kind = ReduceKind::kProd; break;
    case ir::OpKind::kReduceL1: p.kind = ReduceKind::kL1; break;
    case ir::OpKind::kReduceL2: p.kind = ReduceKind::kL2; break;
    case ir::OpKind::kReduceSumSquare: p.kind = ReduceKind::kSumSquare; break;
    case ir::OpKind::kReduceLogSum: p.kind = ReduceKind::kLogSum; break;
    case ir::OpKind::kReduceLogSumExp: p.kind = ReduceKind::kLogSumExp; break;
    default: return node_error(n, "no CUDA reduction for this op");
  }
  bool have = false;
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> axes, const_ints(n, g, 1, "axes", &have));
  if (!have) axes = n.attr_ints("axes");
  std::vector<bool> mask(in.size(), false);
  if (axes.empty()) {
    // noop_with_empty_axes: nothing reduced, each output folds its one element (L1 is |x|,
    // LogSum log x, ... as the CPU reference computes them).
    if (n.attr_int("noop_with_empty_axes", 0) != 0) {
      p.outer = dims_product(in, 0, in.size());
      return p;
    }
    mask.assign(in.size(), true);
  }
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int k, norm_axis(n, a, in.size()));
    mask[k] = true;
  }
  // The reduced axes of size > 1 must form one contiguous run [lo, hi].
  int lo = -1, hi = -1;
  for (size_t i = 0; i < in.size(); ++i)
    if (mask[i] && in[i] != 1) {
      if (lo < 0) lo = static_cast<int>(i);
      else if (hi != static_cast<int>(i) - 1) {
        for (int j = hi + 1; j < static_cast<int>(i); ++j)
          if (in[j] != 1) return plan_transposed_reduce(n, in, mask, p);
      }
      hi = static_cast<int>(i);
    }
  if (lo < 0) {  // nothing of size > 1 reduced: a copy (mean of one element is the element)
    p.outer = dims_product(in, 0, in.size());
    return p;
  }
  p.outer = dims_product(in, 0, lo);
  p.red = dims_product(in, lo, hi + 1);
  p.inner = dims_product(in, hi + 1, in.size());
  return p;
}

StatusOr<GatherPlan> plan_gather(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& indices,
                                 DataType indices_dtype) {
  GatherPlan p;
  KILN_ASSIGN_OR_RETURN(int axis, norm_axis(n, n.attr_int("axis", 0), in.size()));
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(n.describe() + ": indices are required");
  p.axis_dim = in[axis];
  p.outer = dims_product(in, 0, axis);
  p.inner = dims_product(in, axis + 1, in.size());
  p.count = shape_numel(indices);
  if (!g.value(n.inputs[1]).constant) {
    if (indices_dtype != DataType::kInt64 && indices_dtype != DataType::kInt32)
      return node_error(n, std::string("indices of dtype ") + dtype_name(indices_dtype) + " (int32 or int64 expected)");
    p.runtime = true;
    p.indices_64 = indices_dtype == DataType::kInt64;
    return p;
  }
  bool have = false;
  KILN_ASSIGN_OR_RETURN(p.indices, const_ints(n, g, 1, "indices", &have));
  p.count = static_cast<int64_t>(p.indices.size());
  for (int64_t& i : p.indices) {
    if (i < -p.axis_dim || i >= p.axis_dim)
      return invalid_argument(n.describe() + ": index " + std::to_string(i) + " out of range for a dim of " + std::to_string(p.axis_dim));
    if (i < 0) i += p.axis_dim;
  }
  return p;
}

StatusOr<PadPlan> plan_pad(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out) {
  PadPlan p;
  const size_t r = in.size();
  if (r > static_cast<size_t>(kMaxRank) || out.size() != r) return node_error(n, "rank above " + std::to_string(kMaxRank));
  const std::string mode = n.attr_string("mode", "constant");
  if (mode == "constant") p.mode = PadMode::kConstant;
  else if (mode == "reflect") p.mode = PadMode::kReflect;
  else if (mode == "edge") p.mode = PadMode::kEdge;
  else return node_error(n, "pad mode '" + mode + "'");
  std::vector<int64_t> pads, axes;
  if (n.opset < 11) {
    pads = n.attr_ints("pads");
    p.value = n.attr_float("value", 0.f);
  } else {
    bool have = false;
    KILN_ASSIGN_OR_RETURN(pads, const_ints(n, g, 1, "pads", &have));
    if (n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
      const auto& c = g.value(n.inputs[2]).constant;
      if (!c) return node_error(n, "constant_value must be a constant on the GPU path");
      if (c->numel() > 0) p.value = static_cast<float>(load_as_double(c->dtype(), c->raw(), 0));
    }
    KILN_ASSIGN_OR_RETURN(axes, const_ints(n, g, 3, "axes", &have));
  }
  if (axes.empty())
    for (size_t i = 0; i < r; ++i) axes.push_back(static_cast<int64_t>(i));
  if (pads.size() != 2 * axes.size()) return invalid_argument(n.describe() + ": pads has the wrong number of entries");
  p.desc.rank = static_cast<int>(r);
  for (size_t i = 0; i < r; ++i) {
    p.desc.in_dims[i] = in[i];
    p.desc.out_dims[i] = out[i];
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    KILN_ASSIGN_OR_RETURN(int a, norm_axis(n, axes[i], r));
    p.desc.begin[a] = pads[i];
    if (in[a] + pads[i] + pads[i + axes.size()] != out[a]) return internal_error(n.describe() + ": pads disagree with the output shape");
    if (p.mode == PadMode::kReflect && (pads[i] >= in[a] || pads[i + axes.size()] >= in[a]) && in[a] > 1)
      return node_error(n, "reflect padding wider than the axis");
  }
  if (r == 0) {
    p.desc.rank = 1;
    p.desc.in_dims[0] = p.desc.out_dims[0] = 1;
  }
  return p;
}

StatusOr<ResizeDesc> plan_resize(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out) {
  if (n.opset < 11) return node_error(n, "Resize before opset 11");
  if (in.size() != 4 || out.size() != 4) return node_error(n, "only 4-D Resize");
  if (in[0] != out[0] || in[1] != out[1]) return node_error(n, "resizing N or C");
  if (n.opset >= 18 && (n.attr_int("antialias", 0) != 0 || n.has_attr("axes") ||
                        n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch"))
    return node_error(n, "antialias, axes or keep_aspect_ratio_policy");
  if (n.attr_int("exclude_outside", 0) != 0) return node_error(n, "exclude_outside");
  ResizeDesc d;
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode == "linear") d.linear = true;
  else if (mode != "nearest") return node_error(n, "Resize mode '" + mode + "'");
  const std::string c = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (c == "half_pixel") d.coord = 0;
  else if (c == "asymmetric") d.coord = 1;
  else if (c == "pytorch_half_pixel") d.coord = 2;
  else if (c == "align_corners") d.coord = 3;
  else if (c == "tf_half_pixel_for_nn") d.coord = 4;
  else return node_error(n, "coordinate_transformation_mode '" + c + "'");
  const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") d.nearest = 0;
  else if (nm == "round_prefer_ceil") d.nearest = 1;
  else if (nm == "floor") d.nearest = 2;
  else if (nm == "ceil") d.nearest = 3;
  else return node_error(n, "nearest_mode '" + nm + "'");
  d.nc = in[0] * in[1];
  d.ih = in[2];
  d.iw = in[3];
  d.oh = out[2];
  d.ow = out[3];
  // Scales (input 2) when given, else sizes: scale = out / in and length_resized = out.
  const ir::ValueId sv = n.inputs.size() > 2 ? n.inputs[2] : ir::kNoValue;
  const auto* sc = sv != ir::kNoValue && g.value(sv).constant && g.value(sv).constant->numel() > 0
                       ? g.value(sv).constant.get() : nullptr;
  if (sv != ir::kNoValue && !g.value(sv).constant) return node_error(n, "scales must be a constant on the GPU path");
  if (sc) {
    if (sc->numel() != 4) return invalid_argument(n.describe() + ": scales must have 4 entries");
    d.scale_h = load_as_double(sc->dtype(), sc->raw(), 2);
    d.scale_w = load_as_double(sc->dtype(), sc->raw(), 3);
    if (!(d.scale_h > 0) || !(d.scale_w > 0)) return invalid_argument(n.describe() + ": scales must be positive");
    d.len_h = static_cast<double>(in[2]) * d.scale_h;
    d.len_w = static_cast<double>(in[3]) * d.scale_w;
  } else {
    d.scale_h = static_cast<double>(out[2]) / static_cast<double>(std::max<int64_t>(in[2], 1));
    d.scale_w = static_cast<double>(out[3]) / static_cast<double>(std::max<int64_t>(in[3], 1));
    d.len_h = static_cast<double>(out[2]);
    d.len_w = static_cast<double>(out[3]);
  }
  return d;
}

StatusOr<BatchedMatMulParams> plan_batched_matmul(const ir::Node& n, const Shape& a, const Shape& b, const Shape& y) {
  if (a.size() < 2 || b.size() < 2) return node_error(n, "MatMul with a 1-D operand");
  BatchedMatMulParams p;
  p.m = a[a.size() - 2];
  p.k = a.back();
  p.n = b.back();
  if (b[b.size() - 2] != p.k)
    return invalid_argument(n.describe() + ": inner dims differ: " + shape_str(a) + " x " + shape_str(b));
  const int64_t ba = dims_product(a, 0, a.size() - 2), bb = dims_product(b, 0, b.size() - 2);
  const int64_t by = dims_product(y, 0, y.size() - 2);
  if (bb == 1) {  // B shared: fold A's batch into M
    p.m *= ba;
    return p;
  }
  if (ba == 1) {
    p.batch = bb;
    p.a_shared = true;
    return p;
  }
  // Equal batches: after left-padding with ones, every batch dim must agree.
  const size_t r = std::max(a.size(), b.size());
  for (size_t i = 0; i + 2 < r; ++i) {
    const int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
    if (da != db) return node_error(n, "batch broadcasting " + shape_str(a) + " x " + shape_str(b));
  }
  if (ba != by) return internal_error(n.describe() + ": batch size disagrees with the output shape");
  p.batch = ba;
  return p;
}

// ------------------------------------------------------------------ layers
namespace {

// A layer whose enqueue is one launcher call (the launch closure captures its descriptor).
class KernelLayer : public Layer {
 public:
  using Launch = KernelLaunch;
  KernelLayer(const std::string& op_name, const std::string& tactic_name, Launch launch) : launch_(std::move(launch)) {
    op = op_name;
    tactic = tactic_name;
  }
  Status enqueue(ExecState& s) override {
    KILN_CUDA_CHECK(launch_(s, *this));
    return Status::Ok();
  }

 private:
  Launch launch_;
};

// cuBLASLt strided-batched matmul. Row-major Y[M,N] = A[M,K] B[K,N] is column-major
// Y^T[N,M] = B^T[N,K] A^T[K,M]: cuBLASLt's A operand is B (ld N), its B operand is A (ld K).
class BatchedMatMulLayer : public Layer {
 public:
  ~BatchedMatMulLayer() override {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (la_) cublasLtMatrixLayoutDestroy(la_);
    if (lb_) cublasLtMatrixLayoutDestroy(lb_);
    if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  }
  Status init(const BatchedMatMulParams& p, StorageType storage, bool tf32) {
    p_ = p;
    t_ = storage;
    const cudaDataType_t dt =
        storage == StorageType::kF16 ? CUDA_R_16F : (storage == StorageType::kBF16 ? CUDA_R_16BF : CUDA_R_32F);
    // fp16/bf16 storage accumulates in fp32; TF32 only applies to fp32 storage.
    const cublasComputeType_t ct =
        storage == StorageType::kF32 && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, ct, CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof t));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, dt, p.n, p.k, p.n));  // B data
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, dt, p.k, p.m, p.k));  // A data
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc_, dt, p.n, p.m, p.n));
    calls_ = p.a_shared ? p.batch : 1;
    const int32_t count = p.a_shared ? 1 : static_cast<int32_t>(p.batch);
    if (count > 1) {
      const int64_t sa = p.k * p.n, sb = p.m * p.k, sc = p.m * p.n;  // elements
      for (auto [l, s] : {std::pair{la_, sa}, std::pair{lb_, sb}, std::pair{lc_, sc}}) {
        KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &s, sizeof s));
      }
    }
    op = "MatMul";
    describe();
    return Status::Ok();
  }
  size_t workspace() const override { return kWorkspace; }

  // One tactic (cuBLASLt's first heuristic choice for each matmul, within the workspace).
  Status select(TacticId id, ExecState& s) override {
    KILN_RETURN_IF_ERROR(Layer::select(id, s));
    return pick(s);
  }

  Status enqueue(ExecState& s) override {
    const float alpha = 1.f, beta = 0.f;
    const size_t es = static_cast<size_t>(storage_bytes(t_));
    const char* a = static_cast<const char*>(s.ptr(ins[0]));
    const char* b = static_cast<const char*>(s.ptr(ins[1]));
    char* y = static_cast<char*>(s.ptr(outs[0]));
    for (int64_t i = 0; i < calls_; ++i) {
      const char* bi = b + static_cast<size_t>(i * p_.k * p_.n) * es;
      char* yi = y + static_cast<size_t>(i * p_.m * p_.n) * es;
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &alpha, bi, la_, a, lb_, &beta, yi, lc_, yi, lc_,
                                       has_algo_ ? &algo_ : nullptr, s.workspace, std::min(s.workspace_bytes, kWorkspace),
                                       s.stream));
    }
    return Status::Ok();
  }

 protected:
  TacticId single_id() const override { return make_tactic_id(TacticSource::kCublasLt, 0); }

 private:
  static constexpr size_t kWorkspace = 32u << 20;  // bytes
  // cuBLASLt's first heuristic choice (deterministic for one library version and GPU).
  Status pick(ExecState& s) {
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = std::min(s.workspace_bytes, kWorkspace);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    // Matrices after the first start at multiples of their size in bytes (batch strides or the
    // per-call offsets): tell the heuristic so it picks no algorithm that needs more alignment.
    const int64_t es = storage_bytes(t_);
    const uint32_t al_a = alignment(p_.k * p_.n * es), al_b = alignment(p_.m * p_.k * es), al_c = alignment(p_.m * p_.n * es);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c);
    cublasLtMatmulHeuristicResult_t res[1];
    int returned = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc_, la_, lb_, lc_, lc_, pref, 1, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    if (returned == 0) return internal_error("layer '" + name + "': cuBLASLt found no algorithm");
    algo_ = res[0].algo;
    has_algo_ = true;
    describe();
    return Status::Ok();
  }
  // Largest power of two (<= 256, the arena's alignment) dividing `bytes`.
  static uint32_t alignment(int64_t bytes) {
    uint32_t a = 256;
    while (a > 1 && bytes % a != 0) a >>= 1;
    return a;
  }
  void describe() {
    tactic = std::string("cublaslt.batched_matmul") + (has_algo_ ? " heuristic#0 " : " ") + storage_name(t_) +
             " batch=" + std::to_string(p_.batch) + (p_.a_shared ? " a_shared" : "");
  }
  BatchedMatMulParams p_{};
  StorageType t_ = StorageType::kF32;
  int64_t calls_ = 1;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool has_algo_ = false;
};

}  // namespace

std::unique_ptr<Layer> make_strided_copy_layer(const std::string& op, const StridedDesc& d, int elem_bytes) {
  return std::make_unique<KernelLayer>(op, "kiln.strided_copy " + std::to_string(elem_bytes * 8) + "bit",
                                       [d, elem_bytes](ExecState& s, const Layer& l) {
                                         return launch_strided_copy(s.ptr(l.ins[0]), s.ptr(l.outs[0]), elem_bytes, d, s.stream);
                                       });
}

std::unique_ptr<Layer> make_layernorm_layer(int64_t rows, int64_t cols, float eps, StorageType t) {
  return std::make_unique<KernelLayer>("LayerNormalization", std::string("kiln.layernorm ") + storage_name(t),
                                       [=](ExecState& s, const Layer& l) {
                                         const void* bias = l.ins.size() > 2 ? s.ptr(l.ins[2]) : nullptr;
                                         return launch_layernorm(s.ptr(l.ins[0]), s.ptr(l.ins[1]), bias, s.ptr(l.outs[0]),
                                                                 t, rows, cols, eps, s.stream);
                                       });
}

std::unique_ptr<Layer> make_reduce_layer(const std::string& op, const ReducePlan& p, StorageType t) {
  return std::make_unique<KernelLayer>(op, std::string("kiln.reduce ") + storage_name(t),
                                       [=](ExecState& s, const Layer& l) {
                                         return launch_reduce(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, p.kind, p.outer,
                                                              p.red, p.inner, s.stream);
                                       });
}

std::unique_ptr<Layer> make_gather_layer(const GatherPlan& p, int elem_bytes) {
  const int64_t outer = p.outer, axis_dim = p.axis_dim, nidx = p.count, inner = p.inner;
  if (p.runtime) {
    const bool idx_64 = p.indices_64;
    return std::make_unique<KernelLayer>(
        "Gather", std::string("kiln.gather runtime_indices=") + (idx_64 ? "int64" : "int32"),
        [=](ExecState& s, const Layer& l) {
          return launch_gather_runtime(s.ptr(l.ins[0]), s.ptr(l.ins[1]), idx_64, s.ptr(l.outs[0]), elem_bytes, outer,
                                       axis_dim, nidx, inner, s.stream);
        });
  }
  // A few constant indices (a q/k/v split, a class token): each selects `outer` runs of `inner`
  // contiguous elements, one strided 2-D copy per index (the copy engine's bandwidth, no index
  // arithmetic per element). The same bytes as the kernel.
  if (nidx <= 8 && inner * elem_bytes >= 64) {
    const std::vector<int64_t> idx = p.indices;
    return std::make_unique<KernelLayer>("Gather", "kiln.gather memcpy2d", [=](ExecState& s, const Layer& l) {
      const char* x = static_cast<const char*>(s.ptr(l.ins[0]));
      char* y = static_cast<char*>(s.ptr(l.outs[0]));
      const size_t row = static_cast<size_t>(inner) * elem_bytes;
      for (int64_t j = 0; j < nidx; ++j) {
        const cudaError_t e = cudaMemcpy2DAsync(y + static_cast<size_t>(j) * row, row * static_cast<size_t>(nidx),
                                                x + static_cast<size_t>(idx[j]) * row, row * static_cast<size_t>(axis_dim),
                                                row, static_cast<size_t>(outer), cudaMemcpyDeviceToDevice, s.stream);
        if (e != cudaSuccess) return e;
      }
      return cudaSuccess;
    });
  }
  return std::make_unique<KernelLayer>("Gather", "kiln.gather", [=](ExecState& s, const Layer& l) {
    return launch_gather(s.ptr(l.ins[0]), static_cast<const int64_t*>(s.ptr(l.ins[1])), s.ptr(l.outs[0]), elem_bytes,
                         outer, axis_dim, nidx, inner, s.stream);
  });
}

std::unique_ptr<Layer> make_pad_layer(const PadPlan& p, StorageType t) {
  return std::make_unique<KernelLayer>("Pad", std::string("kiln.pad ") + storage_name(t), [=](ExecState& s, const Layer& l) {
    return launch_pad(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, p.mode, p.value, p.desc, s.stream);
  });
}

std::unique_ptr<Layer> make_resize_layer(const ResizeDesc& d, StorageType t) {
  return std::make_unique<KernelLayer>("Resize", std::string("kiln.resize ") + (d.linear ? "linear " : "nearest ") + storage_name(t),
                                       [=](ExecState& s, const Layer& l) {
                                         return launch_resize(s.ptr(l.ins[0]), s.ptr(l.outs[0]), t, d, s.stream);
                                       });
}

std::unique_ptr<Layer> make_where_layer(const BroadcastDesc& d, const std::vector<int64_t>& c_strides, StorageType t) {
  std::vector<int64_t> cs = c_strides;
  cs.resize(kMaxRank, 0);
  return std::make_unique<KernelLayer>("Where", std::string("kiln.where ") + storage_name(t), [=](ExecState& s, const Layer& l) {
    return launch_where(s.ptr(l.ins[0]), s.ptr(l.ins[1]), s.ptr(l.ins[2]), s.ptr(l.outs[0]), t, d, cs.data(), s.stream);
  });
}

std::unique_ptr<Layer> make_round_to_half_layer(int64_t count) {
  return std::make_unique<KernelLayer>("Cast", "kiln.round_to_half", [=](ExecState& s, const Layer& l) {
    return launch_round_to_half(static_cast<const float*>(s.ptr(l.ins[0])), static_cast<float*>(s.ptr(l.outs[0])), count,
                                s.stream);
  });
}

std::unique_ptr<Layer> make_convert_layer(int64_t count, StorageType src, StorageType dst) {
  return std::make_unique<KernelLayer>("Cast", std::string("kiln.convert ") + storage_name(src) + "->" + storage_name(dst),
                                       [=](ExecState& s, const Layer& l) {
                                         return launch_convert(s.ptr(l.ins[0]), src, s.ptr(l.outs[0]), dst, count,
                                                               s.stream);
                                       });
}

std::unique_ptr<Layer> make_kernel_layer(const std::string& op, const std::string& tactic, KernelLaunch launch) {
  return std::make_unique<KernelLayer>(op, tactic, std::move(launch));
}

StatusOr<std::unique_ptr<Layer>> make_batched_matmul_layer(const BatchedMatMulParams& p, StorageType t, bool tf32) {
  auto l = std::make_unique<BatchedMatMulLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, t, tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

}  // namespace kiln::cuda
