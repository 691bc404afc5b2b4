// ONNX opset-23 Attention, RMSNormalization and RotaryEmbedding imported as Kiln layers
// (onnx/lowered_ops.h, docs/decisions/0066): hand-built models built into CPU plans and run,
// against references computed here in double precision from the ONNX Operators.md formulas;
// and the errors for what Kiln refuses (each naming the node and the attribute or input).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "builder/build_from_graph.h"
#include "kiln/runtime.h"
#include "onnx/importer.h"
#include "plan/onnx_test_models.h"

namespace kiln::testing {
namespace {

constexpr int kBool = onnx::TensorProto::BOOL;
constexpr int kI64 = onnx::TensorProto::INT64;

// Deterministic values in [-1, 1).
std::vector<double> values(size_t n, uint32_t seed) {
  std::vector<double> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<double>(s >> 8) / static_cast<double>(1u << 24) * 2.0 - 1.0;
  }
  return v;
}

Tensor f32(const Shape& shape, const std::vector<double>& v) {
  Tensor t(DataType::kFloat32, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  return t;
}
// The float32 values a tensor holds, as doubles (so the reference reads what the engine reads).
std::vector<double> as_double(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
  return v;
}

std::vector<OnnxDim> dims(const Shape& s) { return std::vector<OnnxDim>(s.begin(), s.end()); }

void set_int(onnx::NodeProto* n, const std::string& k, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
void set_float(onnx::NodeProto* n, const std::string& k, float v) {
  auto* a = n->add_attribute();
  a->set_name(k);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

StatusOr<ir::Graph> import(const OnnxModel& m) {
  onnx_import::ImportOptions o;  // allow_unknown off: opsets 23 and 24 are known (0066 addendum)
  return onnx_import::import_model_bytes(m.bytes(), ".", o);
}

// Builds a CPU plan of `m` (static shapes), runs it on `inputs`, returns the named outputs.
std::vector<Tensor> run(const OnnxModel& m, const std::vector<std::pair<std::string, Tensor>>& inputs,
                        const std::vector<std::string>& outputs) {
  auto g = import(m);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return {};
  auto plan = build_from_graph(*g, BuilderConfig{});
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return {};
  auto engine = Runtime::deserialize_engine(*plan);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  auto ctx = (*engine)->create_execution_context();
  for (const auto& [name, t] : inputs) EXPECT_TRUE(ctx->set_input(name, t).ok()) << name;
  Status s = ctx->execute();
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::vector<Tensor> r;
  for (const auto& name : outputs) {
    auto t = ctx->output(name);
    EXPECT_TRUE(t.ok()) << name;
    r.push_back(t.ok() ? *t : Tensor());
  }
  return r;
}

void expect_near(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.dtype(), DataType::kFloat32) << what;
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got.data<float>()[i], want[i], tol) << what << " [" << i << "]";
}

// ---- Attention ----

struct AttnCase {
  int64_t b = 2, hq = 2, hkv = 2, sq = 3, skv = 3, d = 4, dv = 4, past = 0;
  bool three_d = false, causal = false;
  std::optional<float> scale;
  enum class Mask { kNone, kBool, kFloat } mask = Mask::kNone;
  bool mask_4d = false;  // [B, Hq, Sq, T] instead of [Sq, T]
  int64_t mask_keys = 0;  // > 0: the mask covers only the first mask_keys keys (ONNX pads it)
  std::vector<int64_t> nonpad;  // Attention-24's nonpad_kv_seqlen [B] (opset 24 model) when set
};

// Reference from Operators.md Attention-23, in [B, H, S, D]: K, V = concat(past, new) on the
// sequence axis; scores = scale * Q K^T (scale default 1/sqrt(D)) + mask (bool: -inf where
// false); is_causal: -inf where j > i + past; kv head of query head h = h / (Hq / Hkv); softmax
// over the keys; Y = P V.
std::vector<double> attention_ref(const AttnCase& c, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& pk,
                                  const std::vector<double>& pv, const std::vector<double>& mask) {
  const int64_t t = c.past + c.skv;
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  const double ninf = -std::numeric_limits<double>::infinity();
  auto key = [&](int64_t b, int64_t h, int64_t j, int64_t x) {
    return j < c.past ? pk[((b * c.hkv + h) * c.past + j) * c.d + x] : k[((b * c.hkv + h) * c.skv + j - c.past) * c.d + x];
  };
  auto val = [&](int64_t b, int64_t h, int64_t j, int64_t x) {
    return j < c.past ? pv[((b * c.hkv + h) * c.past + j) * c.dv + x]
                      : v[((b * c.hkv + h) * c.skv + j - c.past) * c.dv + x];
  };
  std::vector<double> y(static_cast<size_t>(c.b * c.hq * c.sq * c.dv));
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t kh = h / (c.hq / c.hkv);
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> s(static_cast<size_t>(t));
        for (int64_t j = 0; j < t; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < c.d; ++x) dot += q[((b * c.hq + h) * c.sq + i) * c.d + x] * key(b, kh, j, x);
          s[j] = scale * dot;
          if (c.mask != AttnCase::Mask::kNone) {
            const int64_t mw = c.mask_keys > 0 ? c.mask_keys : t;
            if (j >= mw) {
              s[j] = ninf;  // the padding ONNX's reference adds: excluded keys
            } else {
              const double m = mask[c.mask_4d ? ((b * c.hq + h) * c.sq + i) * mw + j : i * mw + j];
              s[j] = c.mask == AttnCase::Mask::kBool ? (m != 0 ? s[j] : ninf) : s[j] + m;
            }
          }
          if (!c.nonpad.empty() && j >= c.nonpad[b]) s[j] = ninf;
          // Causal frontier: the past length, or (nonpad_kv_seqlen without a past) per batch row.
          const int64_t offset = !c.nonpad.empty() && c.past == 0 ? c.nonpad[b] - c.sq : c.past;
          if (c.causal && j > i + offset) s[j] = ninf;
        }
        double mx = ninf, sum = 0;
        for (double x : s) mx = std::max(mx, x);
        for (double& x : s) sum += (x = std::exp(x - mx));
        for (int64_t x = 0; x < c.dv; ++x) {
          double acc = 0;
          for (int64_t j = 0; j < t; ++j) acc += s[j] / sum * val(b, kh, j, x);
          y[((b * c.hq + h) * c.sq + i) * c.dv + x] = acc;
        }
      }
    }
  return y;
}

