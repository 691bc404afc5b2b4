// Narrow integer values on the CUDA path (docs/decisions/0069): uint8 / int8 / uint16 / int16
// computed as int32 and uint32 as int64, where that provably gives the native type's result.
//
// Why it is exact where it is allowed: the wide type's two's-complement arithmetic is arithmetic
// mod 2^32 (2^64), and 2^8, 2^16 (2^32) divide it, so a chain of ring ops (Add, Sub, Mul, Neg) and
// integer-to-integer Casts (ONNX: truncation to the target width) computed wide and truncated to
// the narrow width at the end equals the native computation, whatever the intermediate values.
// Every other op (Div, Mod, Min, Max, Abs, comparisons, Casts from the narrow type, indices) sees
// the order of its operands, so it needs them *canonical*: equal to the native value (inside the
// narrow range). Graph inputs and constants are canonical; Min / Max / Mod of canonical values
// are; Div and Abs are for unsigned types (signed MIN / -1 and |MIN| leave the range); movement
// ops keep what their data inputs are; ring ops and Casts to a narrow type make values that may
// not be. Graph outputs are truncated to their declared dtype on the host (gpu_engine.cc).
// The ops of docs/decisions/0076 (quantization, integer Clip / BitShift / MaxPool / MatMul / Conv,
// Cast to a narrow type) run kernels that compute the declared narrow type's result from
// canonical inputs (kernels_qint.h); their outputs are canonical.
#include <map>

#include "backends/cuda/gpu_ops.h"

