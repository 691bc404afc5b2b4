// Attention's head_layout "bshd" and passes::fold_attention_transposes (docs/decisions/0065):
// the exporters' head Transposes (perm 0,2,1,3) around an Attention fold into the layer, and the
// CPU reference kernel reading Q/K/V and writing the output as [B, S, H, D] gives what the
// unfolded graph gives (differential: random data, max|Δ| <= 1e-5 max|y|) — for MHA, GQA with
// Sq != Sk and Dv != D, additive and bool masks, causal. Near misses keep today's form; the shape
// rule and the kernel refuse an unknown head_layout naming the node.
#include "ir/shape_inference.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

const std::vector<int64_t> kSwap = {0, 2, 1, 3};

Shape swapped(Shape s) {
  std::swap(s[1], s[2]);
  return s;
}

struct Case {
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  enum { kNone, kAdd, kBool } mask = kNone;
};

// Q/K/V inputs [B, S, H, D] -> Transpose(0,2,1,3) -> Attention -> Transpose(0,2,1,3): the graph
// and its inputs. variant: 0 as exported; 1 the output is also read by a second layer (the
// Attention's [B, H, S, D] output is needed); 2 K comes in as [B, H, S, D] (no Transpose);
// 3 V comes in as [B, S, Dv, H] through perm 0,3,1,2 (the right shape by another perm); 4 the
// Q Transpose's output is also a graph output.
struct Built {
  ir::Graph g;
  std::vector<Tensor> inputs;
  ir::ValueId q, k, v;
};

Built build(const Case& c, int variant, uint32_t seed) {
  TinyGraph t;
  const Shape qh = {c.b, c.hq, c.sq, c.d}, kh = {c.b, c.hkv, c.sk, c.d}, vh = {c.b, c.hkv, c.sk, c.dv};
  const Shape oh = {c.b, c.hq, c.sq, c.dv};
  Built r;
  r.q = t.input("q", swapped(qh));
  r.k = t.input("k", variant == 2 ? kh : swapped(kh));
  r.v = t.input("v", variant == 3 ? Shape{c.b, c.sk, c.dv, c.hkv} : swapped(vh));
  r.inputs = {random_tensor(swapped(qh), seed, -2.f, 2.f), random_tensor(variant == 2 ? kh : swapped(kh), seed + 1, -2.f, 2.f),
              random_tensor(variant == 3 ? Shape{c.b, c.sk, c.dv, c.hkv} : swapped(vh), seed + 2)};
  auto q = t.node(OpKind::kTranspose, "q_heads", {r.q}, qh, {{"perm", ir::Attribute::of_ints(kSwap)}});
  auto k = variant == 2 ? r.k : t.node(OpKind::kTranspose, "k_heads", {r.k}, kh, {{"perm", ir::Attribute::of_ints(kSwap)}});
  auto v = t.node(OpKind::kTranspose, "v_heads", {r.v}, vh,
                  {{"perm", ir::Attribute::of_ints(variant == 3 ? std::vector<int64_t>{0, 3, 1, 2} : kSwap)}});
  std::vector<ir::ValueId> ins = {q, k, v};
  if (c.mask == Case::kAdd) {
    ins.push_back(t.input("mask", {c.b, 1, 1, c.sk}));
    Tensor m = random_tensor({c.b, 1, 1, c.sk}, seed + 3, -3.f, 0.f);
    m.data<float>()[c.sk - 1] = -1e4f;  // one padded key
    r.inputs.push_back(m);
  } else if (c.mask == Case::kBool) {
    Tensor m(DataType::kBool, {c.b, 1, c.sq, c.sk});
    auto* p = static_cast<uint8_t*>(m.raw());
    for (int64_t i = 0; i < m.numel(); ++i) p[i] = (i * 7 + 3) % 5 != 0;
    for (int64_t j = 0; j < c.sk; ++j) p[c.sk + j] = 0;  // query 1 of batch 0 sees no key: zeros
    ins.push_back(t.constant("keep", m));
  }
  std::map<std::string, ir::Attribute> attrs = {{"scale", ir::Attribute::of_float(0.3f)}};
  if (c.causal) attrs["is_causal"] = ir::Attribute::of_int(1);
  auto y = t.node(OpKind::kAttention, "attn", ins, oh, attrs);
  auto out = t.node(OpKind::kTranspose, "o_heads", {y}, swapped(oh), {{"perm", ir::Attribute::of_ints(kSwap)}});
  t.g.outputs = {out};
  if (variant == 1) t.g.outputs.push_back(t.node(OpKind::kRelu, "other_reader", {y}, oh));
  if (variant == 4) t.g.outputs.push_back(q);
  r.g = t.g;
  return r;
}

