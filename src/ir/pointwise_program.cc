// Parsing and printing FusedPointwise programs (see pointwise_program.h). Floats print in their
// shortest round-trip form (std::to_chars) so a program survives text -> program -> text.
#include "ir/pointwise_program.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace kiln::ir {

namespace {

struct OpInfo {
  const char* name;
  int arity;
};

OpInfo info(PwOpcode op) {
  switch (op) {
    case PwOpcode::kAdd: return {"Add", 2};
    case PwOpcode::kSub: return {"Sub", 2};
    case PwOpcode::kMul: return {"Mul", 2};
    case PwOpcode::kDiv: return {"Div", 2};
    case PwOpcode::kMax: return {"Max", 2};
    case PwOpcode::kMin: return {"Min", 2};
    case PwOpcode::kPow: return {"Pow", 2};
    case PwOpcode::kRelu: return {"Relu", 1};
    case PwOpcode::kLeakyRelu: return {"LeakyRelu", 2};
    case PwOpcode::kSigmoid: return {"Sigmoid", 1};
    case PwOpcode::kTanh: return {"Tanh", 1};
    case PwOpcode::kExp: return {"Exp", 1};
    case PwOpcode::kLog: return {"Log", 1};
    case PwOpcode::kSqrt: return {"Sqrt", 1};
    case PwOpcode::kReciprocal: return {"Reciprocal", 1};
    case PwOpcode::kNeg: return {"Neg", 1};
    case PwOpcode::kAbs: return {"Abs", 1};
    case PwOpcode::kErf: return {"Erf", 1};
    case PwOpcode::kClip: return {"Clip", 3};
    case PwOpcode::kHardSigmoid: return {"HardSigmoid", 3};
    case PwOpcode::kHardSwish: return {"HardSwish", 1};
    case PwOpcode::kGelu: return {"Gelu", 1};
    case PwOpcode::kGeluTanh: return {"GeluTanh", 1};
    case PwOpcode::kSoftplus: return {"Softplus", 1};
    case PwOpcode::kElu: return {"Elu", 2};
    case PwOpcode::kQdqS8: return {"QdqS8", 3};
    case PwOpcode::kQdqU8: return {"QdqU8", 3};
    case PwOpcode::kQdqE4M3: return {"QdqE4M3", 2};
    case PwOpcode::kQdqE5M2: return {"QdqE5M2", 2};
    case PwOpcode::kSelu: return {"Selu", 3};
    case PwOpcode::kCelu: return {"Celu", 2};
    case PwOpcode::kSoftsign: return {"Softsign", 1};
    case PwOpcode::kMish: return {"Mish", 1};
    case PwOpcode::kThresholdedRelu: return {"ThresholdedRelu", 2};
    case PwOpcode::kShrink: return {"Shrink", 3};
    case PwOpcode::kSign: return {"Sign", 1};
    case PwOpcode::kRound: return {"Round", 1};
    case PwOpcode::kCeil: return {"Ceil", 1};
    case PwOpcode::kFloor: return {"Floor", 1};
    case PwOpcode::kTan: return {"Tan", 1};
    case PwOpcode::kAsin: return {"Asin", 1};
    case PwOpcode::kAcos: return {"Acos", 1};
    case PwOpcode::kAtan: return {"Atan", 1};
    case PwOpcode::kSinh: return {"Sinh", 1};
    case PwOpcode::kCosh: return {"Cosh", 1};
    case PwOpcode::kAsinh: return {"Asinh", 1};
    case PwOpcode::kAcosh: return {"Acosh", 1};
    case PwOpcode::kAtanh: return {"Atanh", 1};
    case PwOpcode::kFmod: return {"Fmod", 2};
    case PwOpcode::kPyMod: return {"PyMod", 2};
    case PwOpcode::kCount: break;
  }
  return {"?", 0};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Digits after a prefix ("in3" -> 3); -1 when `s` is not prefix + digits.
int numbered(std::string_view s, std::string_view prefix) {
  if (s.size() <= prefix.size() || s.substr(0, prefix.size()) != prefix) return -1;
  int v = 0;
  auto r = std::from_chars(s.data() + prefix.size(), s.data() + s.size(), v);
  return (r.ec == std::errc() && r.ptr == s.data() + s.size() && v >= 0) ? v : -1;
}

std::string float_text(float f) {
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  return std::string(buf, r.ptr);
}

std::string operand_text(const PwOperand& o) {
  switch (o.kind) {
    case PwOperand::Kind::kInput: return std::string("in").append(std::to_string(o.index));
    case PwOperand::Kind::kRegister: return std::string("r").append(std::to_string(o.index));
    case PwOperand::Kind::kImmediate: return float_text(o.imm);
  }
  return "?";
}

StatusOr<PwOperand> parse_operand(std::string_view s, int instr, std::string* err) {
  s = trim(s);
  if (int k = numbered(s, "in"); k >= 0) {
    if (k >= kMaxPwInputs) return invalid_argument(*err + "input in" + std::to_string(k) + " is past the limit of " + std::to_string(kMaxPwInputs));
    return PwOperand::input(k);
  }
  if (int k = numbered(s, "r"); k >= 0) {
    if (k >= instr) return invalid_argument(*err + "register r" + std::to_string(k) + " is read before it is defined");
    return PwOperand::reg(k);
  }
  if (s == "inf") return PwOperand::immediate(std::numeric_limits<float>::infinity());
  if (s == "-inf") return PwOperand::immediate(-std::numeric_limits<float>::infinity());
  float v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || std::isnan(v))
    return invalid_argument(*err + "operand '" + std::string(s) + "' is not inK, rK or a number");
  return PwOperand::immediate(v);
}

}  // namespace

