// The expression program a FusedPointwise layer carries (docs/decisions/0005). It lives in one
// string attribute, `program`, that is both the stored form and what the printer shows:
//   "r0=Mul(in0,in1); r1=Sigmoid(r0); r2=Add(r1,in2)"
// Instruction i defines register ri from operands: a layer input `inK` (numpy-broadcast to the
// output shape), an earlier register `rJ`, or a float immediate (shortest round-trip decimal,
// `inf`, `-inf`). The last register is the output. The parser checks everything (opcode names,
// arity, register order, limits), so kernels can trust a parsed program.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "ir/pointwise_opcode.h"
#include "kiln/status.h"

namespace kiln::ir {

struct PwOperand {
  enum class Kind : uint8_t { kInput, kRegister, kImmediate };
  Kind kind = Kind::kImmediate;
  int index = 0;   // input or register number (kInput, kRegister)
  float imm = 0;   // value (kImmediate)
  static PwOperand input(int k) { return {Kind::kInput, k, 0.f}; }
  static PwOperand reg(int k) { return {Kind::kRegister, k, 0.f}; }
  static PwOperand immediate(float v) { return {Kind::kImmediate, 0, v}; }
};

struct PwInstr {
  PwOpcode op = PwOpcode::kAdd;
  std::array<PwOperand, kMaxPwArgs> args{};  // the first pw_arity(op) are used
};

struct PwProgram {
  std::vector<PwInstr> instrs;  // instrs[i] defines register i; the last one is the output
  int num_inputs = 0;           // 1 + the highest input number used
};

// Operand count of an opcode (1..3) and its name in program text ("LeakyRelu").
int pw_arity(PwOpcode op);
const char* pw_name(PwOpcode op);

// Text -> program; the error says what is wrong and where ("instruction 2: ...").
StatusOr<PwProgram> parse_pw_program(std::string_view text);
// Program -> text (parse_pw_program(pw_program_text(p)) gives p back bit for bit).
std::string pw_program_text(const PwProgram& p);

// Whether p is silu(in0) * in1 as fuse_pointwise writes a gated MLP's activation — Sigmoid(in0);
// Mul(in0, r0); Mul(r1, in1), either operand order of each Mul (IEEE multiplication commutes
// exactly) —, the gate program the GPU's gated GEMM computes with constant opcodes
// (passes::fuse_gated_gemm, docs/decisions/0092).
bool pw_is_silu_gate(const PwProgram& p);

// p with inputs 0 and 1 exchanged (a gate whose halves arrive in the other order).
PwProgram pw_swap_inputs01(PwProgram p);

}  // namespace kiln::ir
