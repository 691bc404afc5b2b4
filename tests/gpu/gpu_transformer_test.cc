// CUDA tactics of the internal transformer layers (gpu_transformer.*, kernels_transformer.cu,
// MatMulBias through the Gemm layer) against the CPU reference (ops_fused_transformer.cc), on
// random never-zero data: fp32 storage at 1e-4 (TF32 off), fp16 and bf16 at normalized-error
// tolerances. Without a GPU (CUDA builds) the lowering still runs (check_gpu_support), and a host
// emulation of the Attention plan — the GEMM units with GQA folded into M, the chunks, and the
// softmax's mask/causal index helpers from kernels_transformer.h — is checked against the
// reference, so the planning is tested here too; GpuTransformer* suites skip the device part.
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <cmath>
#include <optional>
#include <random>

#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_transformer.h"
#endif

namespace kiln::testing {
namespace {

using ir::Attribute;
using ir::OpKind;

#ifdef KILN_HAVE_CUDA
#define REQUIRE_CUDA_BUILD()
#else
#define REQUIRE_CUDA_BUILD() GTEST_SKIP() << "built without CUDA"
#endif

// Magnitudes in [0.1, 1] with random signs, times `scale`: never zero.
Tensor nonzero(const Shape& s, uint32_t seed, float scale = 1.f) {
  Tensor t(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(0.1f, 1.f);
  std::bernoulli_distribution neg(0.5);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = (neg(rng) ? -mag(rng) : mag(rng)) * scale;
  return t;
}

constexpr double kTol32 = 1e-4, kTol16 = 2e-2, kTolBf16 = 6e-2;

#ifdef KILN_HAVE_CUDA
enum class Storage { kF32, kF16, kBF16 };
const char* storage_label(Storage s) { return s == Storage::kF32 ? " [fp32]" : (s == Storage::kF16 ? " [fp16]" : " [bf16]"); }

StatusOr<std::vector<Tensor>> run_gpu(const ir::Graph& g, const std::vector<Tensor>& in, Storage st,
                                      size_t workspace_limit) {
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, shapes));
  cuda::GpuBuildOptions o;
  o.precision.fp16 = st == Storage::kF16;
  o.precision.bf16 = st == Storage::kBF16;
  o.precision.tf32 = false;
  o.workspace_limit = workspace_limit;
  KILN_ASSIGN_OR_RETURN(auto model, cuda::GpuModel::create(g, vs, o));
  for (const auto& l : model->layers())
    if (l.workspace_bytes > workspace_limit) return internal_error("layer '" + l.name + "' exceeds the workspace limit");
  KILN_ASSIGN_OR_RETURN(auto ctx, model->create_context());
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(ctx->run(in, &out));
  return out;
}

// Host emulation of the Attention layer as planned: per chunk of units, S = scale Q Kᵀ for each
// unit's M = group·Sq rows, the softmax rows through the kernels' index helpers, O = P V. Inputs
// are float32; a bool mask is given as 0/1 floats (as the lowering uploads it).
std::vector<Tensor> emulate_attention(const cuda::AttentionPlan& p, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor* mask, const Shape& out_shape) {
  Tensor o(DataType::kFloat32, out_shape);
  const int64_t m = p.m, sk = p.sk, d = p.d, dv = p.dv;
  std::vector<float> s(static_cast<size_t>(p.chunk * m * sk));
  for (int64_t u0 = 0; u0 < p.units; u0 += p.chunk) {
    for (int64_t c = 0; c < p.chunk; ++c) {
      const int64_t u = u0 + c;
      const float* qu = q.data<float>() + u * m * d;
      const float* ku = k.data<float>() + u * sk * d;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < sk; ++j) {
          double acc = 0;
          for (int64_t x = 0; x < d; ++x) acc += double(qu[i * d + x]) * ku[j * d + x];
          s[(c * m + i) * sk + j] = static_cast<float>(p.scale * acc);
        }
    }
    for (int64_t lr = 0; lr < p.chunk * m; ++lr) {
      const int64_t row = u0 * m + lr;
      float* sr = s.data() + lr * sk;
      const int64_t lim = cuda::attention_key_limit(p.softmax, row);
      const int64_t moff = mask ? cuda::attention_mask_row_offset(p.softmax, row) : 0;
      float mx = -INFINITY;
      for (int64_t j = 0; j < sk; ++j) {
        float val = sr[j];
        if (mask) {
          const float mv = mask->data<float>()[moff + j * p.softmax.mask_key_stride];
          if (p.softmax.mask == cuda::AttentionMask::kAdditive) val += mv;
          else if (mv == 0.f) val = -INFINITY;
        }
        if (j > lim) val = -INFINITY;
        sr[j] = val;
        mx = std::max(mx, val);
      }
      double sum = 0;
      for (int64_t j = 0; j < sk; ++j) sum += (sr[j] = mx == -INFINITY ? 0.f : std::exp(sr[j] - mx));
      for (int64_t j = 0; j < sk; ++j) sr[j] = sum > 0 ? static_cast<float>(sr[j] / sum) : 0.f;
    }
    for (int64_t c = 0; c < p.chunk; ++c) {
      const int64_t u = u0 + c;
      const float* vu = v.data<float>() + u * sk * dv;
      float* ou = o.data<float>() + u * m * dv;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t y = 0; y < dv; ++y) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += double(s[(c * m + i) * sk + j]) * vu[j * dv + y];
          ou[i * dv + y] = static_cast<float>(acc);
        }
    }
  }
  return {o};
}

