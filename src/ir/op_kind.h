// OpKind: the closed enum of ops, generated from ops.def. Switches over OpKind have no
// `default:` so that a new op fails to compile where it is not handled.
#pragma once

#include <optional>
#include <string_view>

namespace kiln::ir {

enum class OpKind : int {
#define KILN_OP(name) k##name,
#define KILN_INTERNAL_OP(name) k##name,
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_INTERNAL_OP
  kCount,
};

constexpr int kNumOps = static_cast<int>(OpKind::kCount);

// The ONNX op_type (or internal name) of an op: "Conv".
const char* op_name(OpKind op);
// Maps an ONNX op_type of the default domain to an OpKind; nullopt if Kiln has no such op.
std::optional<OpKind> op_from_onnx(std::string_view op_type);
// True for ops created only by Kiln's passes.
bool op_is_internal(OpKind op);
// True for ops that write memory outside their outputs (PagedAttention appends the step's K/V to
// the caller's pool): their result is not a function of their inputs alone, so they are never
// constant-folded or merged by common-subexpression elimination. Every other op is pure.
bool op_writes_memory(OpKind op);

}  // namespace kiln::ir