// [B, H, S, X] <-> [B, S, H * X] (the spec's 3-D form).
std::vector<double> bhsd_to_bsh(const std::vector<double>& a, int64_t b, int64_t h, int64_t s, int64_t x) {
  std::vector<double> r(a.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < s; ++k)
        for (int64_t l = 0; l < x; ++l) r[((i * s + k) * h + j) * x + l] = a[((i * h + j) * s + k) * x + l];
  return r;
}

void run_attention_case(const AttnCase& c) {
  const int64_t t = c.past + c.skv;
  OnnxModel m(23);
  const Shape q4 = {c.b, c.hq, c.sq, c.d}, k4 = {c.b, c.hkv, c.skv, c.d}, v4 = {c.b, c.hkv, c.skv, c.dv};
  const Shape pk4 = {c.b, c.hkv, c.past, c.d}, pv4 = {c.b, c.hkv, c.past, c.dv};
  const auto q = values(shape_numel(q4), 1), k = values(shape_numel(k4), 2), v = values(shape_numel(v4), 3);
  const auto pk = values(shape_numel(pk4), 4), pv = values(shape_numel(pv4), 5);
  const int64_t mw = c.mask_keys > 0 ? c.mask_keys : t;
  const Shape ms = c.mask_4d ? Shape{c.b, c.hq, c.sq, mw} : Shape{c.sq, mw};
  std::vector<double> mask = values(shape_numel(ms), 6);
  std::vector<std::pair<std::string, Tensor>> ins;
  auto add = [&](const std::string& name, const Shape& s4, const std::vector<double>& data, int64_t h, int64_t x) {
    if (c.three_d) {
      const Shape s3 = {s4[0], s4[2], s4[1] * s4[3]};
      m.input(name, kF32, dims(s3));
      ins.push_back({name, f32(s3, bhsd_to_bsh(data, s4[0], h, s4[2], x))});
    } else {
      m.input(name, kF32, dims(s4));
      ins.push_back({name, f32(s4, data)});
    }
  };
  add("q", q4, q, c.hq, c.d);
  add("k", k4, k, c.hkv, c.d);
  add("v", v4, v, c.hkv, c.dv);
  std::vector<std::string> node_in = {"q", "k", "v", ""};
  if (c.mask == AttnCase::Mask::kBool) {
    Tensor mt(DataType::kBool, ms);
    for (size_t i = 0; i < mask.size(); ++i) {
      mask[i] = mask[i] > -0.5 ? 1 : 0;  // keeps most keys; some rows lose several
      static_cast<uint8_t*>(mt.raw())[i] = mask[i] != 0;
    }
    for (int64_t i = 0; i < c.sq; ++i) {  // every row keeps its first key (no all-masked rows)
      if (c.mask_4d) {
        for (int64_t bh = 0; bh < c.b * c.hq; ++bh) static_cast<uint8_t*>(mt.raw())[(bh * c.sq + i) * mw] = 1, mask[(bh * c.sq + i) * mw] = 1;
      } else {
        static_cast<uint8_t*>(mt.raw())[i * mw] = 1, mask[i * mw] = 1;
      }
    }
    m.input("mask", kBool, dims(ms));
    ins.push_back({"mask", mt});
    node_in[3] = "mask";
  } else if (c.mask == AttnCase::Mask::kFloat) {
    m.input("mask", kF32, dims(ms));
    ins.push_back({"mask", f32(ms, mask)});
    node_in[3] = "mask";
  }
  std::vector<std::string> node_out = {"y"};
  if (!c.nonpad.empty()) {
    m.proto().mutable_opset_import(0)->set_version(24);
    m.input("nonpad", kI64, {c.b});
    Tensor np(DataType::kInt64, {c.b});
    for (int64_t b = 0; b < c.b; ++b) np.data<int64_t>()[b] = c.nonpad[b];
    ins.push_back({"nonpad", np});
  }
  if (c.past > 0) {
    m.input("past_k", kF32, dims(pk4));
    m.input("past_v", kF32, dims(pv4));
    ins.push_back({"past_k", f32(pk4, pk)});
    ins.push_back({"past_v", f32(pv4, pv)});
    node_in.push_back("past_k");
    node_in.push_back("past_v");
    node_out = {"y", "present_k", "present_v"};
  }
  if (!c.nonpad.empty()) {
    node_in.resize(6);
    node_in.push_back("nonpad");
  }
  while (!node_in.empty() && node_in.back().empty()) node_in.pop_back();
  auto* n = m.node("Attention", node_in, node_out, "attn");
  if (c.causal) set_int(n, "is_causal", 1);
  if (c.scale) set_float(n, "scale", *c.scale);
  if (c.three_d) {
    set_int(n, "q_num_heads", c.hq);
    set_int(n, "kv_num_heads", c.hkv);
  }
  const Shape y4 = {c.b, c.hq, c.sq, c.dv};
  m.output("y", kF32, c.three_d ? dims({c.b, c.sq, c.hq * c.dv}) : dims(y4));
  if (c.past > 0) {
    m.output("present_k", kF32, dims({c.b, c.hkv, t, c.d}));
    m.output("present_v", kF32, dims({c.b, c.hkv, t, c.dv}));
  }
  // The reference reads the float32 values the engine gets.
  auto rd = [](const std::vector<double>& a) { return as_double(f32({static_cast<int64_t>(a.size())}, a)); };
  auto want = attention_ref(c, rd(q), rd(k), rd(v), rd(pk), rd(pv), c.mask == AttnCase::Mask::kBool ? mask : rd(mask));
  if (c.three_d) want = bhsd_to_bsh(want, c.b, c.hq, c.sq, c.dv);
  auto got = run(m, ins, node_out);
  ASSERT_EQ(got.size(), node_out.size());
  expect_near(got[0], want, 2e-5, "Y");
  if (c.past > 0) {  // present = concat(past, new) on the sequence axis
    for (int which = 0; which < 2; ++which) {
      const int64_t x = which == 0 ? c.d : c.dv;
      const auto& past = which == 0 ? pk : pv;
      const auto& now = which == 0 ? k : v;
      std::vector<double> p(static_cast<size_t>(c.b * c.hkv * t * x));
      for (int64_t bh = 0; bh < c.b * c.hkv; ++bh)
        for (int64_t j = 0; j < t; ++j)
          for (int64_t l = 0; l < x; ++l)
            p[(bh * t + j) * x + l] = j < c.past ? past[(bh * c.past + j) * x + l] : now[(bh * c.skv + j - c.past) * x + l];
      expect_near(got[1 + which], rd(p), 0, which == 0 ? "present_key" : "present_value");
    }
  }
}