#endif

struct Tolerances {
  double f32 = kTol32, f16 = kTol16, bf16 = kTolBf16;
};

// CPU reference vs the CUDA path (fp32, fp16, bf16 storage). Without a GPU: the lowering accepts
// the graph (fp32, fp16 and bf16 rules), and for single-Attention graphs the host emulation of the
// plan (for fp32 and fp16 scratch layouts, and a small scratch limit that forces chunks) matches.
void expect_matches(const ir::Graph& g, const std::vector<Tensor>& in, const std::string& label, Tolerances tol = {},
                    size_t workspace_limit = size_t{1} << 30) {
#ifdef KILN_HAVE_CUDA
  auto ref = interpret(g, in);
  ASSERT_TRUE(ref.ok()) << label << ": " << ref.status().to_string();
  std::vector<Shape> shapes;
  for (const Tensor& t : in) shapes.push_back(t.shape());
  auto vs = cuda::infer_value_shapes_by_reference(g, shapes);
  ASSERT_TRUE(vs.ok()) << label << ": " << vs.status().to_string();
  for (Storage st : {Storage::kF32, Storage::kF16, Storage::kBF16}) {
    const cuda::StorageType t = st == Storage::kF32 ? cuda::StorageType::kF32
                                : (st == Storage::kF16 ? cuda::StorageType::kF16 : cuda::StorageType::kBF16);
    Status support = cuda::check_gpu_support(g, *vs, t);
    ASSERT_TRUE(support.ok()) << label << storage_label(st) << ": " << support.to_string();
  }
  if (g.nodes.size() == 1 && g.nodes[0].op == OpKind::kAttention) {
    const ir::Node& n = g.nodes[0];
    // Operands as the lowering sees them: graph inputs in order, constants (a bool mask as 0/1).
    std::vector<Tensor> ops;
    size_t next_input = 0;
    for (ir::ValueId v : n.inputs) {
      if (const auto& c = g.value(v).constant) {
        Tensor f(DataType::kFloat32, c->shape());
        for (int64_t i = 0; i < c->numel(); ++i)
          f.data<float>()[i] = c->dtype() == DataType::kBool ? static_cast<const uint8_t*>(c->raw())[i] : c->data<float>()[i];
        ops.push_back(std::move(f));
      } else {
        ops.push_back(in.at(next_input++));
      }
    }
    for (int eb : {4, 2})
      for (size_t limit : {size_t{64} << 20, size_t{4096}}) {
        auto p = cuda::plan_attention(n, *vs, eb, limit);
        ASSERT_TRUE(p.ok()) << label << ": " << p.status().to_string();
        EXPECT_EQ(p->units % p->chunk, 0) << label;
        auto emu = emulate_attention(*p, ops[0], ops[1], ops[2], ops.size() > 3 ? &ops[3] : nullptr,
                                     (*ref)[0].shape());
        EXPECT_LE(relative_diff(*ref, emu), 1e-5)
            << label << " [host emulation, " << eb << "-byte storage, chunk " << p->chunk << "/" << p->units << "]";
      }
  }
  if (!cuda::device_info().available) return;
  for (Storage st : {Storage::kF32, Storage::kF16, Storage::kBF16}) {
    const std::string what = label + storage_label(st);
    auto out = run_gpu(g, in, st, workspace_limit);
    ASSERT_TRUE(out.ok()) << what << ": " << out.status().to_string();
    ASSERT_EQ(out->size(), ref->size()) << what;
    const double t = st == Storage::kF32 ? tol.f32 : (st == Storage::kF16 ? tol.f16 : tol.bf16);
    EXPECT_LE(relative_diff(*ref, *out), t) << what;
  }
#else
  (void)g, (void)in, (void)label, (void)tol, (void)workspace_limit;
#endif
}

