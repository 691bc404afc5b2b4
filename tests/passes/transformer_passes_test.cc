// Differential tests of the transformer passes (fuse_attention, fuse_rmsnorm, fuse_matmul_add for
// rank > 2, fuse_horizontal_gemm, shape folding in fold_constants): exporters' decompositions
// become the fused layers with the same outputs (random non-zero data, max|Δ| <= 1e-5 max|y|),
// near misses stay as they are; then the fused layers survive a plan round trip and run.
#include "builder/build_from_graph.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"
#include "plan/plan_format.h"

namespace kiln::testing {
namespace {

using ir::OpKind;

ir::ValueId scalar(TinyGraph& t, const std::string& name, float v) {
  return t.constant(name, Tensor::scalar(DataType::kFloat32, v));
}

ir::ValueId bool_value(TinyGraph& t, ir::ValueId v) {
  t.g.value(v).dtype = DataType::kBool;
  return v;
}

Tensor tril(int64_t sq, int64_t sk) {
  Tensor m(DataType::kBool, {1, 1, sq, sk});
  auto* p = static_cast<uint8_t*>(m.raw());
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) p[i * sk + j] = j <= i + sk - sq;
  return m;
}

const ir::Node& only(const ir::Graph& g, OpKind op) {
  for (const auto& n : g.nodes)
    if (!n.removed && n.op == op) return n;
  static ir::Node none;
  ADD_FAILURE() << "no " << ir::op_name(op) << " layer";
  return none;
}

// BERT-style: MatMul(Q, Transpose(K)) / sqrt(D) + mask -> Softmax -> MatMul(V).
TEST(TransformerPasses, MultiHeadAttentionWithAdditiveMaskBecomesOneLayer) {
  TinyGraph t;
  const Shape qs = {2, 4, 8, 16};
  auto q = t.input("q", qs), k = t.input("k", qs), v = t.input("v", qs), mask = t.input("mask", {2, 1, 1, 8});
  auto kt = t.node(OpKind::kTranspose, "kt", {k}, {2, 4, 16, 8}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
  auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {2, 4, 8, 8});
  s = t.node(OpKind::kDiv, "scale", {s, scalar(t, "sqrt_d", 4.f)}, {2, 4, 8, 8});
  s = t.node(OpKind::kAdd, "add_mask", {s, mask}, {2, 4, 8, 8});
  auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {2, 4, 8, 8}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, qs)};
  Tensor m = random_tensor({2, 1, 1, 8}, 5, -3.f, 0.f);
  m.data<float>()[7] = -1e9f;  // one masked-out key, as a padding mask writes it
  ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                             {random_tensor(qs, 1, -2.f, 2.f), random_tensor(qs, 2, -2.f, 2.f), random_tensor(qs, 3), m});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node& a = only(opt, OpKind::kAttention);
  ASSERT_EQ(a.inputs.size(), 4u);
  EXPECT_EQ(a.inputs[1], k);  // the Transpose was absorbed: K read directly
  EXPECT_EQ(a.inputs[3], mask);
  EXPECT_FLOAT_EQ(a.attr_float("scale", 0), 0.25f);
  EXPECT_EQ(a.attr_int("is_causal", -1), 0);
}

// torch's SDPA export: Q * sqrt(scale) and K^T * sqrt(scale), no mask.
TEST(TransformerPasses, SdpaExportScalesBothOperands) {
  TinyGraph t;
  const Shape qs = {1, 2, 6, 8};
  auto q = t.input("q", qs), k = t.input("k", qs), v = t.input("v", {1, 2, 6, 4});
  const float r = std::sqrt(1.f / std::sqrt(8.f));
  auto qsc = t.node(OpKind::kMul, "q_scale", {q, scalar(t, "r1", r)}, qs);
  auto kt = t.node(OpKind::kTranspose, "kt", {k}, {1, 2, 8, 6}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
  auto ksc = t.node(OpKind::kMul, "k_scale", {scalar(t, "r2", r), kt}, {1, 2, 8, 6});
  auto s = t.node(OpKind::kMatMul, "qk", {qsc, ksc}, {1, 2, 6, 6});
  auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {1, 2, 6, 6}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, {1, 2, 6, 4})};
  ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                             {random_tensor(qs, 11, -3.f, 3.f), random_tensor(qs, 12, -3.f, 3.f),
                              random_tensor({1, 2, 6, 4}, 13)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node& a = only(opt, OpKind::kAttention);
  EXPECT_EQ(a.inputs, (std::vector<ir::ValueId>{q, k, v}));
  EXPECT_NEAR(a.attr_float("scale", 0), 1.f / std::sqrt(8.f), 1e-6);
}