TEST(OnnxAttention23, FourDimNoMaskWithScale) {
  AttnCase c;
  c.sq = 3, c.skv = 5, c.scale = 0.3f;
  run_attention_case(c);
}

TEST(OnnxAttention23, FourDimGqaBoolMask) {
  AttnCase c;
  c.hq = 4, c.hkv = 2, c.sq = 3, c.skv = 6, c.mask = AttnCase::Mask::kBool;
  run_attention_case(c);
}

TEST(OnnxAttention23, FourDimFloatMaskPerHead) {
  AttnCase c;
  c.sq = 2, c.skv = 5, c.dv = 3, c.mask = AttnCase::Mask::kFloat, c.mask_4d = true;
  run_attention_case(c);
}

TEST(OnnxAttention23, CausalSelfAttentionNoPast) {
  AttnCase c;
  c.sq = c.skv = 4, c.causal = true;
  run_attention_case(c);
}

TEST(OnnxAttention23, CausalWithPastUsesPastOffset) {
  AttnCase c;  // Skv == Sq: Kiln's bottom-right rule is the spec's j > i + past
  c.sq = c.skv = 3, c.past = 2, c.causal = true, c.hq = 4, c.hkv = 1;
  run_attention_case(c);
}

TEST(OnnxAttention23, CausalQueryShorterThanKeysIsTopLeftWithoutPast) {
  AttnCase c;  // Sq != Skv, no past: the spec masks j > i (offset 0), an explicit mask
  c.sq = 2, c.skv = 4, c.causal = true, c.mask = AttnCase::Mask::kFloat;
  run_attention_case(c);
}