// ---------------------------------------------------------------- Attention
struct AttnCase {
  std::string label;
  int64_t b, hq, hkv, sq, sk, d, dv;
  bool causal = false;
  enum Mask { kNone, kAddInput, kAddConst2d, kBoolConst } mask = kNone;
  int rank = 4;  // 3: [B*H, S, D] (torch 1.13 MHA export), b must be 1
};

// One Attention node; Q, K, V (and an additive [B, 1, 1, Sk] mask) are graph inputs.
std::pair<ir::Graph, std::vector<Tensor>> attention_graph(const AttnCase& c, uint32_t seed) {
  TinyGraph t;
  auto shp = [&](int64_t h, int64_t s, int64_t d) { return c.rank == 3 ? Shape{h, s, d} : Shape{c.b, h, s, d}; };
  const Shape qs = shp(c.hq, c.sq, c.d), ks = shp(c.hkv, c.sk, c.d), vs = shp(c.hkv, c.sk, c.dv);
  std::vector<Tensor> in = {nonzero(qs, seed, 2.f), nonzero(ks, seed + 1, 2.f), nonzero(vs, seed + 2)};
  std::vector<ir::ValueId> ins = {t.input("q", qs), t.input("k", ks), t.input("v", vs)};
  std::mt19937 rng(seed + 3);
  if (c.mask == AttnCase::kAddInput) {  // BERT's extended mask: 0 or -10000 per key (padding)
    Tensor m(DataType::kFloat32, {c.b, 1, 1, c.sk});
    for (int64_t i = 0; i < m.numel(); ++i) m.data<float>()[i] = (i % c.sk) < c.sk - 1 - (i / c.sk) * 3 ? 0.f : -10000.f;
    ins.push_back(t.input("mask", m.shape()));
    in.push_back(m);
  } else if (c.mask == AttnCase::kAddConst2d) {  // a relative-position-like bias [Sq, Sk]
    ins.push_back(t.constant("bias", nonzero({c.sq, c.sk}, seed + 4, 3.f)));
  } else if (c.mask == AttnCase::kBoolConst) {  // [B, 1, Sq, Sk]; query row 1 of batch 0 sees no key
    Tensor m(DataType::kBool, {c.b, 1, c.sq, c.sk});
    auto* p = static_cast<uint8_t*>(m.raw());
    std::bernoulli_distribution keep(0.6);
    for (int64_t i = 0; i < m.numel(); ++i) p[i] = keep(rng) ? 1 : 0;
    for (int64_t j = 0; j < c.sk; ++j) {
      p[1 * c.sk + j] = 0;
      if (c.sq > 2) p[2 * c.sk + j] = j == 0;  // row 2 sees key 0 only
    }
    ins.push_back(t.constant("keep", m));
  }
  Shape os = shp(c.hq, c.sq, c.dv);
  std::map<std::string, Attribute> attrs;
  if (c.causal) attrs["is_causal"] = Attribute::of_int(1);
  auto y = t.node(OpKind::kAttention, "attn", ins, os, attrs);
  t.g.outputs = {y};
  return {t.g, in};
}

TEST(GpuTransformer, AttentionMatchesCpuReference) {
  REQUIRE_CUDA_BUILD();
  const std::vector<AttnCase> cases = {
      {"MHA d64", 2, 4, 4, 16, 16, 64, 64},
      {"seq 77 d80", 1, 2, 2, 77, 77, 80, 80},
      {"GQA 8/2 seq 33", 2, 8, 2, 33, 33, 64, 64},
      {"MQA 4/1 dv 32", 1, 4, 1, 19, 19, 64, 32},
      {"causal square", 2, 4, 4, 40, 40, 64, 64, true},
      {"causal Sq < Sk (bottom-right)", 1, 4, 2, 5, 37, 64, 64, true},
      {"causal Sq > Sk (first rows empty)", 1, 2, 2, 9, 4, 64, 64, true},
      {"additive mask input [B,1,1,Sk]", 2, 4, 4, 45, 45, 64, 64, false, AttnCase::kAddInput},
      {"additive constant [Sq,Sk]", 2, 2, 2, 24, 24, 80, 80, false, AttnCase::kAddConst2d},
      {"bool mask, empty row", 2, 4, 4, 31, 31, 64, 64, false, AttnCase::kBoolConst},
      {"bool mask + causal + GQA", 2, 4, 2, 20, 20, 64, 64, true, AttnCase::kBoolConst},
      {"rank 3 [B*H, S, D]", 1, 6, 6, 50, 50, 64, 64, false, AttnCase::kNone, 3},
  };
  uint32_t seed = 500;
  for (const AttnCase& c : cases) {
    auto [g, in] = attention_graph(c, seed += 10);
    expect_matches(g, in, "Attention " + c.label);
  }
  REQUIRE_GPU();  // without a device: the lowering and the planned GEMM units / softmax rows were checked
}

