// The transformer rows' graphs (moved from the former tests/gpu/gpu_ops_test.cc,
// gpu_transformer_test.cc and gpu_int_inputs_test.cc).
#include "op_table/transformer_graphs.h"

#include <cmath>
#include <random>
#include <utility>

namespace kiln::testing::op_table {

using ir::Attribute;
using ir::OpKind;

OpCase attention_graph(const AttnCase& c, uint32_t seed) {
  TinyGraph t;
  auto shp = [&](int64_t h, int64_t s, int64_t d) { return c.rank == 3 ? Shape{h, s, d} : Shape{c.b, h, s, d}; };
  const Shape qs = shp(c.hq, c.sq, c.d), ks = shp(c.hkv, c.sk, c.d), vs = shp(c.hkv, c.sk, c.dv);
  const std::vector<int64_t> swap_heads = {0, 2, 1, 3};
  auto stored = [&](Shape s) {  // [B, H, S, D] -> [B, S, H, D] for a bshd case
    if (c.bshd) std::swap(s[1], s[2]);
    return s;
  };
  std::vector<Tensor> in = {nonzero(stored(qs), seed, 2.f), nonzero(stored(ks), seed + 1, 2.f), nonzero(stored(vs), seed + 2)};
  std::vector<ir::ValueId> ins = {t.input("q", stored(qs)), t.input("k", stored(ks)), t.input("v", stored(vs))};
  if (c.bshd) {
    const char* names[3] = {"q_heads", "k_heads", "v_heads"};
    const Shape* shapes[3] = {&qs, &ks, &vs};
    for (int i = 0; i < 3; ++i)
      ins[i] = t.node(OpKind::kTranspose, names[i], {ins[i]}, *shapes[i], {{"perm", Attribute::of_ints(swap_heads)}});
  }
  std::mt19937 rng(seed + 3);
  if (c.mask == AttnCase::kAddInput) {  // BERT's extended mask: 0 or -10000 per key (padding)
    Tensor m(DataType::kFloat32, {c.b, 1, 1, c.sk});
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = (i % c.sk) < c.sk - 1 - (i / c.sk) * 3 ? 0.f : -10000.f;
    ins.push_back(t.input("mask", m.shape()));
    in.push_back(m);
  } else if (c.mask == AttnCase::kAddConst2d) {  // a relative-position-like bias [Sq, Sk]
    ins.push_back(t.constant("bias", nonzero({c.sq, c.sk}, seed + 4, 3.f)));
  } else if (c.mask == AttnCase::kBoolConst || c.mask == AttnCase::kBoolInput) {
    // [B, 1, Sq, Sk]; query row 1 of batch 0 sees no key
    Tensor m(DataType::kBool, {c.b, 1, c.sq, c.sk});
    auto* p = static_cast<uint8_t*>(m.raw());
    std::bernoulli_distribution keep(0.6);
    for (int64_t i = 0; i < m.numel(); ++i) p[i] = keep(rng) ? 1 : 0;
    for (int64_t j = 0; j < c.sk; ++j) {
      p[1 * c.sk + j] = 0;
      if (c.sq > 2) p[2 * c.sk + j] = j == 0;  // row 2 sees key 0 only
    }
    if (c.mask == AttnCase::kBoolConst) {
      ins.push_back(t.constant("keep", m));
    } else {
      ins.push_back(int_input(t, "keep", m.shape(), DataType::kBool));
      in.push_back(m);
    }
  }
  Shape os = shp(c.hq, c.sq, c.dv);
  std::map<std::string, Attribute> attrs;
  if (c.causal) attrs["is_causal"] = Attribute::of_int(1);
  auto y = t.node(OpKind::kAttention, "attn", ins, os, attrs);
  if (c.bshd) y = t.node(OpKind::kTranspose, "o_heads", {y}, stored(os), {{"perm", Attribute::of_ints(swap_heads)}});
  t.g.outputs = {y};
  return {t.g, in};
}

ir::Graph transformer_block(int64_t B, int64_t S, int64_t D, int64_t H) {
  const int64_t dh = D / H, F = 2 * D;
  TinyGraph t;
  uint32_t seed = 100;
  auto w = [&](const std::string& name, const Shape& s, float scale) { return t.constant(name, nonzero(s, seed++, scale)); };
  auto x = t.input("x", {B, S, D});
  auto ln = [&](const std::string& name, ir::ValueId in) {
    return t.node(OpKind::kLayerNormalization, name, {in, w(name + ".g", {D}, 1.f), w(name + ".b", {D}, 0.1f)}, {B, S, D},
                  {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-6f)}});
  };
  auto linear = [&](const std::string& name, ir::ValueId in, int64_t k, int64_t n) {
    auto mm = t.node(OpKind::kMatMul, name + ".mm", {in, w(name + ".w", {k, n}, 1.f / std::sqrt(static_cast<float>(k)))},
                     {B, S, n});
    return t.node(OpKind::kAdd, name + ".add", {mm, w(name + ".bias", {n}, 0.1f)}, {B, S, n});
  };
  auto heads = [&](const std::string& name, ir::ValueId in, std::vector<int64_t> perm, const Shape& out) {
    auto r = t.node(OpKind::kReshape, name + ".reshape", {in, t.constant(name + ".shape", ints({B, S, H, dh}))},
                    {B, S, H, dh});
    return t.node(OpKind::kTranspose, name + ".transpose", {r}, out, {{"perm", Attribute::of_ints(perm)}});
  };
  auto l1 = ln("ln1", x);
  auto q = heads("q", linear("q", l1, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto k = heads("k", linear("k", l1, D, D), {0, 2, 3, 1}, {B, H, dh, S});
  auto v = heads("v", linear("v", l1, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto s = t.node(OpKind::kMatMul, "qk", {q, k}, {B, H, S, S});
  auto ss = t.node(OpKind::kMul, "scale", {s, t.constant("scale.c", scalar_f(1.f / std::sqrt(static_cast<float>(dh))))},
                   {B, H, S, S});
  auto p = t.node(OpKind::kSoftmax, "softmax", {ss}, {B, H, S, S}, {{"axis", Attribute::of_int(-1)}});
  auto o = t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, dh});
  auto ot = t.node(OpKind::kTranspose, "o.transpose", {o}, {B, S, H, dh}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  auto orr = t.node(OpKind::kReshape, "o.reshape", {ot, t.constant("o.shape", ints({B, S, D}))}, {B, S, D});
  auto proj = linear("proj", orr, D, D);
  auto r1 = t.node(OpKind::kAdd, "residual1", {x, proj}, {B, S, D});
  auto l2 = ln("ln2", r1);
  auto h = linear("fc1", l2, D, F);
  auto gl = t.node(OpKind::kGelu, "gelu", {h}, {B, S, F});
  t.g.nodes.back().opset = 20;
  auto m = linear("fc2", gl, F, D);
  auto out = t.node(OpKind::kAdd, "residual2", {r1, m}, {B, S, D});
  t.g.outputs = {out};
  return t.g;
}

ir::Graph decoder_block(int64_t B, int64_t S, int64_t D, int64_t H) {
  const int64_t dh = D / H;
  TinyGraph t;
  uint32_t seed = 1000;
  auto w = [&](const std::string& name, const Shape& s, float scale) { return t.constant(name, nonzero(s, seed++, scale)); };
  auto scalar = [&](const std::string& name, float v) { return t.constant(name, scalar_f(v)); };
  auto x = t.input("x", {B, S, D});
  auto sq = t.node(OpKind::kMul, "rms.sq", {x, x}, {B, S, D});
  auto ms = t.node(OpKind::kReduceMean, "rms.mean", {sq, t.constant("rms.axes", ints({-1}))}, {B, S, 1},
                   {{"keepdims", Attribute::of_int(1)}});
  t.g.nodes.back().opset = 18;
  auto mse = t.node(OpKind::kAdd, "rms.eps", {ms, scalar("rms.eps.c", 1e-6f)}, {B, S, 1});
  auto rt = t.node(OpKind::kSqrt, "rms.sqrt", {mse}, {B, S, 1});
  auto nx = t.node(OpKind::kDiv, "rms.div", {x, rt}, {B, S, D});
  auto xn = t.node(OpKind::kMul, "rms.scale", {nx, w("rms.w", {D}, 1.f)}, {B, S, D});
  auto linear = [&](const std::string& name, ir::ValueId in, int64_t k, int64_t n) {
    auto mm = t.node(OpKind::kMatMul, name + ".mm", {in, w(name + ".w", {k, n}, 1.f / std::sqrt(float(k)))}, {B, S, n});
    return t.node(OpKind::kAdd, name + ".add", {mm, w(name + ".bias", {n}, 0.1f)}, {B, S, n});
  };
  auto heads = [&](const std::string& name, ir::ValueId in, std::vector<int64_t> perm, const Shape& out) {
    auto r = t.node(OpKind::kReshape, name + ".reshape", {in, t.constant(name + ".shape", ints({B, S, H, dh}))}, {B, S, H, dh});
    return t.node(OpKind::kTranspose, name + ".transpose", {r}, out, {{"perm", Attribute::of_ints(perm)}});
  };
  auto q = heads("q", linear("q", xn, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto k = heads("k", linear("k", xn, D, D), {0, 2, 3, 1}, {B, H, dh, S});
  auto v = heads("v", linear("v", xn, D, D), {0, 2, 1, 3}, {B, H, S, dh});
  auto s = t.node(OpKind::kMatMul, "qk", {q, k}, {B, H, S, S});
  auto ss = t.node(OpKind::kDiv, "scale", {s, scalar("scale.c", std::sqrt(static_cast<float>(dh)))}, {B, H, S, S});
  Tensor causal(DataType::kBool, {1, 1, S, S});
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) static_cast<uint8_t*>(causal.raw())[i * S + j] = j <= i;
  auto masked = t.node(OpKind::kWhere, "causal", {t.constant("causal.c", causal), ss, scalar("neg", -3.4028235e38f)},
                       {B, H, S, S});
  auto p = t.node(OpKind::kSoftmax, "softmax", {masked}, {B, H, S, S}, {{"axis", Attribute::of_int(-1)}});
  t.g.nodes.back().opset = 13;
  auto o = t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, dh});
  auto ot = t.node(OpKind::kTranspose, "o.transpose", {o}, {B, S, H, dh}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  auto orr = t.node(OpKind::kReshape, "o.reshape", {ot, t.constant("o.shape", ints({B, S, D}))}, {B, S, D});
  auto proj = linear("proj", orr, D, D);
  auto out = t.node(OpKind::kAdd, "residual", {x, proj}, {B, S, D});
  t.g.outputs = {out};
  return t.g;
}

ir::Graph decoder_mlp(int64_t B, int64_t S, int64_t D, int64_t F) {
  TinyGraph t;
  uint32_t seed = 1200;
  auto w = [&](const std::string& name, const Shape& s, float scale) { return t.constant(name, nonzero(s, seed++, scale)); };
  auto x = t.input("x", {B, S, D});
  auto h = t.node(OpKind::kRMSNormalization, "post_attention_layernorm", {x, w("norm.w", {D}, 1.f)}, {B, S, D},
                  {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}});
  const float sd = 1.f / std::sqrt(static_cast<float>(D)), sf = 1.f / std::sqrt(static_cast<float>(F));
  auto g = t.node(OpKind::kMatMul, "gate_proj", {h, w("gate.w", {D, F}, sd)}, {B, S, F});
  auto u = t.node(OpKind::kMatMul, "up_proj", {h, w("up.w", {D, F}, sd)}, {B, S, F});
  auto sg = t.node(OpKind::kSigmoid, "act.sigmoid", {g}, {B, S, F});
  auto a = t.node(OpKind::kMul, "act", {g, sg}, {B, S, F});
  auto m = t.node(OpKind::kMul, "gate_up", {a, u}, {B, S, F});
  auto d = t.node(OpKind::kMatMul, "down_proj", {m, w("down.w", {F, D}, sf)}, {B, S, D});
  t.g.outputs = {t.node(OpKind::kAdd, "mlp.residual", {x, d}, {B, S, D})};
  return t.g;
}

ir::Graph class_token_head() {
  TinyGraph t;
  auto x = t.input("x", {2, 4, 8});
  auto as_int = [&](ir::ValueId v) {
    t.g.value(v).dtype = DataType::kInt64;
    return v;
  };
  auto shape = as_int(t.node(OpKind::kShape, "shape", {x}, {3}));
  auto batch = as_int(t.node(OpKind::kGather, "batch", {shape, t.constant("i0", scalar_index(0, DataType::kInt64))}, {}));
  auto b1 = as_int(t.node(OpKind::kUnsqueeze, "batch1", {batch, t.constant("ax0", ints({0}))}, {1}));
  auto eshape = as_int(t.node(OpKind::kConcat, "eshape", {b1, t.constant("rest", ints({1, 8}))}, {3},
                              {{"axis", Attribute::of_int(0)}}));
  auto cls = t.node(OpKind::kExpand, "expand_cls", {t.constant("cls", nonzero({1, 1, 8}, 50)), eshape}, {2, 1, 8});
  auto cat = t.node(OpKind::kConcat, "cat", {cls, x}, {2, 5, 8}, {{"axis", Attribute::of_int(1)}});
  auto ln = t.node(OpKind::kLayerNormalization, "ln", {cat, t.constant("g", nonzero({8}, 51))}, {2, 5, 8},
                   {{"axis", Attribute::of_int(-1)}});
  auto first = t.node(OpKind::kGather, "first", {ln, t.constant("i1", scalar_index(0, DataType::kInt64))}, {2, 8},
                      {{"axis", Attribute::of_int(1)}});
  auto head = t.node(OpKind::kMatMul, "head", {first, t.constant("w", nonzero({8, 3}, 52))}, {2, 3});
  auto rshape = as_int(t.node(OpKind::kConcat, "rshape", {b1, t.constant("m1", ints({-1}))}, {2},
                              {{"axis", Attribute::of_int(0)}}));
  auto flat = t.node(OpKind::kReshape, "flat", {cat, rshape}, {2, 40});
  t.g.outputs = {head, flat};
  return t.g;
}

OpCase batched_matmul_case(int variant) {
  TinyGraph t;
  const Shape xs = variant == 3 ? Shape{3, 5, 8} : Shape{2, 3, 5, 8};
  auto x = t.input("x", xs);
  ir::ValueId y;
  if (variant == 0) {  // equal batches: x · xᵀ (both activations), as attention's Q·Kᵀ
    auto kt = t.node(OpKind::kTranspose, "kt", {x}, {2, 3, 8, 5}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    y = t.node(OpKind::kMatMul, "qk", {x, kt}, {2, 3, 5, 5});
  } else if (variant == 1) {  // A shared (constant 2-D) times a batched activation
    auto kt = t.node(OpKind::kTranspose, "kt", {x}, {2, 3, 8, 5}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
    y = t.node(OpKind::kMatMul, "amm", {t.constant("a", nonzero({4, 8}, 21)), kt}, {2, 3, 4, 5});
  } else if (variant == 2) {  // B shared: a 2-D activation (folded into M)
    auto g0 = t.node(OpKind::kGather, "g0", {x, t.constant("i0", scalar_index(0, DataType::kInt64))}, {3, 5, 8});
    auto g1 = t.node(OpKind::kGather, "g1", {g0, t.constant("i1", scalar_index(1, DataType::kInt64))}, {5, 8});
    auto bt = t.node(OpKind::kTranspose, "bt", {g1}, {8, 5});
    y = t.node(OpKind::kMatMul, "bmm", {x, bt}, {2, 3, 5, 5});
  } else {  // constant rank-3 B with a rank-3 activation (equal batches)
    y = t.node(OpKind::kMatMul, "cmm", {x, t.constant("b", nonzero({3, 8, 6}, 24))}, {3, 5, 6});
  }
  t.g.outputs = {y};
  return {t.g, {nonzero(xs, static_cast<uint32_t>(20 + 2 * variant + (variant > 0)))}};
}

ir::Graph embedding_graph(DataType ids_dtype) {
  TinyGraph t;
  auto ids = int_input(t, "input_ids", {kBatch, kSeq}, ids_dtype);
  auto table = t.constant("table", random_tensor({kVocab, kHidden}, 11));
  auto emb = t.node(OpKind::kGather, "embed", {table, ids}, {kBatch, kSeq, kHidden});
  auto scale = t.constant("ln_scale", random_tensor({kHidden}, 12, 0.5f, 1.5f));
  auto bias = t.constant("ln_bias", random_tensor({kHidden}, 13));
  auto ln = t.node(OpKind::kLayerNormalization, "ln", {emb, scale, bias}, {kBatch, kSeq, kHidden},
                   {{"axis", Attribute::of_int(-1)}});
  t.g.outputs = {ln};
  return t.g;
}

ir::Graph mask_graph() {
  TinyGraph t;
  auto x = t.input("scores", {kBatch, 4, kSeq, kSeq});
  auto mask = int_input(t, "attention_mask", {kBatch, kSeq}, DataType::kInt64);
  auto un = t.node(OpKind::kUnsqueeze, "unsqueeze", {mask, t.constant("axes", ints({1, 2}))}, {kBatch, 1, 1, kSeq});
  t.g.value(un).dtype = DataType::kInt64;
  auto cast = t.node(OpKind::kCast, "cast", {un}, {kBatch, 1, 1, kSeq}, {{"to", Attribute::of_int(int64_t{1})}});  // FLOAT
  auto sub = t.node(OpKind::kSub, "sub", {t.constant("one", scalar_f(1.f)), cast}, {kBatch, 1, 1, kSeq});
  auto mul = t.node(OpKind::kMul, "mul", {sub, t.constant("big", scalar_f(-10000.f))}, {kBatch, 1, 1, kSeq});
  auto add = t.node(OpKind::kAdd, "add", {x, mul}, {kBatch, 4, kSeq, kSeq});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {add}, {kBatch, 4, kSeq, kSeq}, {{"axis", Attribute::of_int(-1)}});
  t.g.outputs = {sm};
  return t.g;
}

}  // namespace kiln::testing::op_table
