// A fully connected layer written as MatMul + Add becomes one GEMM with the bias in its epilogue:
//   MatMul(A[M,K], W[K,N]) + b     ->  Gemm(A, W, b)        (alpha = beta = 1, no transposes)
//   MatMul(A[*,M,K], W[K,N]) + b   ->  MatMulBias(A, W, b') (A of rank > 2: transformer activations)
//   Reshape(Gemm(Reshape(A[*,K], [-1,K]), W, b), [*,N])  ->  MatMulBias(A, W, b')
//                                       (GPT-2's Conv1D: x.view(-1, K) -> addmm -> view(*, N))
//   the same with A[*,d1,d2,..], d1·d2·.. = K ->  MatMulBias(Reshape(A, [0,..,0,K]), W, b')
//                                       (GPT-2's attention output [B,S,H,D] into c_proj)
// W and b are float32 constants. For Gemm, b is [N], [1,N], [1] or scalar (Gemm's C broadcasts
// unidirectionally to [M,N]: ONNX "Operator Gemm, since version 13"). For MatMulBias (ops.def),
// b holds N values on its last axis with leading 1s and rank <= A's (or one value), so the Add
// does not change the product's shape; b' is it as [N]. Dynamic leading dims stay dynamic: the
// layer computes MatMul's numpy shape at run time. The MatMul must feed only the Add.
#include <algorithm>

#include "passes/passes.h"