TEST(GpuTransformer, AttentionChunksWithinASmallWorkspace) {
  REQUIRE_CUDA_BUILD();
  // 32 units of 128 x 128 scores (64 KiB fp32 each) under a 1 MiB workspace limit: the scores
  // run in chunks (fp32: 8 units, fp16: 4), and every layer stays within the limit.
  auto [g, in] = attention_graph({"chunked", 4, 8, 8, 128, 128, 64, 64, true}, 900);
  expect_matches(g, in, "Attention chunked", {}, size_t{1} << 20);
  REQUIRE_GPU();  // without a device: the lowering and the chunked plan were checked
}

// ---------------------------------------------------------------- RMSNormalization
TEST(GpuTransformer, RMSNormalizationMatchesCpuReference) {
  REQUIRE_CUDA_BUILD();
  struct Case { Shape x; int64_t axis; Shape scale; };
  const std::vector<Case> cases = {
      {{4, 64}, -1, {64}},          {{2, 3, 80}, -1, {80}},     {{2, 5, 24}, 1, {5, 24}},
      {{3, 7, 33}, -1, {1}},        {{2, 4096}, -1, {4096}},    {{1, 9, 64}, 2, {1, 1, 64}},
  };
  uint32_t seed = 700;
  for (const Case& c : cases) {
    TinyGraph t;
    auto x = t.input("x", c.x);
    auto y = t.node(OpKind::kRMSNormalization, "rms", {x, t.constant("w", nonzero(c.scale, seed + 1))}, c.x,
                    {{"axis", Attribute::of_int(c.axis)}, {"epsilon", Attribute::of_float(1e-6f)}});
    t.g.outputs = {y};
    expect_matches(t.g, {nonzero(c.x, seed += 10, 3.f)}, "RMSNorm " + shape_str(c.x) + " axis " + std::to_string(c.axis),
                   {kTol32, kTol16, 2e-2});
  }
  REQUIRE_GPU();  // without a device: the lowering was checked
}

// ---------------------------------------------------------------- MatMulBias
TEST(GpuTransformer, MatMulBiasMatchesCpuReference) {
  REQUIRE_CUDA_BUILD();
  struct Case { Shape a; int64_t n; };
  // GPT-2's c_attn (Reshape-Gemm-Reshape folded), odd sizes, rank 4.
  const std::vector<Case> cases = {{{2, 8, 32}, 48}, {{1, 77, 64}, 192}, {{2, 3, 5, 7}, 9}};
  uint32_t seed = 800;
  for (const Case& c : cases) {
    TinyGraph t;
    const int64_t k = c.a.back();
    Shape ys = c.a;
    ys.back() = c.n;
    auto a = t.input("a", c.a);
    Tensor w = nonzero({k, c.n}, seed + 1, 1.f / std::sqrt(static_cast<float>(k)));
    auto y = t.node(OpKind::kMatMulBias, "mmb", {a, t.constant("w", w), t.constant("b", nonzero({c.n}, seed + 2))}, ys);
    t.g.outputs = {y};
    expect_matches(t.g, {nonzero(c.a, seed += 10)}, "MatMulBias " + shape_str(c.a) + " x [" + std::to_string(k) + "," +
                                                        std::to_string(c.n) + "]");
  }
  REQUIRE_GPU();  // without a device: the lowering was checked
}