const ir::Node* attention_of(const ir::Graph& g) {
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == OpKind::kAttention) return &n;
  return nullptr;
}

TEST(AttentionLayout, HeadTransposesFoldIntoBshdWithTheSameOutputs) {
  const std::vector<Case> cases = {
      {2, 4, 4, 8, 8, 16, 16},
      {2, 8, 2, 5, 9, 16, 12, false, Case::kAdd},  // GQA, Sq != Sk, Dv != D, padding mask
      {1, 4, 2, 6, 10, 8, 8, true},                // causal, Sq < Sk (bottom-right)
      {2, 4, 4, 7, 7, 8, 4, false, Case::kBool},   // bool mask with a row that sees no key
      {1, 2, 2, 9, 4, 8, 8, true, Case::kAdd},     // causal Sq > Sk: rows with no key
  };
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "case b" << c.b << " hq" << c.hq << " hkv" << c.hkv << " sq" << c.sq << " sk" << c.sk);
    const Built b = build(c, 0, seed += 10);
    ir::Graph opt = check_pass(b.g, passes::fold_attention_transposes, b.inputs);
    EXPECT_EQ(count_op(opt, OpKind::kTranspose), 0);
    EXPECT_EQ(passes::live_layers(opt), 1);
    const ir::Node* a = attention_of(opt);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->attr_string("head_layout", ""), "bshd");
    EXPECT_EQ(a->inputs[0], b.q);
    EXPECT_EQ(a->inputs[1], b.k);
    EXPECT_EQ(a->inputs[2], b.v);
    EXPECT_EQ(a->outputs[0], opt.outputs[0]);
    EXPECT_FLOAT_EQ(a->attr_float("scale", 0), 0.3f);
    EXPECT_EQ(a->origin.size(), 5u);  // the Attention and the four Transposes it stands for
    // The shape rule agrees with the declared [B, Sq, Hq, Dv] output.
    ir::Graph inferred = opt;
    for (auto& v : inferred.values)
      if (!v.constant && std::find(inferred.inputs.begin(), inferred.inputs.end(), v.id) == inferred.inputs.end())
        v.shape.reset();
    ASSERT_TRUE(ir::infer_shapes(inferred).ok());
    EXPECT_EQ(inferred.value(inferred.outputs[0]).shape, sym({c.b, c.sq, c.hq, c.dv}));
  }
}

TEST(AttentionLayout, NearMissesKeepTodaysForm) {
  const Case c{1, 4, 2, 5, 6, 8, 8};
  for (int variant = 1; variant <= 4; ++variant) {
    SCOPED_TRACE(variant);
    const Built b = build(c, variant, 100 + static_cast<uint32_t>(variant));
    const int transposes = count_op(b.g, OpKind::kTranspose);
    ir::Graph opt = check_pass(b.g, passes::fold_attention_transposes, b.inputs);
    EXPECT_EQ(count_op(opt, OpKind::kTranspose), transposes);
    const ir::Node* a = attention_of(opt);
    ASSERT_NE(a, nullptr);
    EXPECT_FALSE(a->has_attr("head_layout"));
  }
}