TEST(OnnxAttention23, CausalWithPastAndUnequalLengthsBoolMask) {
  AttnCase c;
  c.sq = 2, c.skv = 3, c.past = 2, c.causal = true, c.mask = AttnCase::Mask::kBool;
  run_attention_case(c);
}

TEST(OnnxAttention23, ThreeDimGqaCausalPastFloatMask) {
  AttnCase c;
  c.three_d = true, c.hq = 4, c.hkv = 2, c.sq = c.skv = 2, c.past = 3, c.causal = true;
  c.mask = AttnCase::Mask::kFloat, c.scale = 0.7f;
  run_attention_case(c);
}

TEST(OnnxAttention23, ThreeDimCrossAttentionBoolMask) {
  AttnCase c;
  c.three_d = true, c.hq = 2, c.hkv = 2, c.sq = 3, c.skv = 5, c.d = 2, c.dv = 3, c.mask = AttnCase::Mask::kBool;
  run_attention_case(c);
}

TEST(OnnxAttention23, ShortBoolMaskIsPaddedWithExcludedKeys) {
  AttnCase c;
  c.sq = 3, c.skv = 3, c.past = 2, c.mask = AttnCase::Mask::kBool, c.mask_keys = 3, c.mask_4d = true;
  run_attention_case(c);
}

TEST(OnnxAttention23, ShortFloatMaskIsPaddedCausalUnequal) {
  AttnCase c;
  c.sq = 2, c.skv = 5, c.causal = true, c.mask = AttnCase::Mask::kFloat, c.mask_keys = 4;
  run_attention_case(c);
}

TEST(OnnxAttention24, NonpadKvSeqlenExcludesPaddingKeys) {
  AttnCase c;
  c.sq = 3, c.skv = 5, c.nonpad = {3, 5}, c.mask = AttnCase::Mask::kFloat;
  run_attention_case(c);
}

TEST(OnnxAttention24, NonpadKvSeqlenCausalFrontierPerBatchRow) {
  AttnCase c;  // no past: query i of row b sees keys j <= i + nonpad[b] - Sq
  c.sq = 2, c.skv = 6, c.nonpad = {4, 6}, c.causal = true, c.hq = 4, c.hkv = 2;
  run_attention_case(c);
}

TEST(OnnxAttention24, NonpadKvSeqlenWithPastCausalBoolMask) {
  AttnCase c;  // with a past the frontier is the past length; padding still excluded
  c.three_d = true, c.sq = c.skv = 2, c.past = 3, c.nonpad = {4, 5}, c.causal = true, c.mask = AttnCase::Mask::kBool;
  run_attention_case(c);
}

