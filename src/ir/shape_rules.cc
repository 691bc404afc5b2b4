// Shared pieces of shape inference's rules: symbolic integer arithmetic, broadcasting of
// symbolic dims, axis handling, the windowed-op (Conv/pool) output formula, matmul shapes, and
// the rule table built from the per-family registration functions.
#include <algorithm>
#include <limits>

#include "ir/shape_rules.h"
#include "core/checked_size.h"
#include "core/numerics.h"
#include "core/onnx_dtype.h"

namespace kiln::ir {

SymInt SymInt::from_dim(const Dim& d) {
  if (d.is_known()) return constant(d.value);
  if (!d.symbol.empty()) return symbol(d.symbol);
  return unknown();
}

Dim SymInt::to_dim() const {
  if (kind == Kind::kConst && c >= 0) return Dim::known(c);
  if (kind == Kind::kSym) return Dim::sym(sym);
  return Dim{};
}

// Constant arithmetic that overflows int64 gives an unknown value (or dim), never a wrapped one:
// no real extent is that large, and the kernels' checked sizes report such a model.
SymInt sym_add(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_const() && b.is_const()) return checked_add(a.c, b.c, &r) ? SymInt::constant(r) : SymInt::unknown();
  if (b.is_const(0)) return a;
  if (a.is_const(0)) return b;
  return SymInt::unknown();
}

SymInt sym_sub(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_const() && b.is_const()) return __builtin_sub_overflow(a.c, b.c, &r) ? SymInt::unknown() : SymInt::constant(r);
  if (b.is_const(0)) return a;
  if (a.kind == SymInt::Kind::kSym && a == b) return SymInt::constant(0);
  return SymInt::unknown();
}

SymInt sym_mul(const SymInt& a, const SymInt& b) {
  int64_t r = 0;
  if (a.is_const() && b.is_const()) return checked_mul(a.c, b.c, &r) ? SymInt::constant(r) : SymInt::unknown();
  if (b.is_const(1)) return a;
  if (a.is_const(1)) return b;
  if (a.is_const(0) || b.is_const(0)) return SymInt::constant(0);
  return SymInt::unknown();
}

SymInt sym_div(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const() && b.c != 0 && !(b.c == -1 && a.c == std::numeric_limits<int64_t>::min()))
    return SymInt::constant(a.c / b.c);
  if (b.is_const(1)) return a;
  if (a.kind == SymInt::Kind::kSym && a == b) return SymInt::constant(1);
  return SymInt::unknown();
}