int pw_arity(PwOpcode op) { return info(op).arity; }
const char* pw_name(PwOpcode op) { return info(op).name; }

StatusOr<PwProgram> parse_pw_program(std::string_view text) {
  PwProgram p;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(';', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view stmt = trim(text.substr(pos, end - pos));
    pos = end + 1;
    if (stmt.empty() && end == text.size()) break;
    const int i = static_cast<int>(p.instrs.size());
    std::string err = "program instruction " + std::to_string(i) + " ('" + std::string(stmt) + "'): ";
    if (i >= kMaxPwInstrs) return invalid_argument(err + "more than " + std::to_string(kMaxPwInstrs) + " instructions");
    const size_t eq = stmt.find('='), open = stmt.find('('), close = stmt.rfind(')');
    if (eq == std::string_view::npos || open == std::string_view::npos || close != stmt.size() - 1 || open < eq)
      return invalid_argument(err + "expected rK=Op(operands)");
    if (numbered(trim(stmt.substr(0, eq)), "r") != i) return invalid_argument(err + "must define r" + std::to_string(i));
    const std::string_view name = trim(stmt.substr(eq + 1, open - eq - 1));
    PwInstr ins;
    bool found = false;
    for (int c = 0; c < static_cast<int>(PwOpcode::kCount); ++c)
      if (name == info(static_cast<PwOpcode>(c)).name) {
        ins.op = static_cast<PwOpcode>(c);
        found = true;
      }
    if (!found) return invalid_argument(err + "unknown opcode '" + std::string(name) + "'");
    std::string_view args = stmt.substr(open + 1, close - open - 1);
    int n = 0;
    while (true) {
      const size_t comma = args.find(',');
      if (n >= kMaxPwArgs) return invalid_argument(err + "too many operands");
      KILN_ASSIGN_OR_RETURN(ins.args[n], parse_operand(args.substr(0, comma), i, &err));
      if (ins.args[n].kind == PwOperand::Kind::kInput) p.num_inputs = std::max(p.num_inputs, ins.args[n].index + 1);
      ++n;
      if (comma == std::string_view::npos) break;
      args.remove_prefix(comma + 1);
    }
    if (n != pw_arity(ins.op))
      return invalid_argument(err + std::string(name) + " takes " + std::to_string(pw_arity(ins.op)) +
                              " operand(s), got " + std::to_string(n));
    p.instrs.push_back(ins);
  }
  if (p.instrs.empty()) return invalid_argument("program has no instructions");
  return p;
}

std::string pw_program_text(const PwProgram& p) {
  std::string s;
  for (size_t i = 0; i < p.instrs.size(); ++i) {
    const PwInstr& in = p.instrs[i];
    if (i) s.append("; ");
    s.append("r").append(std::to_string(i)).append("=").append(pw_name(in.op)).append("(");
    for (int k = 0; k < pw_arity(in.op); ++k) s.append(k ? "," : "").append(operand_text(in.args[k]));
    s.append(")");
  }
  return s;
}

bool pw_is_silu_gate(const PwProgram& p) {
  if (p.instrs.size() != 3 || p.num_inputs != 2) return false;
  auto is = [](const PwOperand& o, PwOperand::Kind k, int i) { return o.kind == k && o.index == i; };
  auto mul_of = [&](const PwInstr& in, PwOperand::Kind ka, int a, PwOperand::Kind kb, int b) {
    return in.op == PwOpcode::kMul && ((is(in.args[0], ka, a) && is(in.args[1], kb, b)) ||
                                       (is(in.args[0], kb, b) && is(in.args[1], ka, a)));
  };
  using K = PwOperand::Kind;
  return p.instrs[0].op == PwOpcode::kSigmoid && is(p.instrs[0].args[0], K::kInput, 0) &&
         mul_of(p.instrs[1], K::kInput, 0, K::kRegister, 0) && mul_of(p.instrs[2], K::kRegister, 1, K::kInput, 1);
}

PwProgram pw_swap_inputs01(PwProgram p) {
  for (PwInstr& in : p.instrs)
    for (PwOperand& o : in.args)
      if (o.kind == PwOperand::Kind::kInput && (o.index == 0 || o.index == 1)) o.index = 1 - o.index;
  if (p.num_inputs < 2) p.num_inputs = 2;
  return p;
}

}  // namespace kiln::ir
