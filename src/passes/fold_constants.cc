// Constant folding: a layer whose inputs are all constants is evaluated once at build time
// with the CPU reference kernels and replaced by its outputs.
//   y = f(c1, ..., cn), all ci constant  ->  y := constant f(c1, ..., cn)
//   Shape(x), x of fully known shape [d0..dn)  ->  constant int64 [d_start..d_end)
//   Size(x),  x of fully known shape           ->  constant int64 prod(d)
//   Gather(Shape(x), i), dims d_i known        ->  constant int64 d_i   (x may have other dims
//   Slice(Shape(x), s, e), dims d_s..d_e known ->  constant int64 [d_s..d_e)   symbolic, e.g. a
//                                                  dynamic batch; Slice on axis 0 with step 1)
// (ONNX "Operator Shape, since version 15": start/end clamp to [0, rank], negatives add rank.)
// With the profile's fixed input shapes (the builder makes them known dims), the exporters'
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains fold away completely.
// Layers with subgraphs are left alone, and so are outputs above kMaxFoldedBytes (folding a
// ConstantOfShape into a huge weight would bloat the plan).
#include <algorithm>

#include "passes/passes.h"
#include "runtime/interpreter.h"

namespace kiln::passes {

namespace {
constexpr size_t kMaxFoldedBytes = 64u << 20;  // bytes

bool foldable(const ir::Graph& g, const ir::Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == ir::Attribute::Kind::kGraph) return false;
  bool any_input = false;
  for (ir::ValueId v : n.inputs) {
    if (v == ir::kNoValue) continue;
    if (!g.value(v).constant) return false;
    any_input = true;
  }
  return any_input || n.op == ir::OpKind::kRange || n.op == ir::OpKind::kEyeLike;
}

// Shape/Size of a value whose shape is fully known, as a constant; false otherwise.
// Turns value `v` into the constant `t` (known shape and dtype, no producer).
void make_constant(ir::Graph& g, ir::ValueId v, Tensor t) {
  ir::Value& val = g.value(v);
  val.shape = ir::SymShape{};
  for (int64_t d : t.shape()) val.shape->push_back(ir::Dim::known(d));
  val.dtype = t.dtype();
  val.constant = std::make_shared<Tensor>(std::move(t));
  val.producer = -1;
}

bool fold_static_shape(ir::Graph& g, ir::Node& n) {
  if ((n.op != ir::OpKind::kShape && n.op != ir::OpKind::kSize) || n.inputs.empty() || n.outputs.size() != 1 ||
      n.outputs[0] == ir::kNoValue)
    return false;
  std::vector<int64_t> dims;
  if (!known_shape(g, n.inputs[0], &dims)) return false;
  Tensor t;
  if (n.op == ir::OpKind::kSize) {
    int64_t p = 1;
    for (int64_t d : dims) p *= d;
    t = Tensor(DataType::kInt64, {});
    t.data<int64_t>()[0] = p;
  } else {
    const int64_t r = static_cast<int64_t>(dims.size());
    auto clamp = [r](int64_t i) { return std::min(std::max(i < 0 ? i + r : i, int64_t{0}), r); };
    const int64_t start = n.opset >= 15 ? clamp(n.attr_int("start", 0)) : 0;
    const int64_t end = n.opset >= 15 ? clamp(n.attr_int("end", r)) : r;
    const int64_t len = std::max<int64_t>(0, end - start);
    t = Tensor(DataType::kInt64, {len});
    for (int64_t i = 0; i < len; ++i) t.data<int64_t>()[i] = dims[start + i];
  }
  make_constant(g, n.outputs[0], std::move(t));
  n.removed = true;
  return true;
}

// Slice(Shape(x), starts, ends) (axis 0, step 1, constant bounds) over known dims of x.
bool fold_known_dim_slice(ir::Graph& g, ir::Node& n, const ir::SymShape& dims) {
  std::vector<int64_t> st, en, ax, sp;
  if (n.opset < 10 || n.inputs.size() < 3 || !constant_ints(g, n.inputs[1], &st) || !constant_ints(g, n.inputs[2], &en) ||
      st.size() != 1 || en.size() != 1)
    return false;
  if (n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue && (!constant_ints(g, n.inputs[3], &ax) || ax.size() != 1 ||
                                                              (ax[0] != 0 && ax[0] != -1)))
    return false;
  if (n.inputs.size() > 4 && n.inputs[4] != ir::kNoValue && (!constant_ints(g, n.inputs[4], &sp) || sp != std::vector<int64_t>{1}))
    return false;
  const int64_t len = static_cast<int64_t>(dims.size());
  auto clamp = [len](int64_t i) { return std::min(std::max(i < 0 ? i + len : i, int64_t{0}), len); };
  const int64_t b = clamp(st[0]), e = clamp(en[0]);
  Tensor t(DataType::kInt64, {std::max<int64_t>(0, e - b)});
  for (int64_t i = b; i < e; ++i) {
    if (!dims[i].is_known()) return false;
    t.data<int64_t>()[i - b] = dims[i].value;
  }
  make_constant(g, n.outputs[0], std::move(t));
  n.removed = true;
  return true;
}

// Gather(Shape(x), i) over constant indices naming only known dims of x (or a Slice of them),
// as a constant.
bool fold_known_dims(ir::Graph& g, ir::Node& n) {
  if ((n.op != ir::OpKind::kGather && n.op != ir::OpKind::kSlice) || n.inputs.size() < 2 || n.outputs.size() != 1 ||
      (n.op == ir::OpKind::kGather && n.attr_int("axis", 0) != 0))
    return false;
  const ir::ValueId sv = n.inputs[0];
  if (sv == ir::kNoValue || g.value(sv).producer < 0) return false;
  const ir::Node& sh = g.node(g.value(sv).producer);
  if (sh.removed || sh.op != ir::OpKind::kShape || sh.inputs.empty()) return false;
  const auto& xs = g.value(sh.inputs[0]).shape;
  if (!xs) return false;
  const int64_t r = static_cast<int64_t>(xs->size());
  auto clamp = [r](int64_t i) { return std::min(std::max(i < 0 ? i + r : i, int64_t{0}), r); };
  const int64_t start = sh.opset >= 15 ? clamp(sh.attr_int("start", 0)) : 0;
  const int64_t end = sh.opset >= 15 ? clamp(sh.attr_int("end", r)) : r;
  const int64_t len = std::max<int64_t>(0, end - start);
  if (n.op == ir::OpKind::kSlice) return fold_known_dim_slice(g, n, ir::SymShape(xs->begin() + start, xs->begin() + start + len));
  const auto& it = g.value(n.inputs[1]).constant;
  if (!it || (it->dtype() != DataType::kInt64 && it->dtype() != DataType::kInt32) || it->rank() > 1) return false;
  std::vector<int64_t> idx;
  if (!constant_ints(g, n.inputs[1], &idx)) return false;
  Tensor t(DataType::kInt64, it->shape());
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t i = idx[k] < 0 ? idx[k] + len : idx[k];
    if (i < 0 || i >= len || !(*xs)[start + i].is_known()) return false;  // out of range: the kernel reports it
    t.data<int64_t>()[k] = (*xs)[start + i].value;
  }
  make_constant(g, n.outputs[0], std::move(t));
  n.removed = true;
  return true;
}

}  // namespace