// A 4-D Attention model with one attribute / output / input under test.
OnnxModel attention_model(const std::function<void(OnnxModel&, onnx::NodeProto*)>& edit,
                          std::vector<std::string> outs = {"y"}, std::vector<std::string> ins = {"q", "k", "v"}) {
  OnnxModel m(23);
  for (const char* name : {"q", "k", "v"}) m.input(name, kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  auto* n = m.node("Attention", ins, outs, "my_attn");
  m.output("y", kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  edit(m, n);
  return m;
}

void expect_error(const OnnxModel& m, StatusCode code, const std::vector<std::string>& words) {
  auto g = import(m);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  for (const auto& w : words) EXPECT_NE(g.status().message().find(w), std::string::npos) << w << " in: " << g.status().message();
}

TEST(OnnxAttention23, RefusesSoftcapNamingNodeAndAttribute) {
  expect_error(attention_model([](OnnxModel&, onnx::NodeProto* n) { set_float(n, "softcap", 30.f); }),
               StatusCode::kUnsupported, {"my_attn", "softcap"});
  // softcap = 0 is the default (no cap) and imports.
  EXPECT_TRUE(import(attention_model([](OnnxModel&, onnx::NodeProto* n) { set_float(n, "softcap", 0.f); })).ok());
}

TEST(OnnxAttention23, RefusesQkMatmulOutput) {
  expect_error(attention_model([](OnnxModel&, onnx::NodeProto* n) { set_int(n, "qk_matmul_output_mode", 1); },
                               {"y", "", "", "qk"}),
               StatusCode::kUnsupported, {"my_attn", "qk_matmul_output"});
}

TEST(OnnxAttention23, RefusesPastKeyWithoutPastValue) {
  expect_error(attention_model([](OnnxModel& m, onnx::NodeProto*) {
                 m.input("pk", kF32, {int64_t{1}, int64_t{2}, int64_t{1}, int64_t{4}});
               }, {"y"}, {"q", "k", "v", "", "pk"}),
               StatusCode::kInvalidModel, {"my_attn", "past_key"});
}

TEST(OnnxAttention23, RefusesThreeDimWithoutHeadCounts) {
  OnnxModel m(23);
  for (const char* name : {"q", "k", "v"}) m.input(name, kF32, {int64_t{1}, int64_t{3}, int64_t{8}});
  m.node("Attention", {"q", "k", "v"}, {"y"}, "a3");
  m.output("y", kF32, {int64_t{1}, int64_t{3}, int64_t{8}});
  expect_error(m, StatusCode::kInvalidModel, {"a3", "q_num_heads"});
}

TEST(OnnxAttention23, UnknownAttributeAndNewerOpsetAreListed) {
  OnnxModel m = attention_model([](OnnxModel&, onnx::NodeProto* n) { set_int(n, "window", 4); });
  auto g = onnx_import::import_model_bytes(m.bytes(), ".");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(g.status().message().find("'window' is not an attribute of Attention-23"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("opset 23"), std::string::npos) << g.status().message();
}

TEST(OnnxAttention23, MismatchedHeadSizeFailsNamingTheNode) {
  OnnxModel m(23);
  m.input("q", kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  m.input("k", kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}});
  m.input("v", kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  m.node("Attention", {"q", "k", "v"}, {"y"}, "bad_attn");
  m.output("y", kF32, {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}});
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto plan = build_from_graph(*g, BuilderConfig{});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("bad_attn"), std::string::npos) << plan.status().message();
  EXPECT_NE(plan.status().message().find("head sizes"), std::string::npos) << plan.status().message();
}

// Q and K produced by earlier nodes (no declared shapes) with one symbolic sequence length: shape
// inference proves Sq == Skv, so the layer's own causal rule is used (no mask input); two
// different symbols cannot be proven equal and are refused rather than guessed.
TEST(OnnxAttention23, CausalOnIntermediatesUsesInferredLengths) {
  for (bool same : {true, false}) {
    SCOPED_TRACE(same);
    OnnxModel m(23);
    m.input("q", kF32, {int64_t{1}, int64_t{2}, std::string("s"), int64_t{4}});
    m.input("k", kF32, {int64_t{1}, int64_t{2}, std::string(same ? "s" : "t"), int64_t{4}});
    m.input("v", kF32, {int64_t{1}, int64_t{2}, std::string(same ? "s" : "t"), int64_t{4}});
    m.node("Relu", {"q"}, {"q1"}, "rq");
    m.node("Relu", {"k"}, {"k1"}, "rk");
    set_int(m.node("Attention", {"q1", "k1", "v"}, {"y"}, "causal_attn"), "is_causal", 1);
    m.output("y", kF32, {int64_t{1}, int64_t{2}, std::string("s"), int64_t{4}});
    auto g = import(m);
    if (!same) {
      ASSERT_FALSE(g.ok());
      EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
      EXPECT_NE(g.status().message().find("causal_attn"), std::string::npos) << g.status().message();
      EXPECT_NE(g.status().message().find("is_causal"), std::string::npos) << g.status().message();
      continue;
    }
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    int attention = 0;
    for (const ir::Node& n : g->nodes) {
      if (n.op != ir::OpKind::kAttention) continue;
      ++attention;
      EXPECT_EQ(n.attr_int("is_causal", 0), 1);
      EXPECT_EQ(n.inputs.size(), 3u);  // no explicit mask
    }
    EXPECT_EQ(attention, 1);
  }
}

TEST(OnnxAttention23, HugeStaticCausalMaskIsRefusedNotAllocated) {
  OnnxModel m(23);
  m.input("q", kF32, {int64_t{1}, int64_t{1}, int64_t{1} << 20, int64_t{4}});
  m.input("k", kF32, {int64_t{1}, int64_t{1}, int64_t{1} << 40, int64_t{4}});
  m.input("v", kF32, {int64_t{1}, int64_t{1}, int64_t{1} << 40, int64_t{4}});
  set_int(m.node("Attention", {"q", "k", "v"}, {"y"}, "huge"), "is_causal", 1);
  m.output("y", kF32, {int64_t{1}, int64_t{1}, int64_t{1} << 20, int64_t{4}});
  expect_error(m, StatusCode::kUnsupported, {"huge", "causal mask"});
}

TEST(OnnxAttention23, OlderOpsetIsAnUnsupportedOp) {
  OnnxModel m = attention_model([](OnnxModel& mm, onnx::NodeProto*) { mm.proto().mutable_opset_import(0)->set_version(22); });
  expect_error(m, StatusCode::kUnsupported, {"my_attn", "Attention"});
}

// ---- RMSNormalization ----

std::vector<double> rms_ref(const std::vector<double>& x, const Shape& xs, int axis, const std::vector<double>& scale,
                            const Shape& ss, double eps) {
  const int r = static_cast<int>(xs.size());
  const int a = axis < 0 ? axis + r : axis;
  int64_t n = 1;
  for (int i = a; i < r; ++i) n *= xs[i];
  std::vector<double> y(x.size());
  for (size_t o = 0; o < x.size() / n; ++o) {
    double ms = 0;
    for (int64_t i = 0; i < n; ++i) ms += x[o * n + i] * x[o * n + i];
    const double inv = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) {
      // scale broadcast (numpy, right-aligned) over the normalized dims
      int64_t si = 0, stride = 1, rem = i;
      for (int d = r - 1, sd = static_cast<int>(ss.size()) - 1; d >= a; --d, --sd) {
        const int64_t idx = rem % xs[d];
        rem /= xs[d];
        if (sd >= 0) {
          si += (ss[sd] == 1 ? 0 : idx) * stride;
          stride *= ss[sd];
        }
      }
      y[o * n + i] = x[o * n + i] * inv * scale[si];
    }
  }
  return y;
}