// A folded layer is not folded again (its inputs are no longer Transposes of that perm, and the
// pass leaves "bshd" layers alone).
TEST(AttentionLayout, FoldsOnce) {
  const Built b = build({1, 2, 2, 4, 4, 8, 8}, 0, 300);
  ir::Graph once = b.g;
  ASSERT_TRUE(passes::fold_attention_transposes(once, reference_pass_options()).ok());
  ASSERT_TRUE(once.topo_sort().ok());
  ir::Graph twice = check_pass(once, passes::fold_attention_transposes, b.inputs);
  EXPECT_EQ(passes::live_layers(twice), 1);
  EXPECT_EQ(attention_of(twice)->attr_string("head_layout", ""), "bshd");
}

// Rotary embeddings applied after the head transposes (Llama, Qwen2): x·cos + rotate_half(x)·sin
// with rotate_half(x) = Concat(-x[..., D/2:], x[..., :D/2]) on Q and K. The region between each
// Transpose and the Attention is taken along (cos / sin transposed in place); variant 1 gives sin
// as a graph input (a run-time value, as under a dynamic profile: folded, sin through one new
// Transpose shared by Q and K), variant 2 cos of rank 2 (it would broadcast differently after the
// swap: not folded), variant 3 a RoPE value also read outside (not folded).
Built rope(int variant, uint32_t seed) {
  TinyGraph t;
  const int64_t B = 2, H = 4, HKV = 2, S = 6, D = 8;
  Built r;
  r.q = t.input("q", {B, S, H, D});
  r.k = t.input("k", {B, S, HKV, D});
  r.v = t.input("v", {B, S, HKV, D});
  r.inputs = {random_tensor({B, S, H, D}, seed, -2.f, 2.f), random_tensor({B, S, HKV, D}, seed + 1, -2.f, 2.f),
              random_tensor({B, S, HKV, D}, seed + 2)};
  const Shape cs = variant == 2 ? Shape{S, D} : Shape{1, 1, S, D};
  auto cos = t.constant("cos", random_tensor(cs, seed + 3));
  ir::ValueId sin;
  if (variant == 1) {
    sin = t.input("sin", {1, 1, S, D});
    r.inputs.push_back(random_tensor({1, 1, S, D}, seed + 4));
  } else {
    sin = t.constant("sin", random_tensor({1, 1, S, D}, seed + 4));
  }
  auto i64 = [&](const std::string& name, int64_t v) {
    Tensor x(DataType::kInt64, {1});
    x.data<int64_t>()[0] = v;
    return t.constant(name, x);
  };
  auto apply = [&](const std::string& p, ir::ValueId x, int64_t h) {
    const Shape full = {B, h, S, D}, half = {B, h, S, D / 2};
    auto a = t.node(OpKind::kMul, p + "_cos", {x, cos}, full);
    auto lo = t.node(OpKind::kSlice, p + "_lo", {x, i64(p + "_s0", 0), i64(p + "_e0", D / 2), i64(p + "_ax0", -1)}, half);
    auto hi = t.node(OpKind::kSlice, p + "_hi", {x, i64(p + "_s1", D / 2), i64(p + "_e1", D), i64(p + "_ax1", 3)}, half);
    auto neg = t.node(OpKind::kNeg, p + "_neg", {hi}, half);
    auto rot = t.node(OpKind::kConcat, p + "_rot", {neg, lo}, full, {{"axis", ir::Attribute::of_int(-1)}});
    auto b = t.node(OpKind::kMul, p + "_sin", {rot, sin}, full);
    return t.node(OpKind::kAdd, p + "_rope", {a, b}, full);
  };
  auto q = apply("q", t.node(OpKind::kTranspose, "q_heads", {r.q}, {B, H, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}), H);
  auto k = apply("k", t.node(OpKind::kTranspose, "k_heads", {r.k}, {B, HKV, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}), HKV);
  auto v = t.node(OpKind::kTranspose, "v_heads", {r.v}, {B, HKV, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}});
  auto y = t.node(OpKind::kAttention, "attn", {q, k, v}, {B, H, S, D}, {{"is_causal", ir::Attribute::of_int(1)}});
  t.g.outputs = {t.node(OpKind::kTranspose, "o_heads", {y}, {B, S, H, D}, {{"perm", ir::Attribute::of_ints(kSwap)}})};
  if (variant == 3) t.g.outputs.push_back(k);
  r.g = t.g;
  return r;
}

