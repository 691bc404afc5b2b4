// The stable text dump (see printer.h). Floats print in their shortest round-trip form so the
// text does not depend on the C library's formatting defaults.
#include "ir/printer.h"

#include <charconv>
#include <vector>

namespace kiln::ir {
namespace {

std::string float_str(float f) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), f);
  return std::string(buf, r.ptr);
}

std::string shape_text(const std::optional<SymShape>& s) { return s ? sym_shape_str(*s) : "[...]"; }

// "float32[1,3,224,224]"; a quantized value adds its parameters: "int8[4,6]{int8 per_tensor scale=0.05 zp=-3}".
std::string type_text(const Value& v) {
  return std::string(v.dtype == DataType::kUndefined ? "?" : dtype_name(v.dtype)) + shape_text(v.shape) +
         (v.quant ? "{" + quant_params_summary(*v.quant) + "}" : "");
}

template <typename T, typename F>
std::string list_text(const std::vector<T>& xs, F f) {
  std::string r = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) r += ',';
    r += f(xs[i]);
  }
  return r + "]";
}

std::string attr_text(const Attribute& a) {
  switch (a.kind) {
    case Attribute::Kind::kInt: return std::to_string(a.i);
    case Attribute::Kind::kFloat: return float_str(a.f);
    case Attribute::Kind::kString: return "\"" + a.s + "\"";
    case Attribute::Kind::kInts: return list_text(a.ints, [](int64_t v) { return std::to_string(v); });
    case Attribute::Kind::kFloats: return list_text(a.floats, float_str);
    case Attribute::Kind::kStrings: return list_text(a.strings, [](const std::string& s) { return "\"" + s + "\""; });
    case Attribute::Kind::kTensor: {
      if (!a.t) return "tensor<?>";
      Shape s = a.t->shape();
      return std::string("tensor<") + dtype_name(a.t->dtype()) + shape_str(s) + ">";
    }
    case Attribute::Kind::kGraph: return "@" + (a.g ? a.g->name : std::string("?"));
    case Attribute::Kind::kType:
      return std::string(a.type_kind == ValueKind::kTensor ? "type<tensor " : "type<") +
             (a.type_kind == ValueKind::kSequence ? "seq " : a.type_kind == ValueKind::kOptionalTensor ? "opt " :
              a.type_kind == ValueKind::kOptionalSequence ? "opt seq " : "") + dtype_name(a.type_dtype) + ">";
  }
  return "?";
}

void print_into(const Graph& g, const std::string& indent, std::string* out) {
  *out += indent + "graph " + g.name + "(";
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Value& v = g.value(g.inputs[i]);
    *out += (i ? ", %" : "%") + v.name + ":" + type_text(v);
  }
  *out += ") {\n";
  for (const Node& n : g.nodes) {
    if (n.removed) continue;
    std::string line = indent + "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (k) line += ", ";
      line += n.outputs[k] == kNoValue ? "_" : "%" + g.value(n.outputs[k]).name + ":" + type_text(g.value(n.outputs[k]));
    }
    line += std::string(" = ") + op_name(n.op) + "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (k) line += ", ";
      if (n.inputs[k] == kNoValue) { line += "_"; continue; }
      const Value& v = g.value(n.inputs[k]);
      line += "%" + v.name;
      if (v.constant) line += ":const" + shape_str(v.constant->shape());
    }
    line += ")";
    if (!n.attrs.empty()) {
      line += " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs) {  // std::map: sorted by name
        line += (first ? "" : ", ") + k + "=" + attr_text(a);
        first = false;
      }
      line += "}";
    }
    line += "  # " + n.name;
    if (n.origin.size() > 1) {
      line += " (fused:";
      for (size_t k = 1; k < n.origin.size(); ++k) line += " " + n.origin[k];
      line += ")";
    }
    *out += line + "\n";
    for (const auto& [k, a] : n.attrs)
      if (a.kind == Attribute::Kind::kGraph && a.g) print_into(*a.g, indent + "    ", out);
  }
  *out += indent + "  return";
  for (size_t i = 0; i < g.outputs.size(); ++i) *out += (i ? ", %" : " %") + g.value(g.outputs[i]).name;
  *out += "\n" + indent + "}\n";
}

}  // namespace

std::string print_graph(const Graph& g) {
  std::string out;
  print_into(g, "", &out);
  return out;
}

}  // namespace kiln::ir