Status fold_constants(ir::Graph& g, const PassOptions&) {
  for (auto& n : g.nodes) {
    if (n.removed || fold_static_shape(g, n) || fold_known_dims(g, n) || !foldable(g, n)) continue;
    // A one-node graph whose inputs are the constants themselves.
    ir::Graph mini;
    mini.opset_imports = g.opset_imports;
    ir::Node copy = n;
    copy.inputs.clear();
    copy.outputs.clear();
    for (ir::ValueId v : n.inputs) {
      if (v == ir::kNoValue) { copy.inputs.push_back(ir::kNoValue); continue; }
      ir::ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
      mini.value(mv).constant = g.value(v).constant;
      copy.inputs.push_back(mv);
    }
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue) { copy.outputs.push_back(ir::kNoValue); continue; }
      ir::ValueId mv = mini.add_value(g.value(v).name, g.value(v).dtype);
      copy.outputs.push_back(mv);
      mini.outputs.push_back(mv);
    }
    mini.add_node(std::move(copy));
    auto outs = interpret(mini, {});
    if (!outs.ok()) continue;  // leave it to run time, where the error names the layer
    size_t bytes = 0;
    bool tensors_only = true;  // sequence/optional values stay run-time values
    for (const auto& t : *outs) {
      bytes += t.nbytes();
      tensors_only = tensors_only && t.is_tensor();
    }
    if (!tensors_only) continue;
    if (bytes > kMaxFoldedBytes) continue;
    size_t k = 0;
    for (ir::ValueId v : n.outputs) {
      if (v == ir::kNoValue) continue;
      make_constant(g, v, (*outs)[k++]);
    }
    n.removed = true;
  }
  return Status::Ok();
}

}  // namespace kiln::passes