TEST(AttentionLayout, RotaryEmbeddingBetweenTransposeAndAttentionIsTakenAlong) {
  const Built b = rope(0, 500);
  ir::Graph opt = check_pass(b.g, passes::fold_attention_transposes, b.inputs);
  EXPECT_EQ(count_op(opt, OpKind::kTranspose), 0);
  const ir::Node* a = attention_of(opt);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->attr_string("head_layout", ""), "bshd");
  EXPECT_EQ(a->inputs[2], b.v);
  // The rotation now runs on [B, S, H, D]: its output shapes have the axes swapped, and it reads
  // cos / sin as [1, S, 1, D] constants.
  EXPECT_EQ(opt.value(a->inputs[0]).shape, sym({2, 6, 4, 8}));
  EXPECT_EQ(opt.value(a->inputs[1]).shape, sym({2, 6, 2, 8}));
  int swapped_constants = 0;
  for (const ir::Node& n : opt.nodes)
    if (!n.removed && n.op == OpKind::kMul)
      for (ir::ValueId x : n.inputs)
        if (opt.value(x).constant) {
          EXPECT_EQ(opt.value(x).constant->shape(), (Shape{1, 6, 1, 8})) << n.name;
          ++swapped_constants;
        }
  EXPECT_EQ(swapped_constants, 4);
  {
    const Built m = rope(1, 511);
    ir::Graph o = check_pass(m.g, passes::fold_attention_transposes, m.inputs);
    EXPECT_EQ(attention_of(o)->attr_string("head_layout", ""), "bshd");
    EXPECT_EQ(count_op(o, OpKind::kTranspose), 1);  // sin's, read by both rotations
    const ir::Node& t = [&]() -> const ir::Node& {
      for (const ir::Node& n : o.nodes)
        if (!n.removed && n.op == OpKind::kTranspose) return n;
      return o.nodes[0];
    }();
    EXPECT_EQ(o.value(t.inputs[0]).name, "sin");
  }
  for (int variant = 2; variant <= 3; ++variant) {
    SCOPED_TRACE(variant);
    const Built m = rope(variant, 510 + static_cast<uint32_t>(variant));
    ir::Graph o = check_pass(m.g, passes::fold_attention_transposes, m.inputs);
    EXPECT_EQ(count_op(o, OpKind::kTranspose), 4);
    EXPECT_FALSE(attention_of(o)->has_attr("head_layout"));
  }
}

