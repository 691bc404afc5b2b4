// GatherND and GatherElements, and the scatters ScatterElements / Scatter / ScatterND (ONNX
// Operators.md sections of those names) of a row-major input of
// any storage type — registered in the float table and in the exact one (docs/decisions/0051):
// the kernels copy elements by size. Constant indices are checked and normalized at build (out
// of range: an error naming the node, as Gather) and uploaded as int64; indices from an int32 /
// int64 activation (mask and position indexing in current exports) are read on the device, an
// out-of-range one giving zeros (kernels_gather.h). gather_indexed.h plans the descriptors.
#include <cstdint>
#include <cstring>

#include "backends/cuda/gather_indexed.h"
#include "backends/cuda/gpu_ops.h"
#include "backends/cuda/layer_factory.h"
#include "core/numerics.h"

namespace kiln::cuda {
namespace {

// The layer's indices operand: `*idx_64` says whether it is int64 (else int32). Constant
// indices are read exactly, checked by `normalize` and uploaded as int64.
template <typename Normalize>
StatusOr<int> indices_operand(LowerContext& ctx, const ir::Node& n, const std::string& where, Normalize normalize,
                              bool* idx_64) {
  const ir::ValueId v = n.inputs[1];
  if (const auto& c = ctx.graph().value(v).constant) {
    if (c->dtype() != DataType::kInt64 && c->dtype() != DataType::kInt32)
      return invalid_argument(where + "indices of dtype " + dtype_name(c->dtype()) + " (int32 or int64 expected)");
    std::vector<int64_t> idx(static_cast<size_t>(c->numel()));
    for (int64_t i = 0; i < c->numel(); ++i)
      idx[i] = c->dtype() == DataType::kInt64 ? c->data<int64_t>()[i] : c->data<int32_t>()[i];
    KILN_RETURN_IF_ERROR(normalize(&idx));
    *idx_64 = true;
    return ctx.upload_raw(n.name + ":indices", c->shape(), idx.data(), idx.size() * sizeof(int64_t),
                          "indices of '" + n.name + "'");
  }
  KILN_ASSIGN_OR_RETURN(int a, ctx.activation(v));
  const StorageType t = ctx.value_type(a);
  if (t != StorageType::kI64 && t != StorageType::kI32)
    return unsupported(where + "indices stored as " + storage_name(t) + " (int32 or int64 expected)");
  *idx_64 = t == StorageType::kI64;
  return ctx.as_layout(a, false);
}

}  // namespace

Status lower_gather_nd(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "indices are required");
  KILN_ASSIGN_OR_RETURN(GatherNDDesc d, plan_gather_nd(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  bool idx_64 = true;
  KILN_ASSIGN_OR_RETURN(int idx, indices_operand(
                                     ctx, n, where,
                                     [&](std::vector<int64_t>* i) { return normalize_gather_nd_indices(n, d, i); },
                                     &idx_64));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  ctx.add_layer(make_gather_nd_layer(d, elem_bytes, idx_64), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

Status lower_gather_elements(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "indices are required");
  KILN_ASSIGN_OR_RETURN(GatherElementsDesc d,
                        plan_gather_elements(n, ctx.shape(n.inputs[0]), ctx.shape(n.inputs[1])));
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  bool idx_64 = true;
  KILN_ASSIGN_OR_RETURN(
      int idx, indices_operand(
                   ctx, n, where, [&](std::vector<int64_t>* i) { return normalize_gather_elements_indices(n, d, i); },
                   &idx_64));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  ctx.add_layer(make_gather_elements_layer(d, elem_bytes, idx_64), n.name, {x, idx}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// ScatterElements, Scatter (opset 9-10: ScatterElements without reduction) and ScatterND: data
// and updates in the layer's storage, indices as for the gathers (constant ones checked at build).
Status lower_scatter(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 3 || n.inputs[1] == ir::kNoValue || n.inputs[2] == ir::kNoValue)
    return invalid_argument(where + "data, indices and updates are required");
  const Shape& data = ctx.shape(n.inputs[0]);
  const Shape& indices = ctx.shape(n.inputs[1]);
  const Shape& updates = ctx.shape(n.inputs[2]);
  const StorageType t = ctx.storage();
  const int64_t count = shape_numel(data);
  ScatterReduce r = ScatterReduce::kNone;
  std::unique_ptr<Layer> layer;
  bool idx_64 = true;
  int idx = -1;
  if (n.op == ir::OpKind::kScatterND) {
    KILN_ASSIGN_OR_RETURN(GatherNDDesc d, plan_scatter_nd(n, data, indices, updates, &r));
    KILN_ASSIGN_OR_RETURN(
        idx, indices_operand(
                 ctx, n, where, [&](std::vector<int64_t>* i) { return normalize_gather_nd_indices(n, d, i); }, &idx_64));
    layer = make_scatter_nd_layer(d, count, t, r, idx_64);
  } else {
    KILN_ASSIGN_OR_RETURN(GatherElementsDesc d, plan_scatter_elements(n, data, indices, updates, &r));
    KILN_ASSIGN_OR_RETURN(
        idx, indices_operand(
                 ctx, n, where, [&](std::vector<int64_t>* i) { return normalize_gather_elements_indices(n, d, i); },
                 &idx_64));
    layer = make_scatter_elements_layer(d, count, t, r, idx_64);
  }
  if (r != ScatterReduce::kNone && t == StorageType::kBool)
    return unsupported(where + "a reduction on bool data (the CPU reference has none either)");
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  KILN_ASSIGN_OR_RETURN(int u, ctx.row_major_operand(n.inputs[2]));
  ctx.add_layer(std::move(layer), n.name, {x, idx, u}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// ReverseSequence (batch_axis / time_axis 0 and 1): one gather by the sequence lengths, any
// storage type; constant lengths checked at build like the CPU reference.
Status lower_reverse_sequence(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "sequence_lens is required");
  const Shape& x = ctx.shape(n.inputs[0]);
  if (x.size() < 2) return invalid_argument(where + "input must have rank >= 2, got " + shape_str(x));
  const int64_t ba = n.attr_int("batch_axis", 1), ta = n.attr_int("time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return invalid_argument(where + "batch_axis and time_axis must be 0 and 1");
  const int64_t nb = x[ba], nt = x[ta], inner = dims_product(x, 2, x.size());
  if (shape_numel(ctx.shape(n.inputs[1])) != nb)
    return invalid_argument(where + "sequence_lens must have batch_size (" + std::to_string(nb) + ") entries");
  int lens = -1;
  bool lens_64 = true;
  if (const auto& c = ctx.graph().value(n.inputs[1]).constant) {
    std::vector<int64_t> v(static_cast<size_t>(c->numel()));
    for (int64_t b = 0; b < c->numel(); ++b) {
      v[b] = load_as_int64(c->dtype(), c->raw(), b);
      if (v[b] < 0 || v[b] > nt)
        return invalid_argument(where + "sequence_lens entry " + std::to_string(v[b]) + " is out of range [0, " +
                                std::to_string(nt) + "]");
    }
    KILN_ASSIGN_OR_RETURN(lens, ctx.upload_raw(n.name + ":sequence_lens", c->shape(), v.data(),
                                               v.size() * sizeof(int64_t), "sequence_lens of '" + n.name + "'"));
  } else {
    KILN_ASSIGN_OR_RETURN(int a, ctx.activation(n.inputs[1]));
    const StorageType t = ctx.value_type(a);
    if (t != StorageType::kI64 && t != StorageType::kI32)
      return unsupported(where + "sequence_lens stored as " + storage_name(t) + " (int32 or int64 expected)");
    lens_64 = t == StorageType::kI64;
    lens = ctx.as_layout(a, false);
  }
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  const int elem_bytes = static_cast<int>(storage_bytes(ctx.storage()));
  const int batch_axis = static_cast<int>(ba);
  auto layer = make_kernel_layer(
      "ReverseSequence", std::string("kiln.reverse_sequence lens=") + (lens_64 ? "int64" : "int32"),
      [=](ExecState& s, const Layer& l) {
        return launch_reverse_sequence(s.ptr(l.ins[0]), s.ptr(l.ins[1]), lens_64, s.ptr(l.outs[0]), elem_bytes, nb, nt,
                                       inner, batch_axis, s.stream);
      });
  ctx.add_layer(std::move(layer), n.name, {xv, lens}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// Pad with an int32 / int64 / bool output (the exact table; float outputs: lower_pad): plan_pad's
// plan, elements copied as bits. A constant pad value is re-read from the graph exactly and must
// fit the element type.
Status lower_pad_exact(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  KILN_ASSIGN_OR_RETURN(PadPlan p, plan_pad(n, ctx.graph(), ctx.shape(n.inputs[0]), ctx.shape(n.outputs[0])));
  const StorageType t = ctx.storage();
  uint64_t bits = 0;
  if (p.mode == PadMode::kConstant && n.inputs.size() > 2 && n.inputs[2] != ir::kNoValue) {
    const auto& c = ctx.graph().value(n.inputs[2]).constant;  // plan_pad refused a run-time value
    if (c && c->numel() > 0) {
      const int64_t v = load_as_int64(c->dtype(), c->raw(), 0);
      if (static_cast<double>(v) != load_as_double(c->dtype(), c->raw(), 0))
        return unsupported(where + "a constant_value that is not an integer for an integer Pad");
      if (t == StorageType::kI32) {
        if (v < INT32_MIN || v > INT32_MAX) return invalid_argument(where + "constant_value does not fit int32");
        const int32_t w = static_cast<int32_t>(v);
        std::memcpy(&bits, &w, 4);
      } else if (t == StorageType::kI64) {
        std::memcpy(&bits, &v, 8);
      } else {
        bits = v != 0 ? 1 : 0;
      }
    }
  } else if (p.mode == PadMode::kConstant && p.value != 0.f) {
    return unsupported(where + "a float `value` attribute for an integer Pad");
  }
  KILN_ASSIGN_OR_RETURN(int x, ctx.row_major_operand(n.inputs[0]));
  const int eb = static_cast<int>(storage_bytes(t));
  auto layer = make_kernel_layer("Pad", std::string("kiln.pad_bits ") + storage_name(t),
                                 [=](ExecState& s, const Layer& l) {
                                   return launch_pad_bits(s.ptr(l.ins[0]), s.ptr(l.outs[0]), eb, p.mode, bits, p.desc,
                                                          s.stream);
                                 });
  ctx.add_layer(std::move(layer), n.name, {x}, {ctx.new_output(n)}, n.origin);
  return Status::Ok();
}

// MaxUnpool: X [N, C, spatial...] of the layer's storage, int64 indices shaped like X, the output
// shape from the lowering (the default one of kernel_shape / strides / pads, or output_shape's).
// Constant indices out of range are a build error.
Status lower_max_unpool(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  if (n.inputs.size() < 2 || n.inputs[1] == ir::kNoValue) return invalid_argument(where + "I is required");
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& y = ctx.shape(n.outputs.at(0));
  const int r = static_cast<int>(x.size());
  if (r < 3) return invalid_argument(where + "X rank " + std::to_string(r) + ", expected at least 3");
  if (r > kMaxRank) return unsupported(where + "rank above " + std::to_string(kMaxRank));
  if (ctx.shape(n.inputs[1]) != x) return invalid_argument(where + "I must be shaped like X");
  if (static_cast<int>(y.size()) != r) return invalid_argument(where + "output rank differs from X's");
  const int nd = r - 2;
  const std::vector<int64_t> kernel = n.attr_ints("kernel_shape");
  const std::vector<int64_t> strides = n.attr_ints("strides", std::vector<int64_t>(nd, 1));
  const std::vector<int64_t> pads = n.attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  if (static_cast<int>(kernel.size()) != nd || static_cast<int>(strides.size()) != nd ||
      static_cast<int>(pads.size()) != 2 * nd)
    return invalid_argument(where + "kernel_shape/strides/pads do not match the spatial rank");
  UnpoolDesc d;
  d.rank = r;
  d.dflt[0] = x[0];
  d.dflt[1] = x[1];
  for (int k = 0; k < nd; ++k) d.dflt[k + 2] = (x[k + 2] - 1) * strides[k] + kernel[k] - pads[k] - pads[k + nd];
  for (int k = 0; k < r; ++k) {
    if (d.dflt[k] <= 0) return invalid_argument(where + "invalid output shape " + shape_str(y));
    d.out[k] = y[k];
    d.remap |= y[k] != d.dflt[k];
  }
  const int64_t total = dims_product(Shape(d.dflt, d.dflt + r), 0, static_cast<size_t>(r));
  int idx = -1;
  if (const auto& c = ctx.graph().value(n.inputs[1]).constant) {
    std::vector<int64_t> v(static_cast<size_t>(c->numel()));
    for (int64_t i = 0; i < c->numel(); ++i) {
      v[i] = load_as_int64(c->dtype(), c->raw(), i);
      if (v[i] < 0 || v[i] >= total) return invalid_argument(where + "index " + std::to_string(v[i]) + " out of range");
    }
    KILN_ASSIGN_OR_RETURN(idx, ctx.upload_raw(n.name + ":indices", c->shape(), v.data(), v.size() * sizeof(int64_t),
                                              "indices of '" + n.name + "'"));
  } else {
    KILN_ASSIGN_OR_RETURN(idx, ctx.operand_as(n.inputs[1], StorageType::kI64));
  }
  KILN_ASSIGN_OR_RETURN(int xv, ctx.row_major_operand(n.inputs[0]));
  const int winner = ctx.new_value(n.name + ":winner", y, StorageType::kI64, false);
  const int eb = static_cast<int>(storage_bytes(ctx.storage()));
  const int64_t in_count = shape_numel(x);
  auto layer = make_kernel_layer("MaxUnpool", "kiln.max_unpool", [=](ExecState& s, const Layer& l) {
    return launch_max_unpool(s.ptr(l.ins[0]), static_cast<const int64_t*>(s.ptr(l.ins[1])),
                             static_cast<int64_t*>(s.ptr(l.outs[1])), s.ptr(l.outs[0]), eb, in_count, d, s.stream);
  });
  ctx.add_layer(std::move(layer), n.name, {xv, idx}, {ctx.new_output(n), winner}, n.origin);
  return Status::Ok();
}

}  // namespace kiln::cuda
