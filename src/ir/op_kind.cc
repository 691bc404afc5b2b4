// Names of the ops in ops.def.
#include "ir/op_kind.h"

#include <array>

namespace kiln::ir {
namespace {

constexpr std::array<const char*, kNumOps> kNames = {
#define KILN_OP(name) #name,
#define KILN_INTERNAL_OP(name) #name,
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_INTERNAL_OP
};

constexpr std::array<bool, kNumOps> kInternal = {
#define KILN_OP(name) false,
#define KILN_INTERNAL_OP(name) true,
#include "ir/ops.def"
#undef KILN_OP
#undef KILN_INTERNAL_OP
};

}  // namespace

const char* op_name(OpKind op) { return kNames[static_cast<int>(op)]; }

bool op_is_internal(OpKind op) { return kInternal[static_cast<int>(op)]; }

bool op_writes_memory(OpKind op) { return op == OpKind::kPagedAttention; }

std::optional<OpKind> op_from_onnx(std::string_view op_type) {
  for (int i = 0; i < kNumOps; ++i) {
    if (!kInternal[i] && op_type == kNames[i]) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

}  // namespace kiln::ir