void run_rms_case(int axis, const Shape& ss, std::optional<float> eps) {
  const Shape xs = {2, 3, 4};
  OnnxModel m(23);
  m.input("x", kF32, dims(xs));
  const auto sv = values(shape_numel(ss), 8);
  std::vector<float> sf(sv.begin(), sv.end());
  m.initializer("scale", ss, sf);
  auto* n = m.node("RMSNormalization", {"x", "scale"}, {"y"}, "rms");
  set_int(n, "axis", axis);
  if (eps) set_float(n, "epsilon", *eps);
  m.output("y", kF32, dims(xs));
  const Tensor x = f32(xs, values(shape_numel(xs), 7));
  auto got = run(m, {{"x", x}}, {"y"});
  ASSERT_EQ(got.size(), 1u);
  std::vector<double> sd(sf.begin(), sf.end());
  expect_near(got[0], rms_ref(as_double(x), xs, axis, sd, ss, eps ? static_cast<double>(*eps) : 1e-5), 2e-5, "Y");
}

TEST(OnnxRmsNorm23, LastAxis) { run_rms_case(-1, {4}, std::nullopt); }
TEST(OnnxRmsNorm23, AxisMinusTwoFullScale) { run_rms_case(-2, {3, 4}, 0.1f); }
TEST(OnnxRmsNorm23, AxisMinusTwoBroadcastScale) { run_rms_case(-2, {4}, 1e-3f); }  // scale [D] over [S, D]
TEST(OnnxRmsNorm23, AxisOneBroadcastRowScale) { run_rms_case(1, {3, 1}, 1e-5f); }

