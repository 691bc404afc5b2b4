// Shape rules of the internal transformer layers made by the passes: Attention (fuse_attention),
// MatMulBias (fuse_matmul_add) and RMSNormalization (fuse_rmsnorm); and PagedAttention and Rope (src/llm). Their semantics are documented in ops.def and
// docs/decisions/0006-attention-op.md; the rules check what the kernels would reject, so a bad
// graph fails at build time with the node's name.
#include <cmath>

#include "ir/pointwise_program.h"
#include "ir/shape_rules.h"

namespace kiln::ir {
namespace {

// Q [*, Hq, Sq, D], K [*, Hkv, Sk, D], V [*, Hkv, Sk, Dv] -> [*, Hq, Sq, Dv]; with head_layout
// "bshd" the sequence and head axes of all four are swapped (Q [*, Sq, Hq, D], ...).
Status attention_rule(ShapeContext& ctx) {
  const std::string layout = ctx.node().attr_string("head_layout", "bhsd");
  if (layout != "bhsd" && layout != "bshd")
    return ctx.fail("head_layout '" + layout + "' is neither \"bhsd\" nor \"bshd\"");
  const bool bshd = layout == "bshd";
  // The shapes in [*, H, S, D] order.
  auto heads_first = [&](const std::optional<SymShape>& s) -> std::optional<SymShape> {
    if (!s || !bshd || s->size() < 3) return s;
    SymShape t = *s;
    std::swap(t[t.size() - 3], t[t.size() - 2]);
    return t;
  };
  for (int i = 1; i < 3; ++i)
    if (ctx.dtype(i) != DataType::kUndefined && ctx.dtype(0) != DataType::kUndefined && ctx.dtype(i) != ctx.dtype(0))
      return ctx.fail(std::string(i == 1 ? "K" : "V") + " has dtype " + dtype_name(ctx.dtype(i)) + ", Q has " +
                      dtype_name(ctx.dtype(0)));
  const auto q = heads_first(ctx.shape(0));
  const auto k = heads_first(ctx.shape(1));
  const auto v = heads_first(ctx.shape(2));
  if (!q || !k || !v) {
    ctx.set_output(0, ctx.dtype(0), std::nullopt);
    return Status::Ok();
  }
  const size_t r = q->size();
  if (r < 3 || k->size() != r || v->size() != r)
    return ctx.fail("Q, K, V must have one rank >= 3, got " + sym_shape_str(*q) + ", " + sym_shape_str(*k) + ", " +
                    sym_shape_str(*v));
  for (size_t i = 0; i + 3 < r; ++i)
    if (dims_conflict((*q)[i], (*k)[i]) || dims_conflict((*q)[i], (*v)[i]))
      return ctx.fail("batch dim " + std::to_string(i) + " differs between Q, K and V");
  const Dim &hq = (*q)[r - 3], &hkv = (*k)[r - 3];
  if (dims_conflict(hkv, (*v)[r - 3])) return ctx.fail("K and V have different head counts");
  if (hq.is_known() && hkv.is_known() && (hkv.value == 0 || hq.value % hkv.value != 0))
    return ctx.fail("query heads " + std::to_string(hq.value) + " are not a multiple of kv heads " +
                    std::to_string(hkv.value));
  if (dims_conflict((*q)[r - 1], (*k)[r - 1])) return ctx.fail("Q and K have different head sizes");
  if (dims_conflict((*k)[r - 2], (*v)[r - 2])) return ctx.fail("K and V have different sequence lengths");
  SymShape out = *q;
  out[r - 1] = (*v)[r - 1];
  ctx.set_output(0, ctx.dtype(0), heads_first(out));  // (the swap is its own inverse)
  return Status::Ok();
}

// MatMul's numpy shape; bias [N] must match the product's last dim.
// The gate attribute of MatMulBias and QuantLinear (passes::fuse_gated_gemm): a program of at
// most two inputs, no activation beside it, and one output per pair of the product's columns
// (j, N + j) — *y's last dim, known and even, halved.
Status gate_rule(ShapeContext& ctx, std::optional<SymShape>* y) {
  const std::string gate = ctx.node().attr_string("gate", "");
  if (gate.empty()) return Status::Ok();
  StatusOr<PwProgram> prog = parse_pw_program(gate);
  if (!prog.ok()) return ctx.fail("gate: " + prog.status().message());
  if (prog->num_inputs > 2) return ctx.fail("gate program reads " + std::to_string(prog->num_inputs) + " inputs, at most 2");
  if (!ctx.node().attr_string("activation", "").empty()) return ctx.fail("a gate with an activation");
  if (*y && !(*y)->empty()) {
    Dim& n = (*y)->back();
    if (!n.is_known()) return ctx.fail("a gate needs the product's last dim known, got " + sym_shape_str(**y));
    if (n.value % 2 != 0) return ctx.fail("a gate needs an even product width, got " + sym_shape_str(**y));
    n = Dim::known(n.value / 2);
  }
  return Status::Ok();
}

Status matmul_bias_rule(ShapeContext& ctx) {
  KILN_ASSIGN_OR_RETURN(auto s, matmul_shape(ctx, ctx.shape(0), ctx.shape(1)));
  const auto& b = ctx.shape(2);
  if (s && !s->empty() && b && (b->size() != 1 || dims_conflict((*b)[0], s->back())))
    return ctx.fail("bias " + sym_shape_str(*b) + " does not match the product's last dim " + sym_shape_str(*s));
  if (!ctx.node().attr_string("gate", "").empty() && ctx.node().inputs.size() > 3 && ctx.node().inputs[3] != kNoValue)
    return ctx.fail("a gate with a residual");
  KILN_RETURN_IF_ERROR(gate_rule(ctx, &s));
  // The norm scale (passes::fuse_rmsnorm_gemm): one value per column of A.
  if (ctx.node().inputs.size() > 4 && ctx.node().inputs[4] != kNoValue) {
    const auto& a = ctx.shape(0);
    const auto& sc = ctx.shape(4);
    if (a && sc && !a->empty() && (sc->size() != 1 || dims_conflict((*sc)[0], a->back())))
      return ctx.fail("norm scale " + sym_shape_str(*sc) + " is not [K] of the input " + sym_shape_str(*a));
  }
  if (ctx.node().inputs.size() > 3 && ctx.node().inputs[3] != kNoValue) {
    const auto& r = ctx.shape(3);
    bool differs = s && r && r->size() != s->size();
    for (size_t i = 0; s && r && !differs && i < r->size(); ++i) differs = dims_conflict((*r)[i], (*s)[i]);
    if (differs)
      return ctx.fail("residual " + sym_shape_str(*r) + " is not the product's shape " + sym_shape_str(*s));
    if (ctx.dtype(3) != ctx.dtype(0)) return ctx.fail("residual dtype differs from the input's");
  }
  ctx.set_output(0, ctx.dtype(0), s);
  return Status::Ok();
}

// X [*, K], W [N, K] -> [*, N] in X's dtype; w_scale and bias [N].
Status quant_linear_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  const auto& w = ctx.shape(1);
  if (w && w->size() != 2) return ctx.fail("weight " + sym_shape_str(*w) + " is not [N, K]");
  if (x && x->empty()) return ctx.fail("input is a scalar, expected [*, K]");
  if (x && w && dims_conflict(x->back(), (*w)[1]))
    return ctx.fail("input " + sym_shape_str(*x) + " and weight " + sym_shape_str(*w) + " disagree on K");
  for (size_t i : {size_t{2}, size_t{3}}) {
    if (i >= ctx.node().inputs.size() || ctx.node().inputs[i] == kNoValue) continue;
    const auto& v = ctx.shape(i);
    if (v && w && (v->size() != 1 || dims_conflict((*v)[0], (*w)[0])))
      return ctx.fail(std::string(i == 2 ? "w_scale " : "bias ") + sym_shape_str(*v) + " is not [N] = " +
                      sym_shape_str(SymShape{(*w)[0]}));
  }
  std::optional<SymShape> y;
  if (x && w) {
    y = *x;
    y->back() = (*w)[0];
  }
  KILN_RETURN_IF_ERROR(gate_rule(ctx, &y));
  ctx.set_output(0, ctx.dtype(0), y);
  return Status::Ok();
}

Status rms_norm_rule(ShapeContext& ctx) {
  const auto& x = ctx.shape(0);
  if (x) {
    int64_t axis;
    if (!normalize_axis(ctx.node().attr_int("axis", -1), static_cast<int>(x->size()), &axis))
      return ctx.fail("axis out of range for rank " + std::to_string(x->size()));
  }
  ctx.set_output(0, ctx.dtype(0), x);
  return Status::Ok();
}

// PagedAttention (ops.def): Q [T, Hq, D], K/V [T, Hkv, D], positions int64 [T], token_seq int32
// [T], block_table int32 [R, MB], kv_pools int64 [L, 2] -> O [T, Hq, D] in Q's dtype. Checks what
// is knowable at build time (dtypes, ranks, dims, attributes); pool contents are run-time values.
Status paged_attention_rule(ShapeContext& ctx) {
  const Node& n = ctx.node();
  for (int i = 1; i < 3; ++i)
    if (ctx.dtype(i) != DataType::kUndefined && ctx.dtype(0) != DataType::kUndefined && ctx.dtype(i) != ctx.dtype(0))
      return ctx.fail(std::string(i == 1 ? "K" : "V") + " has dtype " + dtype_name(ctx.dtype(i)) + ", Q has " +
                      dtype_name(ctx.dtype(0)));
  const struct {
    int input;
    const char* what;
    DataType dtype;
    size_t rank;
  } ints[] = {{3, "positions", DataType::kInt64, 1},
              {4, "token_seq", DataType::kInt32, 1},
              {5, "block_table", DataType::kInt32, 2},
              {6, "kv_pools", DataType::kInt64, 2}};
  for (const auto& in : ints) {
    if (ctx.dtype(in.input) != DataType::kUndefined && ctx.dtype(in.input) != in.dtype)
      return ctx.fail(std::string(in.what) + " has dtype " + dtype_name(ctx.dtype(in.input)) + ", expected " +
                      dtype_name(in.dtype));
    if (ctx.shape(in.input) && ctx.shape(in.input)->size() != in.rank)
      return ctx.fail(std::string(in.what) + " " + sym_shape_str(*ctx.shape(in.input)) + " is not rank " +
                      std::to_string(in.rank));
  }
  if (n.attr_int("block_size", 0) <= 0) return ctx.fail("attribute block_size must be > 0");
  if (n.attr_int("layer", -1) < 0) return ctx.fail("attribute layer must be >= 0");
  const std::string cd = n.attr_string("cache_dtype", "");
  if (cd != "float32" && cd != "float16" && cd != "bfloat16" && cd != "fp8e4m3fn")
    return ctx.fail("cache_dtype '" + cd + "' is not float32, float16, bfloat16 or fp8e4m3fn");
  for (const char* a : {"k_scale", "v_scale"}) {
    const float sc = n.attr_float(a, 1.f);
    if (!(sc > 0) || !std::isfinite(sc)) return ctx.fail(std::string(a) + " " + std::to_string(sc) + " must be finite and > 0");
  }
  if (n.attr_int("sliding_window", 0) != 0) return ctx.fail("sliding_window " + std::to_string(n.attr_int("sliding_window", 0)) + " is not supported (only 0)");
  if (ctx.has_input(7)) {  // inv_freq of the fused RoPE: float32 [D / 2]
    if (ctx.dtype(7) != DataType::kUndefined && ctx.dtype(7) != DataType::kFloat32)
      return ctx.fail(std::string("inv_freq has dtype ") + dtype_name(ctx.dtype(7)) + ", expected float32");
    const auto& f = ctx.shape(7);
    const auto& qs = ctx.shape(0);
    if (f && f->size() != 1) return ctx.fail("inv_freq " + sym_shape_str(*f) + " is not rank 1");
    if (f && qs && qs->size() == 3 && (*qs)[2].is_known() &&
        ((*qs)[2].value % 2 != 0 || dims_conflict((*f)[0], Dim::known((*qs)[2].value / 2))))
      return ctx.fail("inv_freq " + sym_shape_str(*f) + " is not [D / 2] of Q " + sym_shape_str(*qs));
  }
  const auto& kv = ctx.shape(6);
  if (kv && dims_conflict((*kv)[1], Dim::known(2))) return ctx.fail("kv_pools " + sym_shape_str(*kv) + " is not [L, 2]");
  if (kv && (*kv)[0].is_known() && n.attr_int("layer", -1) >= (*kv)[0].value)
    return ctx.fail("layer " + std::to_string(n.attr_int("layer", -1)) + " is not a row of kv_pools " + sym_shape_str(*kv));
  const auto& q = ctx.shape(0);
  const auto& k = ctx.shape(1);
  const auto& v = ctx.shape(2);
  if (!q || !k || !v) {
    ctx.set_output(0, ctx.dtype(0), q);
    return Status::Ok();
  }
  if (q->size() != 3 || k->size() != 3 || v->size() != 3)
    return ctx.fail("Q, K, V must be [T, H, D], got " + sym_shape_str(*q) + ", " + sym_shape_str(*k) + ", " +
                    sym_shape_str(*v));
  if (dims_conflict((*q)[0], (*k)[0]) || dims_conflict((*q)[0], (*v)[0]))
    return ctx.fail("Q, K, V disagree on T: " + sym_shape_str(*q) + ", " + sym_shape_str(*k) + ", " + sym_shape_str(*v));
  for (int i : {3, 4})
    if (const auto& s = ctx.shape(i); s && dims_conflict((*s)[0], (*q)[0]))
      return ctx.fail(std::string(i == 3 ? "positions " : "token_seq ") + sym_shape_str(*s) + " does not have Q's T " +
                      sym_shape_str(*q));
  if (dims_conflict((*k)[1], (*v)[1]) || dims_conflict((*q)[2], (*k)[2]) || dims_conflict((*q)[2], (*v)[2]))
    return ctx.fail("K " + sym_shape_str(*k) + " / V " + sym_shape_str(*v) + " do not fit Q " + sym_shape_str(*q) +
                    " (expected [T, Hkv, D])");
  const Dim &hq = (*q)[1], &hkv = (*k)[1];
  if (hq.is_known() && hkv.is_known() && (hkv.value == 0 || hq.value % hkv.value != 0))
    return ctx.fail("query heads " + std::to_string(hq.value) + " are not a multiple of kv heads " +
                    std::to_string(hkv.value));
  ctx.set_output(0, ctx.dtype(0), q);
  return Status::Ok();
}

// Rope (ops.def): X [..., D] with heads at head_axis, positions int32 / int64 of X's shape
// without the head and last axes, inv_freq [R/2] or cos_cache / sin_cache [P, R/2] -> Y of X's
// shape and dtype.
Status rope_rule(ShapeContext& ctx) {
  const Node& n = ctx.node();
  const auto& x = ctx.shape(0);
  const int64_t head_axis = n.attr_int("head_axis", 1), rdim_attr = n.attr_int("rotary_dim", 0);
  const int64_t interleaved = n.attr_int("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) return ctx.fail("interleaved " + std::to_string(interleaved) + " is not 0 or 1");
  if (rdim_attr < 0 || rdim_attr % 2 != 0) return ctx.fail("rotary_dim " + std::to_string(rdim_attr) + " is not even and >= 0");
  if (ctx.dtype(1) != DataType::kUndefined && ctx.dtype(1) != DataType::kInt64 && ctx.dtype(1) != DataType::kInt32)
    return ctx.fail("positions have dtype " + std::string(dtype_name(ctx.dtype(1))) + ", expected int64 or int32");
  const bool caches = n.inputs.size() == 4;
  if (!caches && ctx.dtype(2) != DataType::kUndefined && ctx.dtype(2) != DataType::kFloat32)
    return ctx.fail("inv_freq has dtype " + std::string(dtype_name(ctx.dtype(2))) + ", expected float32");
  for (int k = 2; caches && k < 4; ++k) {
    const DataType t = ctx.dtype(k);
    if (t != DataType::kUndefined && t != DataType::kFloat32 && t != DataType::kFloat16 && t != DataType::kBFloat16 &&
        t != DataType::kFloat64)
      return ctx.fail(std::string(k == 2 ? "cos_cache" : "sin_cache") + " has dtype " + dtype_name(t) + ", expected a float type");
  }
  if (x) {
    const int64_t r = static_cast<int64_t>(x->size());
    if (r < 2 || head_axis < 0 || head_axis > r - 2)
      return ctx.fail("X " + sym_shape_str(*x) + " with head_axis " + std::to_string(head_axis) +
                      ": expected rank >= 2 and a head axis before the last");
    const Dim& d = x->back();
    if (d.is_known() && rdim_attr > d.value)
      return ctx.fail("rotary_dim " + std::to_string(rdim_attr) + " exceeds the head size " + std::to_string(d.value));
    if (d.is_known() && rdim_attr == 0 && d.value % 2 != 0)
      return ctx.fail("head size " + std::to_string(d.value) + " is odd (rotary_dim 0 rotates all of it)");
    SymShape want;
    for (int64_t i = 0; i + 1 < r; ++i)
      if (i != head_axis) want.push_back((*x)[static_cast<size_t>(i)]);
    if (const auto& p = ctx.shape(1)) {
      bool differs = p->size() != want.size();
      for (size_t i = 0; !differs && i < want.size(); ++i) differs = dims_conflict((*p)[i], want[i]);
      if (differs)
        return ctx.fail("positions " + sym_shape_str(*p) + " are not X " + sym_shape_str(*x) +
                        " without its head and last axes, " + sym_shape_str(want));
    }
    const Dim half = rdim_attr > 0 ? Dim::known(rdim_attr / 2) : (d.is_known() ? Dim::known(d.value / 2) : Dim());
    for (size_t k = 2; k < n.inputs.size(); ++k) {
      const auto& t = ctx.shape(static_cast<int>(k));
      const char* what = !caches ? "inv_freq" : (k == 2 ? "cos_cache" : "sin_cache");
      if (t && (t->size() != (caches ? 2u : 1u) || (half.is_known() && dims_conflict(t->back(), half))))
        return ctx.fail(std::string(what) + " " + sym_shape_str(*t) + " is not " + (caches ? "[P, " : "[") +
                        (half.is_known() ? std::to_string(half.value) : std::string("R/2")) + "]");
    }
  }
  ctx.set_output(0, ctx.dtype(0), x);
  return Status::Ok();
}

}  // namespace

void register_transformer_shape_rules(ShapeRuleTable& t) {
  t.add(OpKind::kAttention, attention_rule);
  t.add(OpKind::kMatMulBias, matmul_bias_rule);
  t.add(OpKind::kPagedAttention, paged_attention_rule);
  t.add(OpKind::kRMSNormalization, rms_norm_rule);
  t.add(OpKind::kRope, rope_rule);
  t.add(OpKind::kQuantLinear, quant_linear_rule);
}

}  // namespace kiln::ir