// GPT-2: Where(tril[k-q:k, :k], scores, finfo.min), here with Sq < Sk (a cached prefix).
TEST(TransformerPasses, CausalWhereMaskBecomesIsCausal) {
  for (int64_t sq : {int64_t{8}, int64_t{5}}) {
    TinyGraph t;
    const int64_t sk = 8;
    auto q = t.input("q", {2, 3, sq, 4}), k = t.input("k", {2, 3, sk, 4}), v = t.input("v", {2, 3, sk, 4});
    auto kt = t.node(OpKind::kTranspose, "kt", {k}, {2, 3, 4, sk}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
    auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {2, 3, sq, sk});
    s = t.node(OpKind::kDiv, "scale", {s, scalar(t, "c", 2.f)}, {2, 3, sq, sk});
    auto c = t.constant("causal", tril(sq, sk));
    s = t.node(OpKind::kWhere, "where", {c, s, scalar(t, "min", -3.4028235e38f)}, {2, 3, sq, sk});
    auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {2, 3, sq, sk}, {{"axis", ir::Attribute::of_int(3)}});
    t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, {2, 3, sq, 4})};
    ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                               {random_tensor({2, 3, sq, 4}, 21, -2.f, 2.f), random_tensor({2, 3, sk, 4}, 22, -2.f, 2.f),
                                random_tensor({2, 3, sk, 4}, 23)});
    EXPECT_EQ(passes::live_layers(opt), 1) << "sq " << sq;
    const ir::Node& a = only(opt, OpKind::kAttention);
    EXPECT_EQ(a.inputs.size(), 3u);
    EXPECT_EQ(a.attr_int("is_causal", 0), 1);
  }
}

// A run-time bool mask stays a mask input; a non-triangular constant is not taken as causal.
TEST(TransformerPasses, BoolMaskWhereKeepsTheMask) {
  TinyGraph t;
  const Shape qs = {1, 2, 4, 8};
  auto q = t.input("q", qs), k = t.input("k", qs), v = t.input("v", qs);
  auto keep = bool_value(t, t.input("keep", {1, 1, 4, 4}));
  auto kt = t.node(OpKind::kTranspose, "kt", {k}, {1, 2, 8, 4}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
  auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {1, 2, 4, 4});
  Tensor ninf = Tensor::scalar(DataType::kFloat32, -INFINITY);
  s = t.node(OpKind::kWhere, "where", {keep, s, t.constant("ninf", ninf)}, {1, 2, 4, 4});
  auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {1, 2, 4, 4}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, qs)};
  Tensor kv(DataType::kBool, {1, 1, 4, 4});
  auto* kp = static_cast<uint8_t*>(kv.raw());
  for (int i = 0; i < 16; ++i) kp[i] = (i * 7) % 3 != 0 || i % 4 == 0;  // every row keeps a key
  ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                             {random_tensor(qs, 31, -2.f, 2.f), random_tensor(qs, 32, -2.f, 2.f), random_tensor(qs, 33), kv});
  const ir::Node& a = only(opt, OpKind::kAttention);
  ASSERT_EQ(a.inputs.size(), 4u);
  EXPECT_EQ(a.inputs[3], keep);
  EXPECT_EQ(a.attr_int("is_causal", -1), 0);
  EXPECT_FLOAT_EQ(a.attr_float("scale", 0), 1.f);
}