// The fused Rope layer (ops.def; docs/decisions/0067; what ONNX RotaryEmbedding-23 with
// position_ids imports as) between each head Transpose and the Attention: taken along, its
// head_axis 1 -> 2 (positions [B, S] index both forms alike); the result is the unfolded graph's.
TEST(AttentionLayout, FusedRopeBetweenTransposeAndAttentionIsTakenAlong) {
  TinyGraph t;
  const int64_t B = 2, H = 4, HKV = 2, S = 6, D = 8;
  const ir::ValueId q_in = t.input("q", {B, S, H, D}), k_in = t.input("k", {B, S, HKV, D}), v_in = t.input("v", {B, S, HKV, D});
  const ir::ValueId pos = t.g.add_value("positions", DataType::kInt64);
  t.g.value(pos).shape = sym({B, S});
  t.g.inputs.push_back(pos);
  Tensor p(DataType::kInt64, {B, S});
  for (int64_t i = 0; i < B * S; ++i) p.data<int64_t>()[i] = (i * 7 + 3) % 50;
  const ir::ValueId cos = t.constant("cos", random_tensor({50, D / 2}, 541));
  const ir::ValueId sin = t.constant("sin", random_tensor({50, D / 2}, 542));
  auto heads = [&](const std::string& n, ir::ValueId x, int64_t h) {
    return t.node(OpKind::kTranspose, n, {x}, {B, h, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}});
  };
  auto rope = [&](const std::string& n, ir::ValueId x, int64_t h) {
    return t.node(OpKind::kRope, n, {x, pos, cos, sin}, {B, h, S, D}, {{"head_axis", ir::Attribute::of_int(1)}});
  };
  const ir::ValueId q = rope("q_rope", heads("q_heads", q_in, H), H);
  const ir::ValueId k = rope("k_rope", heads("k_heads", k_in, HKV), HKV);
  const ir::ValueId y = t.node(OpKind::kAttention, "attn", {q, k, heads("v_heads", v_in, HKV)}, {B, H, S, D},
                               {{"is_causal", ir::Attribute::of_int(1)}});
  t.g.outputs = {t.node(OpKind::kTranspose, "o_heads", {y}, {B, S, H, D}, {{"perm", ir::Attribute::of_ints(kSwap)}})};
  const std::vector<Tensor> inputs = {random_tensor({B, S, H, D}, 543, -2.f, 2.f), random_tensor({B, S, HKV, D}, 544, -2.f, 2.f),
                                      random_tensor({B, S, HKV, D}, 545), p};
  ir::Graph opt = check_pass(t.g, passes::fold_attention_transposes, inputs);
  EXPECT_EQ(count_op(opt, OpKind::kTranspose), 0);
  EXPECT_EQ(attention_of(opt)->attr_string("head_layout", ""), "bshd");
  int ropes = 0;
  for (const ir::Node& n : opt.nodes)
    if (!n.removed && n.op == OpKind::kRope) {
      ++ropes;
      EXPECT_EQ(n.attr_int("head_axis", 0), 2) << n.name;
      EXPECT_EQ(opt.value(n.outputs[0]).shape, sym({B, S, n.name == "q_rope" ? H : HKV, D})) << n.name;
    }
  EXPECT_EQ(ropes, 2);
}

// torch's dynamo exporter with grouped-query attention: K^T as Reshape(Transpose(Reshape(
// Expand(Unsqueeze(K)) [B, Hkv, n, S, D] -> [B*Hq, S, D]), 0,2,1) -> [B, Hq, D, S]) and V as HF's
// repeat_kv. fuse_attention reads K and V without their repeats (a new 4-D view of the 5-D
// Expand, then taken apart, docs/decisions/0065), and fold_attention_transposes then folds the
// head Transposes: no Transpose, Expand or Reshape of the heads is left.
TEST(AttentionLayout, DynamoGqaKeyThroughThreeDimsLosesItsRepeatAndTransposes) {
  TinyGraph t;
  const int64_t B = 2, H = 4, HKV = 2, S = 5, D = 8, n = H / HKV;
  auto q0 = t.input("q", {B, S, H, D}), k0 = t.input("k", {B, S, HKV, D}), v0 = t.input("v", {B, S, HKV, D});
  auto heads = [&](const std::string& p, ir::ValueId x, int64_t h) {
    return t.node(OpKind::kTranspose, p + "_heads", {x}, {B, h, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}});
  };
  auto repeat = [&](const std::string& p, ir::ValueId x) {
    auto u = t.node(OpKind::kUnsqueeze, p + "_unsq", {x, t.ints(p + "_axis", {2})}, {B, HKV, 1, S, D});
    return t.node(OpKind::kExpand, p + "_expand", {u, t.ints(p + "_to", {B, HKV, n, S, D})}, {B, HKV, n, S, D});
  };
  auto q = heads("q", q0, H);
  auto ke = repeat("k", heads("k", k0, HKV));
  auto k3 = t.node(OpKind::kReshape, "k_3d", {ke, t.ints("k_3d_shape", {B * H, S, D})}, {B * H, S, D});
  auto kt3 = t.node(OpKind::kTranspose, "k_t3", {k3}, {B * H, D, S}, {{"perm", ir::Attribute::of_ints({0, 2, 1})}});
  auto kt = t.node(OpKind::kReshape, "k_t", {kt3, t.ints("k_t_shape", {B, H, D, S})}, {B, H, D, S});
  auto ve = repeat("v", heads("v", v0, HKV));
  auto v = t.node(OpKind::kReshape, "v_rep", {ve, t.ints("v_rep_shape", {B, H, S, D})}, {B, H, S, D});
  auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {B, H, S, S});
  s = t.node(OpKind::kMul, "scale", {s, t.constant("c", Tensor::scalar(DataType::kFloat32, 0.35f))}, {B, H, S, S});
  auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {B, H, S, S}, {{"axis", ir::Attribute::of_int(-1)}});
  auto y = t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, D});
  t.g.outputs = {t.node(OpKind::kTranspose, "o_heads", {y}, {B, S, H, D}, {{"perm", ir::Attribute::of_ints(kSwap)}})};
  const std::vector<Tensor> in = {random_tensor({B, S, H, D}, 700, -2.f, 2.f), random_tensor({B, S, HKV, D}, 701, -2.f, 2.f),
                                  random_tensor({B, S, HKV, D}, 702)};
  ir::Graph fused = check_pass(t.g, passes::fuse_attention, in);
  const ir::Node* a = attention_of(fused);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(fused.value(a->inputs[1]).shape, sym({B, HKV, S, D}));  // K without its repeat
  EXPECT_EQ(fused.value(a->inputs[2]).shape, sym({B, HKV, S, D}));  // V too
  ASSERT_TRUE(passes::eliminate_dead_layers(fused, reference_pass_options()).ok());
  ASSERT_TRUE(fused.topo_sort().ok());
  ir::Graph folded = check_pass(fused, passes::fold_attention_transposes, in);
  EXPECT_EQ(passes::live_layers(folded), 1);
  EXPECT_EQ(attention_of(folded)->attr_string("head_layout", ""), "bshd");
}