// X produced by an earlier node: shape inference finds the normalized dims [3, 4], so scale
// [3, 4] with axis -2 is the layer's own scale (one RMSNormalization layer, no Mul).
TEST(OnnxRmsNorm23, IntermediateInputUsesInferredShape) {
  OnnxModel m(23);
  m.input("x", kF32, {int64_t{2}, int64_t{3}, int64_t{4}});
  m.initializer("scale", {3, 4}, std::vector<float>(12, 2.f));
  m.node("Relu", {"x"}, {"xr"}, "relu");
  set_int(m.node("RMSNormalization", {"xr", "scale"}, {"y"}, "rms"), "axis", -2);
  m.output("y", kF32, {int64_t{2}, int64_t{3}, int64_t{4}});
  auto g = import(m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  int rms = 0, mul = 0;
  for (const ir::Node& n : g->nodes) {
    rms += n.op == ir::OpKind::kRMSNormalization;
    mul += n.op == ir::OpKind::kMul;
  }
  EXPECT_EQ(rms, 1);
  EXPECT_EQ(mul, 0);
}

TEST(OnnxRmsNorm23, RefusesStashTypeOtherThanFloat) {
  OnnxModel m(23);
  m.input("x", kF32, {int64_t{2}, int64_t{4}});
  m.initializer("scale", {4}, {1, 2, 3, 4});
  set_int(m.node("RMSNormalization", {"x", "scale"}, {"y"}, "rms_d"), "stash_type", 11);
  m.output("y", kF32, {int64_t{2}, int64_t{4}});
  expect_error(m, StatusCode::kUnsupported, {"rms_d", "stash_type"});
}

// ---- RotaryEmbedding ----

struct RopeCase {
  int64_t b = 2, h = 2, s = 3, d = 8, rdim = 0, max_pos = 6;
  bool three_d = false, interleaved = false, positions = true;
};

// Operators.md RotaryEmbedding-23 on x viewed as [B, S, H, D]; cos/sin [B, S, R/2].
std::vector<double> rope_ref(const RopeCase& c, const std::vector<double>& x_bshd, const std::vector<double>& cs,
                             const std::vector<double>& sn) {
  const int64_t r = c.rdim ? c.rdim : c.d, half = r / 2;
  std::vector<double> y = x_bshd;
  for (int64_t b = 0; b < c.b; ++b)
    for (int64_t s = 0; s < c.s; ++s)
      for (int64_t h = 0; h < c.h; ++h) {
        const double* x = &x_bshd[((b * c.s + s) * c.h + h) * c.d];
        double* o = &y[((b * c.s + s) * c.h + h) * c.d];
        for (int64_t i = 0; i < half; ++i) {
          const double co = cs[(b * c.s + s) * half + i], si = sn[(b * c.s + s) * half + i];
          const int64_t i1 = c.interleaved ? 2 * i : i, i2 = c.interleaved ? 2 * i + 1 : i + half;
          o[i1] = co * x[i1] - si * x[i2];
          o[i2] = si * x[i1] + co * x[i2];
        }
      }
  return y;
}

void run_rope_case(const RopeCase& c) {
  const int64_t r = c.rdim ? c.rdim : c.d, half = r / 2;
  OnnxModel m(23);
  const Shape x4 = {c.b, c.h, c.s, c.d};  // the 4-D form's layout
  const auto xv = as_double(f32(x4, values(shape_numel(x4), 11)));
  std::vector<std::pair<std::string, Tensor>> ins;
  std::vector<double> x_bshd = bhsd_to_bsh(xv, c.b, c.h, c.s, c.d);
  if (c.three_d) {
    const Shape x3 = {c.b, c.s, c.h * c.d};
    m.input("x", kF32, dims(x3));
    ins.push_back({"x", f32(x3, x_bshd)});
  } else {
    m.input("x", kF32, dims(x4));
    ins.push_back({"x", f32(x4, xv)});
  }
  std::vector<double> cs(static_cast<size_t>(c.b * c.s * half)), sn(cs.size());
  std::vector<std::string> node_in = {"x", "cos", "sin"};
  if (c.positions) {
    const Shape cache = {c.max_pos, half};
    const auto cv = as_double(f32(cache, values(shape_numel(cache), 12)));
    const auto sv = as_double(f32(cache, values(shape_numel(cache), 13)));
    m.input("cos", kF32, dims(cache));
    m.input("sin", kF32, dims(cache));
    ins.push_back({"cos", f32(cache, cv)});
    ins.push_back({"sin", f32(cache, sv)});
    Tensor pos(DataType::kInt64, {c.b, c.s});
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t s = 0; s < c.s; ++s) {
        const int64_t p = (b * 2 + s * 3 + 1) % c.max_pos;  // not in order, repeats across the batch
        pos.data<int64_t>()[b * c.s + s] = p;
        for (int64_t i = 0; i < half; ++i) {
          cs[(b * c.s + s) * half + i] = cv[p * half + i];
          sn[(b * c.s + s) * half + i] = sv[p * half + i];
        }
      }
    m.input("pos", kI64, {c.b, c.s});
    ins.push_back({"pos", pos});
    node_in.push_back("pos");
  } else {
    const Shape cache = {c.b, c.s, half};
    cs = as_double(f32(cache, values(cs.size(), 14)));
    sn = as_double(f32(cache, values(sn.size(), 15)));
    m.input("cos", kF32, dims(cache));
    m.input("sin", kF32, dims(cache));
    ins.push_back({"cos", f32(cache, cs)});
    ins.push_back({"sin", f32(cache, sn)});
  }
  auto* n = m.node("RotaryEmbedding", node_in, {"y"}, "rope");
  if (c.interleaved) set_int(n, "interleaved", 1);
  if (c.rdim) set_int(n, "rotary_embedding_dim", c.rdim);
  if (c.three_d) set_int(n, "num_heads", c.h);
  m.output("y", kF32, c.three_d ? dims({c.b, c.s, c.h * c.d}) : dims(x4));
  auto want = rope_ref(c, x_bshd, cs, sn);  // [B, S, H, D] = the 3-D layout
  if (!c.three_d) {                           // back to [B, H, S, D]
    std::vector<double> w(want.size());
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t s = 0; s < c.s; ++s)
        for (int64_t h = 0; h < c.h; ++h)
          for (int64_t i = 0; i < c.d; ++i) w[((b * c.h + h) * c.s + s) * c.d + i] = want[((b * c.s + s) * c.h + h) * c.d + i];
    want = w;
  }
  auto got = run(m, ins, {"y"});
  ASSERT_EQ(got.size(), 1u);
  expect_near(got[0], want, 1e-5, "Y");
}