// HF's mask for a model without padding (ViT, transformers 5): Where(Expand(arange(S) >= 0,
// [B, 1, S, S]), 0, finfo.min) added to the scores excludes nothing and is dropped; with one
// false element it is a real mask and stays.
TEST(TransformerPasses, MaskThatExcludesNothingIsDropped) {
  for (bool one_false : {false, true}) {
    TinyGraph t;
    const Shape qs = {2, 3, 5, 4};
    auto q = t.input("q", qs), k = t.input("k", qs), v = t.input("v", qs);
    Tensor ge(DataType::kBool, {1, 1, 1, 5});  // over the keys: one_false excludes key 2
    auto* gp = static_cast<uint8_t*>(ge.raw());
    for (int i = 0; i < 5; ++i) gp[i] = !(one_false && i == 2);
    auto keep = t.node(OpKind::kExpand, "expand", {t.constant("ge", ge), t.ints("mshape", {2, 1, 5, 5})}, {2, 1, 5, 5});
    bool_value(t, keep);
    auto add = t.node(OpKind::kWhere, "where", {keep, scalar(t, "zero", 0.f), scalar(t, "min", -3.4028235e38f)}, {2, 1, 5, 5});
    auto kt = t.node(OpKind::kTranspose, "kt", {k}, {2, 3, 4, 5}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
    auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {2, 3, 5, 5});
    s = t.node(OpKind::kMul, "scale", {s, scalar(t, "c", 0.5f)}, {2, 3, 5, 5});
    s = t.node(OpKind::kAdd, "add_mask", {s, add}, {2, 3, 5, 5});
    auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {2, 3, 5, 5}, {{"axis", ir::Attribute::of_int(-1)}});
    t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, qs)};
    ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                               {random_tensor(qs, 61, -2.f, 2.f), random_tensor(qs, 62, -2.f, 2.f), random_tensor(qs, 63)});
    const ir::Node& a = only(opt, OpKind::kAttention);
    if (one_false) {
      ASSERT_EQ(a.inputs.size(), 4u);
      EXPECT_EQ(a.inputs[3], add);
    } else {
      EXPECT_EQ(a.inputs, (std::vector<ir::ValueId>{q, k, v}));
    }
  }
}

// GQA as HF's repeat_kv writes it: Reshape(Expand(Unsqueeze(kv, 2))) for K and V; K pre-transposed
// after the repeat; the Attention reads the 2 kv heads directly.
TEST(TransformerPasses, GroupedQueryAttentionDropsTheRepeats) {
  TinyGraph t;
  const Shape qs = {2, 4, 6, 8}, kvs = {2, 2, 6, 8};
  auto q = t.input("q", qs), k = t.input("k", kvs), v = t.input("v", kvs);
  auto repeat = [&](ir::ValueId x, const std::string& p) {
    auto u = t.node(OpKind::kUnsqueeze, p + "_unsq", {x, t.ints(p + "_ax", {2})}, {2, 2, 1, 6, 8});
    auto e = t.node(OpKind::kExpand, p + "_expand", {u, t.ints(p + "_shape", {2, 2, 2, 6, 8})}, {2, 2, 2, 6, 8});
    return t.node(OpKind::kReshape, p + "_reshape", {e, t.ints(p + "_to", {2, 4, 6, 8})}, qs);
  };
  auto kr = repeat(k, "k"), vr = repeat(v, "v");
  auto kt = t.node(OpKind::kTranspose, "kt", {kr}, {2, 4, 8, 6}, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
  auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {2, 4, 6, 6});
  s = t.node(OpKind::kMul, "scale", {s, scalar(t, "c", 0.35f)}, {2, 4, 6, 6});
  auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {2, 4, 6, 6}, {{"axis", ir::Attribute::of_int(-1)}});
  t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, vr}, qs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                             {random_tensor(qs, 41, -2.f, 2.f), random_tensor(kvs, 42, -2.f, 2.f), random_tensor(kvs, 43)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  const ir::Node& a = only(opt, OpKind::kAttention);
  EXPECT_EQ(a.inputs, (std::vector<ir::ValueId>{q, k, v}));
}