// The same exporter with a dynamic batch ("batch", as a min != max profile leaves it) and no
// GQA: K^T through 3-D matches by the dims' names (the 3-D view's leading dim is anonymous), and
// the Shape(K) its reshape arithmetic read — dead once fuse_attention took the reshapes — does
// not keep K's Transpose alive: one layer is left.
TEST(AttentionLayout, DynamicBatchKeyThroughThreeDimsFolds) {
  TinyGraph t;
  const int64_t B = 2, H = 4, S = 5, D = 8;
  const ir::Dim batch = ir::Dim::sym("batch");
  auto named = [&](ir::ValueId v, ir::SymShape s) {
    t.g.value(v).shape = std::move(s);
    return v;
  };
  auto K = [](int64_t v) { return ir::Dim::known(v); };
  auto q0 = named(t.input("q", {B, S, H, D}), {batch, K(S), K(H), K(D)});
  auto k0 = named(t.input("k", {B, S, H, D}), {batch, K(S), K(H), K(D)});
  auto v0 = named(t.input("v", {B, S, H, D}), {batch, K(S), K(H), K(D)});
  auto heads = [&](const std::string& p, ir::ValueId x) {
    return named(t.node(OpKind::kTranspose, p + "_heads", {x}, {B, H, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}),
                 {batch, K(H), K(S), K(D)});
  };
  auto q = heads("q", q0), k = heads("k", k0), v = heads("v", v0);
  named(t.node(OpKind::kShape, "k_shape", {k}, {4}), {K(4)});  // read by nothing: dead
  auto k3 = named(t.node(OpKind::kReshape, "k_3d", {k, t.ints("k_3d_shape", {-1, S, D})}, {B * H, S, D}),
                  {ir::Dim{}, K(S), K(D)});
  auto kt3 = named(t.node(OpKind::kTranspose, "k_t3", {k3}, {B * H, D, S}, {{"perm", ir::Attribute::of_ints({0, 2, 1})}}),
                   {ir::Dim{}, K(D), K(S)});
  auto kt = named(t.node(OpKind::kReshape, "k_t", {kt3, t.ints("k_t_shape", {-1, H, D, S})}, {B, H, D, S}),
                  {batch, K(H), K(D), K(S)});
  auto sc = named(t.node(OpKind::kMatMul, "qk", {q, kt}, {B, H, S, S}), {batch, K(H), K(S), K(S)});
  auto p = named(t.node(OpKind::kSoftmax, "softmax", {sc}, {B, H, S, S}, {{"axis", ir::Attribute::of_int(-1)}}),
                 {batch, K(H), K(S), K(S)});
  auto y = named(t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, D}), {batch, K(H), K(S), K(D)});
  t.g.outputs = {named(t.node(OpKind::kTranspose, "o_heads", {y}, {B, S, H, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}),
                       {batch, K(S), K(H), K(D)})};
  const std::vector<Tensor> in = {random_tensor({B, S, H, D}, 800, -2.f, 2.f), random_tensor({B, S, H, D}, 801, -2.f, 2.f),
                                  random_tensor({B, S, H, D}, 802)};
  ir::Graph fused = check_pass(t.g, passes::fuse_attention, in);
  const ir::Node* a = attention_of(fused);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->inputs[1], k);  // K read directly: no Transpose added for K^T
  ir::Graph folded = check_pass(fused, passes::fold_attention_transposes, in);
  EXPECT_EQ(passes::live_layers(folded), 1);
  EXPECT_EQ(attention_of(folded)->attr_string("head_layout", ""), "bshd");
}