bool extent_from_double(double v, int64_t* out) {
  if (!(v >= 0 && v <= static_cast<double>(kMaxTensorElements))) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

std::string wide_str(__int128 v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  unsigned __int128 u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string r;
  for (; u != 0; u /= 10) r.insert(r.begin(), static_cast<char>('0' + static_cast<int>(u % 10)));
  return neg ? "-" + r : r;
}

Dim dim_mul(const Dim& a, const Dim& b) {
  int64_t r = 0;
  if (a.is_known() && b.is_known()) return checked_mul(a.value, b.value, &r) ? Dim::known(r) : Dim{};
  if (a.is_known() && a.value == 1) return b;
  if (b.is_known() && b.value == 1) return a;
  if ((a.is_known() && a.value == 0) || (b.is_known() && b.value == 0)) return Dim::known(0);
  return Dim{};
}

Dim dim_add(const Dim& a, const Dim& b) {
  int64_t r = 0;
  if (a.is_known() && b.is_known()) return checked_add(a.value, b.value, &r) ? Dim::known(r) : Dim{};
  if (a.is_known() && a.value == 0) return b;
  if (b.is_known() && b.value == 0) return a;
  return Dim{};
}

Dim dim_product(const SymShape& s, size_t begin, size_t end) {
  Dim r = Dim::known(1);
  for (size_t i = begin; i < end && i < s.size(); ++i) r = dim_mul(r, s[i]);
  return r;
}

bool broadcast_dim(const Dim& a, const Dim& b, Dim* out) {
  if (a.is_known() && b.is_known()) {
    if (a.value == b.value || b.value == 1) { *out = a; return true; }
    if (a.value == 1) { *out = b; return true; }
    return false;
  }
  if (a.is_known() && a.value == 1) { *out = b; return true; }
  if (b.is_known() && b.value == 1) { *out = a; return true; }
  // A known extent != 1 against a symbol or unknown: the symbol is either 1 or that extent.
  if (a.is_known()) { *out = a; return true; }
  if (b.is_known()) { *out = b; return true; }
  if (!a.symbol.empty() && a.symbol == b.symbol) { *out = a; return true; }
  *out = Dim{};  // two different symbols (or an unknown): either may be 1
  return true;
}

Dim unify_dim(const Dim& a, const Dim& b) {
  if (a.is_known()) return a;
  if (b.is_known()) return b;
  if (!a.symbol.empty()) return a;
  return b;
}

bool dims_conflict(const Dim& a, const Dim& b) { return a.is_known() && b.is_known() && a.value != b.value; }

const std::optional<SymShape>& ShapeContext::shape(int i) const {
  static const std::optional<SymShape> kNone;
  return has_input(i) ? inputs_[i].shape : kNone;
}

std::optional<int> ShapeContext::rank(int i) const {
  const auto& s = shape(i);
  if (!s) return std::nullopt;
  return static_cast<int>(s->size());
}

std::optional<std::vector<int64_t>> ShapeContext::const_ints(int i) const {
  if (const Tensor* t = constant(i)) {
    if (!dtype_is_integer(t->dtype()) && t->dtype() != DataType::kBool) return std::nullopt;
    std::vector<int64_t> r(static_cast<size_t>(t->numel()));
    for (int64_t k = 0; k < t->numel(); ++k) r[k] = load_as_int64(t->dtype(), t->raw(), k);
    return r;
  }
  if (const SymValues* v = values(i)) {
    std::vector<int64_t> r;
    for (const SymInt& e : *v) {
      if (!e.is_const()) return std::nullopt;
      r.push_back(e.c);
    }
    return r;
  }
  return std::nullopt;
}

std::optional<std::vector<double>> ShapeContext::const_doubles(int i) const {
  if (const Tensor* t = constant(i)) {
    if (t->dtype() == DataType::kString) return std::nullopt;
    return tensor_to_doubles(*t);
  }
  auto ints = const_ints(i);
  if (!ints) return std::nullopt;
  return std::vector<double>(ints->begin(), ints->end());
}

void ShapeContext::set_output(int i, DataType dtype, std::optional<SymShape> shape) {
  if (i >= num_outputs()) return;
  outputs_[i].set = true;
  outputs_[i].dtype = dtype;
  outputs_[i].shape = std::move(shape);
}

void ShapeContext::set_values(int i, SymValues v) {
  if (i < num_outputs()) outputs_[i].values = std::move(v);
}

Status ShapeContext::expect_rank(int i, int expected, const char* what) const {
  auto r = rank(i);
  if (r && *r != expected)
    return fail(std::string(what) + " rank " + std::to_string(*r) + ", expected " + std::to_string(expected));
  return Status::Ok();
}

StatusOr<std::vector<std::pair<DataType, std::optional<SymShape>>>> ShapeContext::infer_subgraph(
    const std::string& attr, const std::vector<std::pair<DataType, std::optional<SymShape>>>& inputs) {
  auto it = node_.attrs.find(attr);
  if (it == node_.attrs.end() || it->second.kind != Attribute::Kind::kGraph || !it->second.g)
    return fail("missing graph attribute '" + attr + "'");
  std::shared_ptr<Graph> updated;
  auto r = subgraph_(*it->second.g, inputs, &updated);
  if (!r.ok()) return r.status().with_context(node_.describe() + " attribute '" + attr + "'");
  if (updated) it->second.g = updated;
  return r;
}

bool normalize_axis(int64_t axis, int rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

StatusOr<std::optional<SymShape>> broadcast_inputs(const ShapeContext& ctx, int first) {
  SymShape r;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const auto& s = ctx.shape(i);
    if (!s) return std::optional<SymShape>();
    const size_t n = std::max(r.size(), s->size());
    SymShape next(n);
    for (size_t k = 0; k < n; ++k) {
      const Dim a = k + r.size() >= n ? r[k + r.size() - n] : Dim::known(1);
      const Dim b = k + s->size() >= n ? (*s)[k + s->size() - n] : Dim::known(1);
      if (!broadcast_dim(a, b, &next[k]))
        return ctx.fail("incompatible broadcast: " + sym_shape_str(r) + " vs input " + std::to_string(i) + " " +
                        sym_shape_str(*s));
    }
    r = std::move(next);
  }
  return std::optional<SymShape>(r);
}

std::optional<std::vector<int64_t>> axes_from(const ShapeContext& ctx, const char* attr, int input, bool use_input) {
  if (use_input) {
    if (!ctx.has_input(input)) return std::vector<int64_t>{};
    return ctx.const_ints(input);
  }
  return ctx.node().attr_ints(attr);
}

StatusOr<SymShape> window_output_shape(const ShapeContext& ctx, const SymShape& x, const std::vector<int64_t>& kernel,
                                       bool ceil_mode, const Dim& channels) {
  const size_t ns = x.size() - 2;
  if (kernel.size() != ns)
    return ctx.fail("kernel has " + std::to_string(kernel.size()) + " spatial dims, input has " + std::to_string(ns));
  const auto& n = ctx.node();
  const auto strides = n.attr_ints("strides", std::vector<int64_t>(ns, 1));
  const auto dil = n.attr_ints("dilations", std::vector<int64_t>(ns, 1));
  const auto pads = n.attr_ints("pads", std::vector<int64_t>(2 * ns, 0));
  const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
  if (strides.size() != ns || dil.size() != ns || pads.size() != 2 * ns)
    return ctx.fail("strides/dilations/pads do not match " + std::to_string(ns) + " spatial dims");
  SymShape out{x[0], channels};
  for (size_t i = 0; i < ns; ++i) {
    if (strides[i] <= 0 || dil[i] <= 0 || kernel[i] <= 0) return ctx.fail("kernel, strides and dilations must be positive");
    const Dim& in = x[2 + i];
    // In 128 bits: attributes near int64's range must not wrap (an extent past the tensor limit
    // is an error below).
    using Wide = __int128;
    const Wide ek = Wide{kernel[i] - 1} * dil[i] + 1;
    const Wide pad_sum = Wide{pads[i]} + pads[i + ns];
    if (ek > kMaxTensorElements) return ctx.fail("kernel extent " + wide_str(ek) + " is too large");
    const bool identity = ek == 1 && strides[i] == 1 && (auto_pad != "NOTSET" || pad_sum == 0);
    if (!in.is_known()) { out.push_back(identity ? in : Dim{}); continue; }
    Wide o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (Wide{in.value} + strides[i] - 1) / strides[i];
    } else if (auto_pad == "VALID") {
      if (in.value < ek) return ctx.fail("input spatial dim " + std::to_string(in.value) + " is smaller than the kernel extent " + std::to_string(static_cast<int64_t>(ek)));
      o = (in.value - ek) / strides[i] + 1;
    } else {
      const Wide total = in.value + pad_sum - ek;
      if (total < 0) return ctx.fail("padded input spatial dim " + wide_str(total + ek) + " is smaller than the kernel extent " + std::to_string(static_cast<int64_t>(ek)));
      o = (ceil_mode ? (total + strides[i] - 1) / strides[i] : total / strides[i]) + 1;
      // A last window that would start inside the right padding is dropped (as ONNX Runtime
      // and PyTorch do for ceil_mode).
      if (ceil_mode && (o - 1) * strides[i] >= Wide{in.value} + pads[i]) --o;
    }
    if (o > kMaxTensorElements)
      return ctx.fail("output spatial dim " + wide_str(o) + " passes the largest tensor extent " + std::to_string(kMaxTensorElements));
    out.push_back(Dim::known(static_cast<int64_t>(o)));
  }
  return out;
}