// K^T that is not a Transpose (here a graph input) gets a Transpose of its own; K^T whose
// Transpose is not a last-two swap (heads split and transposed at once) is re-permuted.
TEST(TransformerPasses, PreTransposedKeys) {
  {
    TinyGraph t;
    auto q = t.input("q", {1, 2, 5, 4}), kt = t.input("kt", {1, 2, 4, 7}), v = t.input("v", {1, 2, 7, 3});
    auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {1, 2, 5, 7});
    auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {1, 2, 5, 7}, {{"axis", ir::Attribute::of_int(-1)}});
    t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, {1, 2, 5, 3})};
    ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                               {random_tensor({1, 2, 5, 4}, 51, -2.f, 2.f), random_tensor({1, 2, 4, 7}, 52, -2.f, 2.f),
                                random_tensor({1, 2, 7, 3}, 53)});
    EXPECT_EQ(count_op(opt, OpKind::kAttention), 1);
    EXPECT_EQ(count_op(opt, OpKind::kTranspose), 1);
  }
  {
    TinyGraph t;  // K as [B, S, H, D] transposed straight to [B, H, D, S] (GPT-2 after transpose cancelling)
    auto q = t.input("q", {1, 2, 5, 4}), kx = t.input("kx", {1, 5, 2, 4}), v = t.input("v", {1, 2, 5, 3});
    auto kt = t.node(OpKind::kTranspose, "kt", {kx}, {1, 2, 4, 5}, {{"perm", ir::Attribute::of_ints({0, 2, 3, 1})}});
    auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, {1, 2, 5, 5});
    auto p = t.node(OpKind::kSoftmax, "softmax", {s}, {1, 2, 5, 5}, {{"axis", ir::Attribute::of_int(-1)}});
    t.g.outputs = {t.node(OpKind::kMatMul, "pv", {p, v}, {1, 2, 5, 3})};
    ir::Graph opt = check_pass(t.g, passes::fuse_attention,
                               {random_tensor({1, 2, 5, 4}, 54, -2.f, 2.f), random_tensor({1, 5, 2, 4}, 55, -2.f, 2.f),
                                random_tensor({1, 2, 5, 3}, 56)});
    EXPECT_EQ(count_op(opt, OpKind::kAttention), 1);
    EXPECT_EQ(only(opt, OpKind::kTranspose).attr_ints("perm"), (std::vector<int64_t>{0, 2, 1, 3}));
  }
}

// Near misses: Softmax over another axis, a probability tensor read twice, a mask Add before the
// scale (which would scale the mask too) are all left alone.
TEST(TransformerPasses, AttentionNearMissesAreNotFused) {
  auto build = [](int variant) {
    TinyGraph t;
    const Shape qs = {1, 2, 4, 4};
    auto q = t.input("q", qs), k = t.input("k", qs), v = t.input("v", qs), m = t.input("m", {1, 1, 1, 4});
    auto kt = t.node(OpKind::kTranspose, "kt", {k}, qs, {{"perm", ir::Attribute::of_ints({0, 1, 3, 2})}});
    auto s = t.node(OpKind::kMatMul, "qk", {q, kt}, qs);
    if (variant == 2) s = t.node(OpKind::kAdd, "mask", {s, m}, qs);
    s = t.node(OpKind::kMul, "scale", {s, scalar(t, "c", 0.5f)}, qs);
    auto p = t.node(OpKind::kSoftmax, "softmax", {s}, qs, {{"axis", ir::Attribute::of_int(variant == 0 ? 2 : -1)}});
    auto y = t.node(OpKind::kMatMul, "pv", {p, v}, qs);
    t.g.outputs = {y};
    if (variant == 1) t.g.outputs.push_back(p);
    return t.g;
  };
  for (int variant = 0; variant < 3; ++variant) {
    const Shape qs = {1, 2, 4, 4};
    ir::Graph opt = check_pass(build(variant), passes::fuse_attention,
                               {random_tensor(qs, 61), random_tensor(qs, 62), random_tensor(qs, 63),
                                random_tensor({1, 1, 1, 4}, 64)});
    EXPECT_EQ(count_op(opt, OpKind::kAttention), 0) << "variant " << variant;
  }
}