// Dynamic batch and GQA together: K^T's last Reshape takes its shape from Shape(X) of the 5-D
// repeat X (the exporter's arithmetic), a reader of X alive until the fusion takes that Reshape.
// fuse_attention drops the repeats of K and V once it is dead, and the fold leaves one layer.
TEST(AttentionLayout, DynamicBatchGqaLosesItsRepeatsOnceTheShapeArithmeticIsDead) {
  TinyGraph t;
  const int64_t B = 2, H = 4, HKV = 2, S = 5, D = 8, n = H / HKV;
  const ir::Dim batch = ir::Dim::sym("batch");
  auto K = [](int64_t v) { return ir::Dim::known(v); };
  auto named = [&](ir::ValueId v, ir::SymShape s) {
    t.g.value(v).shape = std::move(s);
    return v;
  };
  auto int_node = [&](OpKind op, const std::string& name, std::vector<ir::ValueId> in, int64_t len,
                      std::map<std::string, ir::Attribute> attrs = {}) {
    auto v = t.node(op, name, std::move(in), {len}, std::move(attrs));
    t.g.value(v).dtype = DataType::kInt64;
    return v;
  };
  auto q0 = named(t.input("q", {B, S, H, D}), {batch, K(S), K(H), K(D)});
  auto k0 = named(t.input("k", {B, S, HKV, D}), {batch, K(S), K(HKV), K(D)});
  auto v0 = named(t.input("v", {B, S, HKV, D}), {batch, K(S), K(HKV), K(D)});
  auto heads = [&](const std::string& p, ir::ValueId x, int64_t h) {
    return named(t.node(OpKind::kTranspose, p + "_heads", {x}, {B, h, S, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}),
                 {batch, K(h), K(S), K(D)});
  };
  auto repeat = [&](const std::string& p, ir::ValueId x) {
    auto u = named(t.node(OpKind::kUnsqueeze, p + "_unsq", {x, t.ints(p + "_axis", {2})}, {B, HKV, 1, S, D}),
                   {batch, K(HKV), K(1), K(S), K(D)});
    return named(t.node(OpKind::kExpand, p + "_expand", {u, t.ints(p + "_to", {1, HKV, n, S, D})}, {B, HKV, n, S, D}),
                 {batch, K(HKV), K(n), K(S), K(D)});
  };
  auto q = heads("q", q0, H);
  auto ke = repeat("k", heads("k", k0, HKV));
  auto k3 = named(t.node(OpKind::kReshape, "k_3d", {ke, t.ints("k_3d_shape", {-1, S, D})}, {B * H, S, D}), {ir::Dim{}, K(S), K(D)});
  auto kt3 = named(t.node(OpKind::kTranspose, "k_t3", {k3}, {B * H, D, S}, {{"perm", ir::Attribute::of_ints({0, 2, 1})}}),
                   {ir::Dim{}, K(D), K(S)});
  auto shp = int_node(OpKind::kShape, "k_shape", {ke}, 5);
  auto b = int_node(OpKind::kSlice, "k_batch", {shp, t.ints("s0", {0}), t.ints("e0", {1})}, 1);
  auto kt_shape = int_node(OpKind::kConcat, "k_t_shape", {b, t.ints("hds", {H, D, S})}, 4, {{"axis", ir::Attribute::of_int(0)}});
  auto kt = named(t.node(OpKind::kReshape, "k_t", {kt3, kt_shape}, {B, H, D, S}), {batch, K(H), K(D), K(S)});
  auto ve = repeat("v", heads("v", v0, HKV));
  auto v = named(t.node(OpKind::kReshape, "v_rep", {ve, t.ints("v_rep_shape", {-1, H, S, D})}, {B, H, S, D}),
                 {batch, K(H), K(S), K(D)});
  auto sc = named(t.node(OpKind::kMatMul, "qk", {q, kt}, {B, H, S, S}), {batch, K(H), K(S), K(S)});
  auto p = named(t.node(OpKind::kSoftmax, "softmax", {sc}, {B, H, S, S}, {{"axis", ir::Attribute::of_int(-1)}}),
                 {batch, K(H), K(S), K(S)});
  auto y = named(t.node(OpKind::kMatMul, "pv", {p, v}, {B, H, S, D}), {batch, K(H), K(S), K(D)});
  t.g.outputs = {named(t.node(OpKind::kTranspose, "o_heads", {y}, {B, S, H, D}, {{"perm", ir::Attribute::of_ints(kSwap)}}),
                       {batch, K(S), K(H), K(D)})};
  const std::vector<Tensor> in = {random_tensor({B, S, H, D}, 900, -2.f, 2.f), random_tensor({B, S, HKV, D}, 901, -2.f, 2.f),
                                  random_tensor({B, S, HKV, D}, 902)};
  ir::Graph fused = check_pass(t.g, passes::fuse_attention, in);
  const ir::Node* a = attention_of(fused);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(fused.value(a->inputs[1]).shape, (ir::SymShape{batch, K(HKV), K(S), K(D)}));  // K without its repeat
  EXPECT_EQ(fused.value(a->inputs[2]).shape, (ir::SymShape{batch, K(HKV), K(S), K(D)}));  // V too
  EXPECT_EQ(count_op(fused, OpKind::kExpand), 0);
  ir::Graph folded = check_pass(fused, passes::fold_attention_transposes, in);
  EXPECT_EQ(passes::live_layers(folded), 1);
}

