// Constant folding: a layer whose inputs are all constants is evaluated once at build time
// with the constant evaluator (PassOptions::evaluator: the CPU reference kernels, given by the
// builder) and replaced by its outputs; without an evaluator only the shape rules below fold.
//   y = f(c1, ..., cn), all ci constant  ->  y := constant f(c1, ..., cn)
//   Shape(x), x of fully known shape [d0..dn)  ->  constant int64 [d_start..d_end)
//   Size(x),  x of fully known shape           ->  constant int64 prod(d)
//   Gather(Shape(x), i), dims d_i known        ->  constant int64 d_i   (x may have other dims
//   Slice(Shape(x), s, e), dims d_s..d_e known ->  constant int64 [d_s..d_e)   symbolic, e.g. a
//                                                  dynamic batch; Slice on axis 0 with step 1)
// (ONNX "Operator Shape, since version 15": start/end clamp to [0, rank], negatives add rank.)
// With the profile's fixed input shapes (the builder makes them known dims), the exporters'
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains fold away completely.
// Layers with subgraphs are left alone, and so are outputs above ir::kMaxFoldedBytes (folding a
// ConstantOfShape into a huge weight would bloat the plan).
#include <algorithm>

#include "ir/constant_folding.h"
#include "passes/passes.h"

namespace kiln::passes {

namespace {
using ir::make_constant;

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

Status fold_constants(ir::Graph& g, const PassOptions& opts) {
  for (auto& n : g.nodes) {
    if (n.removed || fold_static_shape(g, n) || fold_known_dims(g, n) || !opts.evaluator) continue;
    ir::fold_constant_node(g, n, *opts.evaluator);
  }
  return Status::Ok();
}

}  // namespace kiln::passes