namespace kiln::cuda {

bool narrow_int_dtype(DataType dt, DataType* wide) {
  switch (dt) {
    case DataType::kUInt8: case DataType::kInt8: case DataType::kUInt16: case DataType::kInt16:
      *wide = DataType::kInt32;
      return true;
    case DataType::kUInt32: *wide = DataType::kInt64; return true;
    default: return false;
  }
}

namespace {

bool is_unsigned(DataType dt) {
  return dt == DataType::kUInt8 || dt == DataType::kUInt16 || dt == DataType::kUInt32;
}

enum class Role { kRing, kOrder, kMove, kCompare, kCast, kShapeOnly, kNarrowKernel, kPow, kOther };

Role role_of(ir::OpKind op) {
  using ir::OpKind;
  switch (op) {
    case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kNeg: return Role::kRing;
    case OpKind::kMin: case OpKind::kMax: case OpKind::kMod: case OpKind::kDiv: case OpKind::kAbs: return Role::kOrder;
    case OpKind::kEqual: case OpKind::kLess: case OpKind::kGreater: case OpKind::kLessOrEqual:
    case OpKind::kGreaterOrEqual:
      return Role::kCompare;
    case OpKind::kCast: return Role::kCast;
    case OpKind::kShape: case OpKind::kSize: return Role::kShapeOnly;
    // docs/decisions/0076: kernels of the declared narrow type (canonical in, canonical out).
    case OpKind::kClip: case OpKind::kMaxPool: case OpKind::kBitShift: case OpKind::kQuantizeLinear:
    case OpKind::kDequantizeLinear: case OpKind::kDynamicQuantizeLinear: case OpKind::kConvInteger:
    case OpKind::kMatMulInteger: case OpKind::kQLinearConv: case OpKind::kQLinearMatMul:
      return Role::kNarrowKernel;
    case OpKind::kPow: return Role::kPow;
    case OpKind::kReshape: case OpKind::kFlatten: case OpKind::kSqueeze: case OpKind::kUnsqueeze:
    case OpKind::kIdentity: case OpKind::kTranspose: case OpKind::kSlice: case OpKind::kExpand:
    case OpKind::kConcat: case OpKind::kSplit: case OpKind::kGather: case OpKind::kGatherElements:
    case OpKind::kGatherND: case OpKind::kTile: case OpKind::kWhere:
      return Role::kMove;
    default: return Role::kOther;
  }
}

// The inputs of a movement op that carry data (the rest are indices, shapes, axes, a condition).
bool is_data_input(ir::OpKind op, size_t k) {
  using ir::OpKind;
  switch (op) {
    case OpKind::kConcat: return true;
    case OpKind::kWhere: return k == 1 || k == 2;
    default: return k == 0;
  }
}

}  // namespace

DataType declared_narrow_dtype(const ValueShapes& vs, ir::ValueId v) {
  return v != ir::kNoValue && static_cast<size_t>(v) < vs.narrow.size() ? vs.narrow[v] : DataType::kUndefined;
}

Status widen_narrow_integers(const ir::Graph& g, ValueShapes* vs) {
  // Only activations count: a narrow *constant* (QuantLinear's int8 weights, a uint8 operand) is
  // read by its factory from the graph as it was before (operand_as converts it by value), and
  // keeps its dtype.
  // Neither does the int8 output of a QuantConv (its codes for the next QuantConv, stored in one
  // byte: StorageType::kI8, docs/decisions/0081), which only QuantConvs read.
  DataType wide;
  auto narrow = [&](ir::ValueId v) {
    if (v == ir::kNoValue || static_cast<size_t>(v) >= vs->dtypes.size() || g.value(v).constant) return false;
    const ir::NodeId p = g.value(v).producer;
    if (p >= 0 && g.node(p).op == ir::OpKind::kQuantConv) return false;
    return narrow_int_dtype(vs->dtypes[v], &wide);
  };
  bool any = false;
  for (const ir::Value& v : g.values) any |= narrow(v.id);
  if (!any) return Status::Ok();
  std::map<ir::ValueId, bool> canonical;  // narrow activations only
  for (ir::ValueId v : g.inputs)
    if (narrow(v)) canonical[v] = true;
  auto canon = [&](ir::ValueId v) {
    if (g.value(v).constant) return true;  // its stored values are the native ones
    auto it = canonical.find(v);
    return it != canonical.end() && it->second;
  };
  for (const ir::Node& n : g.nodes) {
    if (n.removed) continue;
    bool narrow_in = false, narrow_out = false;
    for (ir::ValueId v : n.inputs) narrow_in |= narrow(v);
    for (ir::ValueId v : n.outputs) narrow_out |= narrow(v);
    if (!narrow_in && !narrow_out) continue;
    const DataType dt = narrow_out ? vs->dtypes[n.outputs[0]] : DataType::kUndefined;
    const std::string where = n.describe() + ": ";
    auto refuse = [&](const std::string& why) {
      return unsupported(where + why + " (CUDA engines compute uint8 / int8 / uint16 / int16 as int32 and uint32 as "
                                       "int64 only where that gives the native result, docs/decisions/0069)");
    };
    auto need_canonical = [&](size_t k) -> Status {
      const ir::ValueId v = n.inputs[k];
      if (narrow(v) && !canon(v))
        return refuse(std::string("input ") + std::to_string(k) + " ('" + g.value(v).name + "', " +
                      dtype_name(vs->dtypes[v]) + ") may have wrapped around, and this op depends on its order");
      return Status::Ok();
    };
    auto set_outputs = [&](bool c) {
      for (ir::ValueId v : n.outputs)
        if (narrow(v)) canonical[v] = c;
    };
    switch (role_of(n.op)) {
      case Role::kRing: set_outputs(false); break;
      case Role::kOrder: {
        for (size_t k = 0; k < n.inputs.size(); ++k) KILN_RETURN_IF_ERROR(need_canonical(k));
        const bool unsigned_div_abs = (n.op == ir::OpKind::kDiv || n.op == ir::OpKind::kAbs) && is_unsigned(dt);
        set_outputs(n.op == ir::OpKind::kMin || n.op == ir::OpKind::kMax || n.op == ir::OpKind::kMod || unsigned_div_abs);
        break;
      }
      case Role::kCompare:
        for (size_t k = 0; k < n.inputs.size(); ++k) KILN_RETURN_IF_ERROR(need_canonical(k));
        break;
      case Role::kCast: {
        const DataType from = vs->dtypes[n.inputs[0]];
        if (narrow_out) {
          // To a narrow type the cast layer keeps the low bits of the source's integer value
          // (a float source truncated as the CPU's Cast: kernels_qint.h), a canonical result.
          // From a narrow integer, a target wider than the source needs the source's value.
          DataType w;
          const bool num_src = narrow_int_dtype(from, &w) || from == DataType::kInt32 || from == DataType::kInt64 ||
                               from == DataType::kFloat32 || from == DataType::kFloat16;
          if (!num_src) return refuse(std::string("Cast from ") + dtype_name(from) + " to " + dtype_name(dt));
          if (narrow_int_dtype(from, &w) && dtype_bits(dt) > dtype_bits(from)) KILN_RETURN_IF_ERROR(need_canonical(0));
          set_outputs(true);
        } else {
          KILN_RETURN_IF_ERROR(need_canonical(0));
        }
        break;
      }
      case Role::kShapeOnly: break;
      case Role::kNarrowKernel:
        for (size_t k = 0; k < n.inputs.size(); ++k) KILN_RETURN_IF_ERROR(need_canonical(k));
        set_outputs(true);
        break;
      case Role::kPow:
        // The exponent's value counts, and so does the base's for a negative exponent (the
        // CPU's rule for 1 and -1); a narrow result wraps like a product.
        for (size_t k = 0; k < n.inputs.size(); ++k) KILN_RETURN_IF_ERROR(need_canonical(k));
        set_outputs(false);
        break;
      case Role::kMove: {
        bool c = true;
        for (size_t k = 0; k < n.inputs.size(); ++k) {
          if (!narrow(n.inputs[k])) continue;
          if (is_data_input(n.op, k)) c &= canon(n.inputs[k]);
          else KILN_RETURN_IF_ERROR(need_canonical(k));
        }
        set_outputs(c);
        break;
      }
      case Role::kOther: {
        DataType seen = DataType::kUndefined;
        for (ir::ValueId v : n.inputs)
          if (seen == DataType::kUndefined && narrow(v)) seen = vs->dtypes[v];
        if (seen == DataType::kUndefined) seen = dt;
        return refuse(std::string("reads or writes ") + dtype_name(seen) + " values");
      }
    }
  }
  vs->narrow.assign(vs->dtypes.size(), DataType::kUndefined);
  for (const ir::Value& v : g.values) {
    DataType w;
    if (narrow(v.id) && narrow_int_dtype(vs->dtypes[v.id], &w)) {
      vs->narrow[v.id] = vs->dtypes[v.id];
      vs->dtypes[v.id] = w;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::cuda