TEST(AttentionLayout, UnknownHeadLayoutIsRefusedNamingTheNode) {
  TinyGraph t;
  auto q = t.input("q", {1, 2, 4, 8});
  t.g.outputs = {t.node(OpKind::kAttention, "attn_bad_layout", {q, q, q}, {1, 2, 4, 8},
                        {{"head_layout", ir::Attribute::of_string("bsdh")}})};
  auto r = interpret(t.g, {random_tensor({1, 2, 4, 8}, 1)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attn_bad_layout"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("bsdh"), std::string::npos) << r.status().to_string();
  ir::Graph g = t.g;
  g.value(g.outputs[0]).shape.reset();
  Status s = ir::infer_shapes(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attn_bad_layout"), std::string::npos) << s.to_string();
}

// A bshd layer whose K does not fit Q (head sizes) is refused with the layout's expected shapes.
TEST(AttentionLayout, BshdKernelChecksShapesInItsLayout) {
  TinyGraph t;
  auto q = t.input("q", {1, 4, 2, 8}), k = t.input("k", {1, 6, 2, 4}), v = t.input("v", {1, 6, 2, 8});
  t.g.outputs = {t.node(OpKind::kAttention, "attn", {q, k, v}, {1, 4, 2, 8}, {{"head_layout", ir::Attribute::of_string("bshd")}})};
  auto r = interpret(t.g, {random_tensor({1, 4, 2, 8}, 1), random_tensor({1, 6, 2, 4}, 2), random_tensor({1, 6, 2, 8}, 3)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("[*, Sk, Hkv, D]"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace kiln::testing