// The kernel's errors name the node; GQA head counts that do not divide are refused.
TEST(TransformerPasses, AttentionKernelRejectsBadHeadsWithTheNodeName) {
  TinyGraph t;
  auto q = t.input("q", {1, 3, 4, 8}), k = t.input("k", {1, 2, 4, 8}), v = t.input("v", {1, 2, 4, 8});
  t.g.outputs = {t.node(OpKind::kAttention, "attn_bad", {q, k, v}, {1, 3, 4, 8})};
  auto r = interpret(t.g, {random_tensor({1, 3, 4, 8}, 1), random_tensor({1, 2, 4, 8}, 2), random_tensor({1, 2, 4, 8}, 3)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'attn_bad' (Attention)"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find("not a multiple"), std::string::npos) << r.status().to_string();
}

// float16 attention computes in float32: it matches the float32 layer within fp16 rounding.
TEST(TransformerPasses, AttentionKernelFloat16) {
  const Shape qs = {1, 2, 5, 8};
  std::vector<Tensor> in32 = {random_tensor(qs, 71, -2.f, 2.f), random_tensor(qs, 72, -2.f, 2.f), random_tensor(qs, 73)};
  auto run = [&](DataType dt) {
    TinyGraph t;
    std::vector<ir::ValueId> ins;
    for (const char* n : {"q", "k", "v"}) {
      ins.push_back(t.input(n, qs));
      t.g.value(ins.back()).dtype = dt;
    }
    auto y = t.node(OpKind::kAttention, "attn", ins, qs, {{"is_causal", ir::Attribute::of_int(1)}});
    t.g.value(y).dtype = dt;
    t.g.outputs = {y};
    std::vector<Tensor> in;
    for (const Tensor& x : in32) in.push_back(*cast_tensor(x, dt));
    auto r = interpret(t.g, in);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return *cast_tensor((*r)[0], DataType::kFloat32);
  };
  const Tensor a = run(DataType::kFloat32), b = run(DataType::kFloat16);
  EXPECT_LE(relative_diff({a}, {b}), 2e-3);
  EXPECT_GT(relative_diff({a}, {Tensor(DataType::kFloat32, qs)}), 0.5);  // not all zeros
}

// x * Reciprocal(Sqrt(mean(x^2) + eps)) * w with x also feeding a residual; and the Div form.
TEST(TransformerPasses, RmsNormBecomesOneLayer) {
  for (int form = 0; form < 2; ++form) {
    TinyGraph t;
    const Shape xs = {2, 5, 16}, rs = {2, 5, 1};
    auto x = t.input("x", xs);
    auto sq = form == 0 ? t.node(OpKind::kPow, "pow", {x, scalar(t, "two", 2.f)}, xs)
                        : t.node(OpKind::kMul, "sq", {x, x}, xs);
    auto ms = t.node(OpKind::kReduceMean, "mean", {sq}, rs, {{"axes", ir::Attribute::of_ints({-1})}});
    auto ve = t.node(OpKind::kAdd, "add_eps", {ms, scalar(t, "eps", 1e-6f)}, rs);
    auto s = t.node(OpKind::kSqrt, "sqrt", {ve}, rs);
    ir::ValueId y;
    if (form == 0) {
      auto r = t.node(OpKind::kReciprocal, "rsqrt", {s}, rs);
      y = t.node(OpKind::kMul, "norm", {x, r}, xs);
    } else {
      y = t.node(OpKind::kDiv, "norm", {x, s}, xs);
    }
    y = t.node(OpKind::kMul, "weight", {t.constant("w", random_tensor({16}, 81, 0.5f, 1.5f)), y}, xs);
    auto res = t.node(OpKind::kAdd, "residual", {x, y}, xs);
    t.g.outputs = {res};
    ir::Graph opt = check_pass(t.g, passes::fuse_rmsnorm, {random_tensor(xs, 82, -3.f, 3.f)});
    EXPECT_EQ(passes::live_layers(opt), 2) << "form " << form;
    const ir::Node& n = only(opt, OpKind::kRMSNormalization);
    EXPECT_FLOAT_EQ(n.attr_float("epsilon", 0), 1e-6f);
    EXPECT_EQ(n.inputs[0], x);
  }
}

// RMSNorm near miss: mean over axis 1 is not the last axis.
TEST(TransformerPasses, RmsNormOverAnotherAxisNotFused) {
  TinyGraph t;
  const Shape xs = {2, 5, 16}, rs = {2, 1, 16};
  auto x = t.input("x", xs);
  auto sq = t.node(OpKind::kMul, "sq", {x, x}, xs);
  auto ms = t.node(OpKind::kReduceMean, "mean", {sq}, rs, {{"axes", ir::Attribute::of_ints({1})}});
  auto ve = t.node(OpKind::kAdd, "add_eps", {ms, scalar(t, "eps", 1e-6f)}, rs);
  auto s = t.node(OpKind::kSqrt, "sqrt", {ve}, rs);
  t.g.outputs = {t.node(OpKind::kDiv, "norm", {x, s}, xs)};
  ir::Graph opt = check_pass(t.g, passes::fuse_rmsnorm, {random_tensor(xs, 83, -3.f, 3.f)});
  EXPECT_EQ(count_op(opt, OpKind::kRMSNormalization), 0);
}

// [B, S, K] x W[K, N] + b -> MatMulBias; three such projections of one input -> one + Split.
TEST(TransformerPasses, RankThreeMatMulAddThenHorizontalFusion) {
  TinyGraph t;
  const Shape xs = {2, 5, 8};
  auto x = t.input("x", xs);
  std::vector<ir::ValueId> outs;
  const int64_t widths[3] = {6, 6, 4};
  for (int i = 0; i < 3; ++i) {
    const std::string p = "proj" + std::to_string(i);
    auto w = t.constant(p + "_w", random_tensor({8, widths[i]}, 90 + i));
    auto b = t.constant(p + "_b", random_tensor({widths[i]}, 95 + i));
    auto m = t.node(OpKind::kMatMul, p + "_mm", {x, w}, {2, 5, widths[i]});
    outs.push_back(t.node(OpKind::kAdd, p + "_add", {i == 1 ? b : m, i == 1 ? m : b}, {2, 5, widths[i]}));
  }
  t.g.outputs = outs;
  const std::vector<Tensor> in = {random_tensor(xs, 99, -2.f, 2.f)};
  ir::Graph gemm = check_pass(t.g, passes::fuse_matmul_add, in);
  EXPECT_EQ(count_op(gemm, OpKind::kMatMulBias), 3);
  EXPECT_EQ(passes::live_layers(gemm), 3);
  ir::Graph wide = check_pass(gemm, passes::fuse_horizontal_gemm, in);
  EXPECT_EQ(count_op(wide, OpKind::kMatMulBias), 1);
  EXPECT_EQ(count_op(wide, OpKind::kSplit), 1);
  EXPECT_EQ(passes::live_layers(wide), 2);
  EXPECT_EQ(wide.value(only(wide, OpKind::kMatMulBias).inputs[1]).constant->shape(), (Shape{8, 16}));
}

// GPT-2's Conv1D: Reshape(Gemm(Reshape(x, [-1, K]), W, b), [B, S, N]) -> one MatMulBias.
TEST(TransformerPasses, FlattenedGemmBecomesMatMulBias) {
  TinyGraph t;
  const Shape xs = {2, 5, 8};
  auto x = t.input("x", xs);
  auto f = t.node(OpKind::kReshape, "flat", {x, t.ints("to2", {-1, 8})}, {10, 8});
  auto y = t.node(OpKind::kGemm, "addmm", {f, t.constant("w", random_tensor({8, 6}, 1)),
                                           t.constant("b", random_tensor({6}, 2))}, {10, 6});
  t.g.outputs = {t.node(OpKind::kReshape, "unflat", {y, t.ints("to3", {2, 5, 6})}, {2, 5, 6})};
  ir::Graph opt = check_pass(t.g, passes::fuse_matmul_add, {random_tensor(xs, 3, -2.f, 2.f)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  EXPECT_EQ(only(opt, OpKind::kMatMulBias).inputs[0], x);
}

// Plain MatMuls (no bias) of one input fuse too; MatMuls reading the input as B do not.
TEST(TransformerPasses, HorizontalFusionOfPlainMatMuls) {
  TinyGraph t;
  auto x = t.input("x", {3, 8});
  auto a = t.node(OpKind::kMatMul, "a", {x, t.constant("wa", random_tensor({8, 5}, 1))}, {3, 5});
  auto b = t.node(OpKind::kMatMul, "b", {x, t.constant("wb", random_tensor({8, 7}, 2))}, {3, 7});
  auto c = t.node(OpKind::kMatMul, "c", {t.constant("wc", random_tensor({4, 3}, 3)), x}, {4, 8});
  t.g.outputs = {a, b, c};
  ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_gemm, {random_tensor({3, 8}, 4)});
  EXPECT_EQ(count_op(opt, OpKind::kMatMul), 2);
  EXPECT_EQ(count_op(opt, OpKind::kSplit), 1);
}

// 8-bit QuantLinears of one input with the same x_scale / zero point / weight type / activation /
// bias presence fuse into one wide QuantLinear + Split (each channel keeps its scale: the values are
// the members' exactly); one with another x_scale, and one of another weight type, stay apart.
TEST(TransformerPasses, HorizontalFusionOfQuantLinears) {
  for (DataType wt : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    SCOPED_TRACE(dtype_name(wt));
    TinyGraph t;
    auto x = t.input("x", {3, 16});
    auto ql = [&](const std::string& name, int64_t n, float xs, DataType type, uint32_t seed) {
      Tensor w(type, {n, 16});
      for (int64_t i = 0; i < w.numel(); ++i)
        w.data<int8_t>()[i] = static_cast<int8_t>(type == DataType::kInt8 ? (i * 37 + seed) % 200 - 100
                                                                          : ((i * 29 + seed) % 0x70) | (i % 3 ? 0x80 : 0));
      Tensor sc = random_tensor({n}, seed, 0.01f, 0.02f);
      return t.node(OpKind::kQuantLinear, name,
                    {x, t.constant(name + "_w", w), t.constant(name + "_s", sc), t.constant(name + "_b", random_tensor({n}, seed + 1))},
                    {3, n}, {{"x_scale", ir::Attribute::of_float(xs)}, {"x_zero_point", ir::Attribute::of_int(0)}});
    };
    const DataType other = wt == DataType::kInt8 ? DataType::kFloat8E4M3FN : DataType::kInt8;
    t.g.outputs = {ql("q", 16, 0.02f, wt, 1), ql("k", 16, 0.02f, wt, 2), ql("v", 32, 0.02f, wt, 3),
                   ql("other_scale", 16, 0.03f, wt, 4), ql("other_type", 16, 0.02f, other, 5)};
    ir::Graph opt = check_pass(t.g, passes::fuse_horizontal_gemm, {random_tensor({3, 16}, 6, -2.f, 2.f)});
    EXPECT_EQ(count_op(opt, OpKind::kQuantLinear), 3);
    EXPECT_EQ(count_op(opt, OpKind::kSplit), 1);
    int wide = 0;
    for (const ir::Node& n : opt.nodes)
      if (!n.removed && n.op == OpKind::kQuantLinear && opt.value(n.inputs[1]).constant->dim(0) == 64) ++wide;
    EXPECT_EQ(wide, 1);
  }
}

// Shape(x) -> Gather -> Unsqueeze -> Concat -> Reshape with x's shape known folds to a constant
// target; only the Reshape is left.
TEST(TransformerPasses, StaticShapeArithmeticFolds) {
  TinyGraph t;
  const Shape xs = {2, 6, 4};
  auto x = t.input("x", xs);
  ir::ValueId sh = t.node(OpKind::kShape, "shape", {x}, {3});
  t.g.value(sh).dtype = DataType::kInt64;
  ir::ValueId b = t.node(OpKind::kGather, "gather", {sh, t.constant("zero", Tensor::scalar(DataType::kInt64, 0))}, {},
                         {{"axis", ir::Attribute::of_int(0)}});
  t.g.value(b).dtype = DataType::kInt64;
  ir::ValueId u = t.node(OpKind::kUnsqueeze, "unsq", {b, t.ints("ax0", {0})}, {1});
  t.g.value(u).dtype = DataType::kInt64;
  ir::ValueId target = t.node(OpKind::kConcat, "concat", {u, t.ints("rest", {-1, 8})}, {3},
                              {{"axis", ir::Attribute::of_int(0)}});
  t.g.value(target).dtype = DataType::kInt64;
  t.g.outputs = {t.node(OpKind::kReshape, "reshape", {x, target}, {2, 3, 8})};
  ir::Graph opt = check_pass(t.g, passes::fold_constants, {random_tensor(xs, 7)});
  EXPECT_EQ(passes::live_layers(opt), 1);
  EXPECT_EQ(count_op(opt, OpKind::kReshape), 1);
}

// With a symbolic batch, Gather(Shape(x), 2) still folds: dim 2 is known.
TEST(TransformerPasses, KnownDimOfDynamicShapeFolds) {
  TinyGraph t;
  auto x = t.input("x", {2, 6, 4});
  t.g.value(x).shape = ir::SymShape{ir::Dim::sym("batch"), ir::Dim::known(6), ir::Dim::known(4)};
  ir::ValueId sh = t.node(OpKind::kShape, "shape", {x}, {3});
  t.g.value(sh).dtype = DataType::kInt64;
  ir::ValueId d = t.node(OpKind::kGather, "gather", {sh, t.constant("two", Tensor::scalar(DataType::kInt64, 2))}, {},
                         {{"axis", ir::Attribute::of_int(0)}});
  t.g.value(d).dtype = DataType::kInt64;
  ir::ValueId b = t.node(OpKind::kGather, "gather_batch", {sh, t.constant("zero", Tensor::scalar(DataType::kInt64, 0))},
                         {}, {{"axis", ir::Attribute::of_int(0)}});
  t.g.value(b).dtype = DataType::kInt64;
  auto df = t.node(OpKind::kCast, "to_float", {d}, {}, {{"to", ir::Attribute::of_int(1)}});
  auto bf = t.node(OpKind::kCast, "batch_float", {b}, {}, {{"to", ir::Attribute::of_int(1)}});
  auto y = t.node(OpKind::kDiv, "scale", {x, df}, {2, 6, 4});
  t.g.outputs = {t.node(OpKind::kMul, "times_batch", {y, bf}, {2, 6, 4})};
  ir::Graph opt = check_pass(t.g, passes::fold_constants, {random_tensor({2, 6, 4}, 8)});
  EXPECT_EQ(count_op(opt, OpKind::kShape), 1);   // still read for the batch
  EXPECT_EQ(count_op(opt, OpKind::kGather), 1);  // the batch dim is not known
  EXPECT_EQ(count_op(opt, OpKind::kCast), 1);
}

// Slice(Shape(x), -1, max) of a symbolic-batch x folds: the last dim is known.
TEST(TransformerPasses, KnownDimSliceOfDynamicShapeFolds) {
  TinyGraph t;
  auto x = t.input("x", {2, 6, 4});
  t.g.value(x).shape = ir::SymShape{ir::Dim::sym("batch"), ir::Dim::known(6), ir::Dim::known(4)};
  ir::ValueId sh = t.node(OpKind::kShape, "shape", {x}, {3});
  t.g.value(sh).dtype = DataType::kInt64;
  ir::ValueId last = t.node(OpKind::kSlice, "last", {sh, t.ints("s", {-1}), t.ints("e", {INT64_MAX})}, {1});
  t.g.value(last).dtype = DataType::kInt64;
  auto f = t.node(OpKind::kCast, "to_float", {last}, {1}, {{"to", ir::Attribute::of_int(1)}});
  t.g.outputs = {t.node(OpKind::kDiv, "scale", {x, f}, {2, 6, 4})};
  ir::Graph opt = check_pass(t.g, passes::fold_constants, {random_tensor({2, 6, 4}, 9)});
  EXPECT_EQ(count_op(opt, OpKind::kSlice), 0);
  EXPECT_EQ(count_op(opt, OpKind::kCast), 0);
  passes::remove_dead_nodes(opt);  // the Shape, now unread (eliminate_dead_layers in the pipeline)
  EXPECT_EQ(passes::live_layers(opt), 1);
  EXPECT_EQ(count_op(opt, OpKind::kDiv), 1);
}

// The fused layers go through the plan file (ops and attributes by name) and run from it.
TEST(TransformerPasses, FusedLayersRoundTripThroughThePlan) {
  TinyGraph t;
  const Shape xs = {1, 4, 8};
  auto x = t.input("x", xs);
  auto h = t.node(OpKind::kMatMulBias, "proj", {x, t.constant("w", random_tensor({8, 8}, 1)),
                                                 t.constant("b", random_tensor({8}, 2))}, xs);
  h = t.node(OpKind::kRMSNormalization, "rms", {h, t.constant("g", random_tensor({8}, 3, 0.5f, 1.5f))}, xs,
             {{"epsilon", ir::Attribute::of_float(1e-6f)}});
  auto q = t.node(OpKind::kReshape, "heads", {h, t.ints("to", {1, 4, 2, 4})}, {1, 4, 2, 4});
  q = t.node(OpKind::kTranspose, "bhsd", {q}, {1, 2, 4, 4}, {{"perm", ir::Attribute::of_ints({0, 2, 1, 3})}});
  auto y = t.node(OpKind::kAttention, "attn", {q, q, q}, {1, 2, 4, 4},
                  {{"scale", ir::Attribute::of_float(0.7f)}, {"is_causal", ir::Attribute::of_int(1)}});
  t.g.outputs = {y};
  const Tensor in = random_tensor(xs, 4, -2.f, 2.f);
  auto want = interpret(t.g, {in});
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  BuilderConfig c;
  c.opt_level = 0;
  c.target = TargetDevice::kCpu;  // exact equality with the interpreter: the CPU plan (kAuto picks a GPU)
  auto plan = build_from_graph(t.g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  ASSERT_TRUE(ctx->set_input("x", in).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto got = ctx->output("attn_out");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LE(relative_diff(*want, {*got}), 0.0);
  EXPECT_GT(relative_diff(*want, {Tensor(DataType::kFloat32, {1, 2, 4, 4})}), 0.5);
  auto p = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(count_op(p->graph, OpKind::kMatMulBias), 1);
  EXPECT_EQ(count_op(p->graph, OpKind::kRMSNormalization), 1);
  const ir::Node& a = only(p->graph, OpKind::kAttention);
  EXPECT_FLOAT_EQ(a.attr_float("scale", 0), 0.7f);
  EXPECT_EQ(a.attr_int("is_causal", 0), 1);
}

}  // namespace
}  // namespace kiln::testing