StatusOr<std::optional<SymShape>> matmul_shape(const ShapeContext& ctx, const std::optional<SymShape>& a,
                                               const std::optional<SymShape>& b) {
  if (!a || !b) return std::optional<SymShape>();
  if (a->empty() || b->empty()) return ctx.fail("MatMul operands must have rank >= 1");
  SymShape sa = *a, sb = *b;
  const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
  if (a1) sa.insert(sa.begin(), Dim::known(1));
  if (b1) sb.push_back(Dim::known(1));
  const Dim& ka = sa[sa.size() - 1];
  const Dim& kb = sb[sb.size() - 2];
  if (dims_conflict(ka, kb))
    return ctx.fail("inner dims differ: " + sym_shape_str(*a) + " x " + sym_shape_str(*b));
  const size_t ba = sa.size() - 2, bb = sb.size() - 2, nb = std::max(ba, bb);
  SymShape out(nb);
  for (size_t k = 0; k < nb; ++k) {
    const Dim x = k + ba >= nb ? sa[k + ba - nb] : Dim::known(1);
    const Dim y = k + bb >= nb ? sb[k + bb - nb] : Dim::known(1);
    if (!broadcast_dim(x, y, &out[k]))
      return ctx.fail("batch dims do not broadcast: " + sym_shape_str(*a) + " x " + sym_shape_str(*b));
  }
  if (!a1) out.push_back(sa[sa.size() - 2]);
  if (!b1) out.push_back(sb[sb.size() - 1]);
  return std::optional<SymShape>(out);
}

DataType dtype_from_onnx_code(int64_t code) { return dtype_from_onnx(static_cast<int>(code)); }

const ShapeRuleTable& ShapeRuleTable::get() {
  static const ShapeRuleTable table = [] {
    ShapeRuleTable t;
    register_elementwise_shape_rules(t);
    register_movement_shape_rules(t);
    register_indexing_shape_rules(t);
    register_nn_shape_rules(t);
    register_reduce_shape_rules(t);
    register_control_shape_rules(t);
    register_sequence_shape_rules(t);
    register_transformer_shape_rules(t);
    return t;
  }();
  return table;
}

}  // namespace kiln::ir