TEST(OnnxRotaryEmbedding23, FourDimHalvesWithPositions) { run_rope_case({}); }
TEST(OnnxRotaryEmbedding23, FourDimInterleavedPartialWithPositions) {
  RopeCase c;
  c.interleaved = true, c.rdim = 4;
  run_rope_case(c);
}
TEST(OnnxRotaryEmbedding23, FourDimHalvesPartialWithoutPositions) {
  RopeCase c;
  c.rdim = 6, c.positions = false;
  run_rope_case(c);
}
TEST(OnnxRotaryEmbedding23, ThreeDimHalvesPartialWithoutPositions) {
  RopeCase c;
  c.three_d = true, c.rdim = 4, c.positions = false;
  run_rope_case(c);
}
TEST(OnnxRotaryEmbedding23, ThreeDimInterleavedFullWithPositions) {
  RopeCase c;
  c.three_d = true, c.interleaved = true, c.h = 3, c.d = 4;
  run_rope_case(c);
}

// With position_ids the node imports as one Rope layer in cache mode (docs/decisions/0067), its
// attributes carried over (3-D X: head_axis 2 between two Reshapes); without, the decomposition.
TEST(OnnxRotaryEmbedding23, WithPositionsImportsAsOneRopeLayer) {
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    const bool three_d = variant == 1, positions = variant != 2;
    OnnxModel m(23);
    const Shape x = three_d ? Shape{2, 3, 16} : Shape{2, 2, 3, 8};
    m.input("x", kF32, dims(x));
    std::vector<std::string> in = {"x", "cos", "sin"};
    const Shape cache = positions ? Shape{6, 2} : Shape{2, 3, 2};
    m.input("cos", kF32, dims(cache));
    m.input("sin", kF32, dims(cache));
    if (positions) {
      m.input("pos", kI64, {int64_t{2}, int64_t{3}});
      in.push_back("pos");
    }
    auto* n = m.node("RotaryEmbedding", in, {"y"}, "rope");
    set_int(n, "rotary_embedding_dim", 4);
    set_int(n, "interleaved", 1);
    if (three_d) set_int(n, "num_heads", 2);
    m.output("y", kF32, dims(x));
    auto g = import(m);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    int ropes = 0, muls = 0;
    for (const ir::Node& k : g->nodes) {
      muls += k.op == ir::OpKind::kMul;
      if (k.op != ir::OpKind::kRope) continue;
      ++ropes;
      EXPECT_EQ(k.attr_int("head_axis", 0), three_d ? 2 : 1);
      EXPECT_EQ(k.attr_int("rotary_dim", 0), 4);
      EXPECT_EQ(k.attr_int("interleaved", 0), 1);
    }
    EXPECT_EQ(ropes, positions ? 1 : 0);
    EXPECT_EQ(muls, positions ? 0 : 4);
  }
}

TEST(OnnxRotaryEmbedding23, RefusesOddRotaryDimAndThreeDimWithoutHeads) {
  for (int variant = 0; variant < 2; ++variant) {
    OnnxModel m(23);
    m.input("x", kF32, {int64_t{1}, int64_t{2}, int64_t{8}});
    m.input("cos", kF32, {int64_t{1}, int64_t{2}, int64_t{2}});
    m.input("sin", kF32, {int64_t{1}, int64_t{2}, int64_t{2}});
    auto* n = m.node("RotaryEmbedding", {"x", "cos", "sin"}, {"y"}, "rope_bad");
    if (variant == 0) {
      set_int(n, "num_heads", 2);
      set_int(n, "rotary_embedding_dim", 3);
    }
    m.output("y", kF32, {int64_t{1}, int64_t{2}, int64_t{8}});
    expect_error(m, StatusCode::kInvalidModel, {"rope_bad", variant == 0 ? "rotary_embedding_dim" : "num_heads"});
  }
}

}  // namespace
}  // namespace kiln::testing