namespace kiln::passes {

namespace {

// b broadcasts to [M,N] without growing the rank of the Add's result.
bool bias_fits(const Tensor& b, int64_t n) {
  if (b.rank() > 2) return false;
  if (b.rank() == 2 && b.dim(0) != 1) return false;
  const int64_t last = b.rank() == 0 ? 1 : b.dim(-1);
  return last == n || last == 1;
}

// A [*,M,K] (rank > 2): MatMul + Add -> MatMulBias with the bias as [N].
bool fuse_rank_n(ir::Graph& g, ir::Node& mm, ir::Node& add, ir::ValueId bias, const Tensor& w, const Tensor& b) {
  const int64_t n = w.dim(1);
  const auto& a_shape = *g.value(mm.inputs[0]).shape;
  const ir::Dim& k = a_shape.back();
  if (k.is_known() && k.value != w.dim(0)) return false;
  if (b.rank() > static_cast<int>(a_shape.size())) return false;
  for (int i = 0; i + 1 < b.rank(); ++i)
    if (b.dim(i) != 1) return false;
  if (b.numel() != n && b.numel() != 1) return false;
  ir::ValueId bv = bias;
  if (b.rank() != 1 || b.numel() != n) {
    Tensor flat(DataType::kFloat32, {n});
    for (int64_t j = 0; j < n; ++j) flat.data<float>()[j] = b.data<float>()[b.numel() == 1 ? 0 : j];
    std::string name = g.value(bias).name + "_bias";
    while (g.find_value(name) != ir::kNoValue) name += "_";
    bv = g.add_value(name, DataType::kFloat32);
    g.value(bv).shape = ir::SymShape{ir::Dim::known(n)};
    g.value(bv).constant = std::make_shared<Tensor>(std::move(flat));
  }
  mm.op = ir::OpKind::kMatMulBias;
  mm.inputs.push_back(bv);
  mm.outputs[0] = add.outputs[0];
  g.value(add.outputs[0]).producer = mm.id;
  mm.origin.insert(mm.origin.end(), add.origin.begin(), add.origin.end());
  add.removed = true;
  return true;
}

// Reshape(Gemm(Reshape(A)), ...) with A [*, K] flattened to [M, K] and the result unflattened to
// [*, N] (same leading dims, symbolically): the three layers become one MatMulBias. With A
// [*, d1, d2, ...] (d1 · d2 · ... = K), the inner Reshape stays, to [*, K]: MatMulBias(Reshape(A)).
bool unflatten_gemm(ir::Graph& g, const std::vector<std::vector<ir::NodeId>>& consumers,
                    const std::set<std::string>& pinned, ir::Node& outer) {
  if (outer.op != ir::OpKind::kReshape || outer.inputs.empty() || outer.outputs.size() != 1) return false;
  auto single = [&](ir::ValueId v) {
    return v != ir::kNoValue && consumers[v].size() == 1 && !std::count(g.outputs.begin(), g.outputs.end(), v) &&
           !pinned.count(g.value(v).name);
  };
  const ir::ValueId gy = outer.inputs[0];
  if (!single(gy) || g.value(gy).producer < 0) return false;
  ir::Node& gemm = g.node(g.value(gy).producer);
  if (gemm.removed || gemm.op != ir::OpKind::kGemm || gemm.inputs.size() != 3 || gemm.attr_int("transA", 0) != 0 ||
      gemm.attr_float("alpha", 1.f) != 1.f || gemm.attr_float("beta", 1.f) != 1.f)
    return false;
  const Tensor* w = const_f32(g, gemm.inputs[1]);
  const Tensor* b = const_f32(g, gemm.inputs[2]);
  if (!w || !b || w->rank() != 2) return false;
  const bool tb = gemm.attr_int("transB", 0) != 0;
  const int64_t k = w->dim(tb ? 1 : 0), n = w->dim(tb ? 0 : 1);
  if (b->numel() != n || (b->rank() == 2 && b->dim(0) != 1) || b->rank() > 2) return false;
  const ir::ValueId flat = gemm.inputs[0];
  if (!single(flat) || g.value(flat).producer < 0) return false;
  ir::Node& inner = g.node(g.value(flat).producer);
  if (inner.removed || inner.op != ir::OpKind::kReshape || inner.inputs.empty()) return false;
  const ir::ValueId a = inner.inputs[0];
  // Copies: add_value below grows the value table.
  const auto as = g.value(a).shape, ys = g.value(outer.outputs[0]).shape;
  if (g.value(a).dtype != DataType::kFloat32 || !as || !ys || ys->size() < 3 || as->size() < ys->size()) return false;
  if (!(ys->back() == ir::Dim::known(n))) return false;
  const size_t lead = ys->size() - 1;  // the result's leading dims *
  for (size_t i = 0; i < lead; ++i)
    if (!((*as)[i] == (*ys)[i]) || (!(*as)[i].is_known() && (*as)[i].symbol.empty())) return false;
  // A [*, K] as it is; or A [*, d1, d2, ...] with d1 · d2 · ... = K (an attention output [B, S, H, D]
  // before GPT-2's c_proj): the inner Reshape then stays, making [*, K] (0 copies each leading dim
  // under allowzero = 0) instead of [M, K].
  const bool as_is = as->size() == lead + 1 && as->back() == ir::Dim::known(k);
  int64_t tail = 1;
  for (size_t i = lead; i < as->size(); ++i) tail = (*as)[i].is_known() && tail >= 0 ? tail * (*as)[i].value : -1;
  if (!as_is && (tail != k || inner.inputs.size() < 2 || inner.attr_int("allowzero", 0) != 0)) return false;
  ir::ValueId wv = gemm.inputs[1], bv = gemm.inputs[2];
  auto add_const = [&](const std::string& base, Tensor t) {
    std::string name = base;
    while (g.find_value(name) != ir::kNoValue) name += "_";
    const ir::ValueId v = g.add_value(name, DataType::kFloat32);
    ir::SymShape s;
    for (int64_t d : t.shape()) s.push_back(ir::Dim::known(d));
    g.value(v).shape = s;
    g.value(v).constant = std::make_shared<Tensor>(std::move(t));
    return v;
  };
  if (tb) {
    Tensor t(DataType::kFloat32, {k, n});
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < n; ++j) t.data<float>()[i * n + j] = w->data<float>()[j * k + i];
    wv = add_const(g.value(gemm.inputs[1]).name + "_kn", std::move(t));
  }
  if (b->rank() != 1) bv = add_const(g.value(gemm.inputs[2]).name + "_n", b->reshaped({n}));
  gemm.op = ir::OpKind::kMatMulBias;
  const ir::Node before = gemm;
  gemm.attrs.clear();
  ir::keep_qdq_blocked(before, gemm);  // why its Q/DQ did not fuse stays readable (decision 0062)
  ir::ValueId in = a;
  if (!as_is) {
    Tensor shape(DataType::kInt64, {static_cast<int64_t>(lead + 1)});
    for (size_t i = 0; i < lead; ++i) shape.data<int64_t>()[i] = 0;
    shape.data<int64_t>()[lead] = k;
    std::string name = inner.name + "_rows_shape";
    while (g.find_value(name) != ir::kNoValue) name += "_";
    const ir::ValueId sv = g.add_value(name, DataType::kInt64);
    g.value(sv).shape = ir::SymShape{ir::Dim::known(static_cast<int64_t>(lead + 1))};
    g.value(sv).constant = std::make_shared<Tensor>(std::move(shape));
    inner.inputs[1] = sv;
    ir::SymShape fs(ys->begin(), ys->end() - 1);
    fs.push_back(ir::Dim::known(k));
    g.value(flat).shape = fs;
    in = flat;
  }
  gemm.inputs = {in, wv, bv};
  gemm.outputs = {outer.outputs[0]};
  g.value(outer.outputs[0]).producer = gemm.id;
  g.value(gy).producer = -1;  // the flat product: read by nothing now
  if (as_is) gemm.origin.insert(gemm.origin.end(), inner.origin.begin(), inner.origin.end());
  gemm.origin.insert(gemm.origin.end(), outer.origin.begin(), outer.origin.end());
  inner.removed = as_is;
  outer.removed = true;
  return true;
}

}  // namespace