// ---------------------------------------------------------------- a decoder block through the passes
// RMSNorm written out as exporters do (x / sqrt(mean(x^2) + eps) * w), Q/K/V projections with
// biases, attention as MatMul -> Div -> causal Where(finfo.min) -> Softmax -> MatMul, so
// fuse_rmsnorm, fuse_matmul_add, fuse_horizontal_gemm and fuse_attention (is_causal) all fire;
// the fused graph then runs on the CUDA path.
ir::Graph decoder_block(int64_t B, int64_t S, int64_t D, int64_t H) {
  const int64_t dh = D / H;
  TinyGraph t;
  uint32_t seed = 1000;
  auto w = [&](const std::string& name, const Shape& s, float scale) { return t.constant(name, nonzero(s, seed++, scale)); };
  auto scalar = [&](const std::string& name, float v) {
    Tensor c(DataType::kFloat32, {});
    c.data<float>()[0] = v;
    return t.constant(name, c);
  };
  auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
    Tensor c(DataType::kInt64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) c.data<int64_t>()[i] = v[i];
    return t.constant(name, c);
  };
  auto x = t.input("x", {B, S, D});
  // RMSNorm, decomposed as exporters write it.
  auto sq = t.node(OpKind::kMul, "rms.sq", {x, x}, {B, S, D});
  auto ms = t.node(OpKind::kReduceMean, "rms.mean", {sq, ints("rms.axes", {-1})}, {B, S, 1},
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
    auto r = t.node(OpKind::kReshape, name + ".reshape", {in, ints(name + ".shape", {B, S, H, dh})}, {B, S, H, dh});
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
  auto orr = t.node(OpKind::kReshape, "o.reshape", {ot, ints("o.shape", {B, S, D})}, {B, S, D});
  auto proj = linear("proj", orr, D, D);
  auto out = t.node(OpKind::kAdd, "residual", {x, proj}, {B, S, D});
  t.g.outputs = {out};
  return t.g;
}

TEST(GpuTransformer, DecoderBlockFusedPathMatchesCpuReference) {
  REQUIRE_CUDA_BUILD();
  const ir::Graph raw = decoder_block(2, 37, 128, 2);  // head dim 64, sequence 37
  ir::Graph opt = raw;
  ASSERT_TRUE(passes::run_pipeline(opt, kiln::testing::reference_pass_options()).ok());
  EXPECT_EQ(count_op(opt, OpKind::kAttention), 1);
  EXPECT_EQ(count_op(opt, OpKind::kRMSNormalization), 1);
  EXPECT_GE(count_op(opt, OpKind::kMatMulBias), 1);
  const Tensor x = nonzero({2, 37, 128}, 1100);
  expect_matches(opt, {x}, "decoder block (fused)");
  REQUIRE_GPU();  // without a device: the fused graph's lowering was checked
}

// ---------------------------------------------------------------- planning errors (no GPU needed)
#ifdef KILN_HAVE_CUDA
ir::Node attention_node(std::map<std::string, Attribute> attrs = {}) {
  ir::Node n;
  n.name = "attn_7";
  n.op = OpKind::kAttention;
  n.attrs = std::move(attrs);
  return n;
}
#endif

TEST(GpuTransformerPlan, AttentionPlanFoldsGqaIntoMAndChunks) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  // Q [2, 8, 10, 64], K/V [2, 2, 12, 64]: 4 units (batch x kv heads) of M = 4 query heads x 10 rows.
  auto p = cuda::plan_attention(attention_node({{"is_causal", Attribute::of_int(1)}}), {2, 8, 10, 64}, {2, 2, 12, 64},
                                {2, 2, 12, 64}, Shape{2, 1, 1, 12}, false, {2, 8, 10, 64}, 2, 64u << 20);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->units, 4);
  EXPECT_EQ(p->m, 40);
  EXPECT_EQ(p->group, 4);
  EXPECT_EQ(p->chunk, 4);
  EXPECT_FLOAT_EQ(p->scale, 0.125f);
  EXPECT_EQ(p->probs_offset % 256, 0u);
  EXPECT_GE(p->probs_offset, 4u * 40 * 12 * 4);                     // S: fp32
  EXPECT_GE(p->scratch_bytes, p->probs_offset + 4u * 40 * 12 * 2);  // P: fp16
  EXPECT_EQ(p->softmax.mask, cuda::AttentionMask::kAdditive);
  EXPECT_EQ(p->softmax.mask_key_stride, 1);
  // Row (b=1, h=5, i=3): the mask row of batch 1 (stride Sk = 12), heads and queries broadcast.
  EXPECT_EQ(cuda::attention_mask_row_offset(p->softmax, (1 * 8 + 5) * 10 + 3), 12);
  // Causal, bottom-right aligned: query 3 of 10 against 12 keys sees keys 0..5.
  EXPECT_EQ(cuda::attention_key_limit(p->softmax, 3), 5);
  // A scratch limit of one unit: 4 chunks of 1; fp32 storage: P overwrites S.
  auto small = cuda::plan_attention(attention_node(), {2, 8, 10, 64}, {2, 2, 12, 64}, {2, 2, 12, 64}, std::nullopt, false,
                                    {2, 8, 10, 64}, 4, 40 * 12 * 4);
  ASSERT_TRUE(small.ok()) << small.status().to_string();
  EXPECT_EQ(small->chunk, 1);
  EXPECT_EQ(small->probs_offset, 0u);
  EXPECT_EQ(small->softmax.mask, cuda::AttentionMask::kNone);