Status fuse_matmul_add(ir::Graph& g, const PassOptions&) {
  const std::set<std::string> pinned = subgraph_reads(g);
  {
    const auto consumers = g.consumers();
    for (auto& n : g.nodes)
      if (!n.removed) unflatten_gemm(g, consumers, pinned, n);
  }
  const auto consumers = g.consumers();
  for (auto& add : g.nodes) {
    if (add.removed || add.op != ir::OpKind::kAdd || add.opset < 7 || add.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      const ir::ValueId y = add.inputs[side], bias = add.inputs[1 - side];
      if (y == ir::kNoValue || g.value(y).producer < 0) continue;
      ir::Node& mm = g.node(g.value(y).producer);
      if (mm.removed || mm.op != ir::OpKind::kMatMul || mm.inputs.size() != 2) continue;
      if (consumers[y].size() != 1 || std::count(g.outputs.begin(), g.outputs.end(), y) || pinned.count(g.value(y).name))
        continue;
      const Tensor* w = const_f32(g, mm.inputs[1]);
      const Tensor* b = const_f32(g, bias);
      const auto& a_shape = g.value(mm.inputs[0]).shape;
      if (!w || !b || w->rank() != 2 || !a_shape || a_shape->size() < 2) continue;
      if (a_shape->size() > 2) {
        if (g.value(mm.inputs[0]).dtype != DataType::kFloat32 || !fuse_rank_n(g, mm, add, bias, *w, *b)) continue;
        break;
      }
      // A's dtype must match W's (Gemm's single T); an unknown dtype is not trusted.
      if (g.value(mm.inputs[0]).dtype != DataType::kFloat32 || !bias_fits(*b, w->dim(1))) continue;
      const ir::Dim& k = (*a_shape)[1];
      if (k.is_known() && k.value != w->dim(0)) continue;  // let the MatMul report the mismatch
      // The MatMul becomes the Gemm and produces the Add's output (possibly a graph output).
      mm.op = ir::OpKind::kGemm;
      mm.inputs.push_back(bias);
      mm.outputs[0] = add.outputs[0];
      g.value(add.outputs[0]).producer = mm.id;
      mm.origin.insert(mm.origin.end(), add.origin.begin(), add.origin.end());
      add.removed = true;
      break;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::passes