#endif
}

TEST(GpuTransformerPlan, BadShapesGiveErrorsNamingTheNode) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  struct Bad { Shape q, k, v; std::optional<Shape> mask; Shape out; const char* expect; };
  const std::vector<Bad> bad = {
      {{2, 4, 8, 64}, {2, 4, 8, 32}, {2, 4, 8, 64}, std::nullopt, {2, 4, 8, 64}, "do not fit"},
      {{2, 6, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, std::nullopt, {2, 6, 8, 64}, "not a multiple of kv heads"},
      {{2, 4, 8, 64}, {3, 4, 8, 64}, {3, 4, 8, 64}, std::nullopt, {2, 4, 8, 64}, "batch dims differ"},
      {{4, 8}, {4, 8}, {4, 8}, std::nullopt, {4, 8}, "rank >= 3"},
      {{2, 4, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, Shape{2, 1, 3, 8}, {2, 4, 8, 64}, "does not broadcast"},
      {{2, 4, 8, 64}, {2, 4, 8, 64}, {2, 4, 8, 64}, std::nullopt, {2, 4, 8, 32}, "is not [*, Hq, Sq, Dv]"},
  };
  for (const Bad& b : bad) {
    auto p = cuda::plan_attention(attention_node(), b.q, b.k, b.v, b.mask, false, b.out, 4, 64u << 20);
    ASSERT_FALSE(p.ok()) << b.expect;
    EXPECT_NE(p.status().message().find("node 'attn_7' (Attention)"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(b.expect), std::string::npos) << p.status().message();
  }
  ir::Node rms;
  rms.name = "rms_3";
  rms.op = OpKind::kRMSNormalization;
  auto r = cuda::plan_rms_norm(rms, {2, 5, 24}, {5, 24});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'rms_3'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("does not match the normalized dims"), std::string::npos) << r.status().message();
  rms.attrs["axis"] = Attribute::of_int(3);
  EXPECT_FALSE(cuda::plan_rms_norm(rms, {2, 5, 24}, {24}).ok());
  rms.attrs["axis"] = Attribute::of_int(1);
  auto ok = cuda::plan_rms_norm(rms, {2, 5, 24}, {1, 5, 24});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->rows, 2);
  EXPECT_EQ(ok->cols, 120);
  EXPECT_EQ(ok->scale_n, 120);
#endif
}

// check_gpu_support (no GPU needed) lists every bad transformer layer at once, naming each node.
TEST(GpuTransformerPlan, SupportCheckListsBadLayersByName) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  TinyGraph t;
  auto q = t.input("q", {1, 2, 8, 64});
  Tensor im(DataType::kInt64, {1, 1, 1, 8});
  for (int64_t i = 0; i < 8; ++i) im.data<int64_t>()[i] = 1;
  auto a = t.node(OpKind::kAttention, "attn_int_mask", {q, q, q, t.constant("imask", im)}, {1, 2, 8, 64});
  auto r = t.node(OpKind::kRMSNormalization, "rms_bad_scale", {a, t.constant("w", nonzero({32}, 1))}, {1, 2, 8, 64});
  t.g.outputs = {r};
  auto vs = cuda::infer_value_shapes_by_reference(t.g, {{1, 2, 8, 64}});
  ASSERT_TRUE(vs.ok()) << vs.status().to_string();
  Status e = cuda::check_gpu_support(t.g, *vs);
  EXPECT_EQ(e.code(), StatusCode::kUnsupported) << e.to_string();
  EXPECT_NE(e.message().find("node 'attn_int_mask' (Attention): mask dtype int64 is neither float nor bool"),
            std::string::npos) << e.message();
  EXPECT_NE(e.message().find("node 'rms_bad_scale'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("does not match the normalized dims"), std::string::npos) << e.message();
#endif
}

}  // namespace
}  // namespace kiln::testing
