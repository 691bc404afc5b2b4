// PagedAttention's CPU reference kernel (ops.def; docs/decisions/0059): steps of packed tokens
// appended to a host pool and attended over, against a naive double-precision causal attention
// over each whole sequence written from the formula; GQA / MQA; padding tokens; a prefill chunk
// packed with another sequence's decode token; float16 / bfloat16 pools; each error (naming the
// node, pool untouched); and the op surviving the builder's CPU and CUDA pass pipelines.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/interpreter.h"
#include "builder/build_from_graph.h"
#include "core/numerics.h"
#include "kiln/runtime.h"

namespace kiln {
namespace {

using ir::OpKind;

struct Geometry {
  int64_t hq = 4, hkv = 2, d = 8, block_size = 4, num_blocks = 12, rows = 2, max_blocks = 3;
  std::string cache_dtype = "float32";
  float k_scale = 1.f, v_scale = 1.f;  // fp8e4m3fn pools: the stored code is x / scale
  size_t elem() const { return cache_dtype == "float32" ? 4 : cache_dtype == "fp8e4m3fn" ? 1 : 2; }
  size_t pool_bytes() const { return static_cast<size_t>(num_blocks * 2 * hkv * block_size * d) * elem(); }
};

// One token of a step: its sequence row (-1 = padding), position and q/k/v rows.
struct Token {
  int32_t seq;
  int64_t pos;
  std::vector<float> q, k, v;  // [Hq * D], [Hkv * D], [Hkv * D]
};

// A whole sequence's random q/k/v, one Token per position.
std::vector<Token> random_sequence(const Geometry& g, int32_t row, int64_t len, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<Token> s;
  for (int64_t p = 0; p < len; ++p) {
    Token t{row, p, {}, {}, {}};
    for (int64_t i = 0; i < g.hq * g.d; ++i) t.q.push_back(u(rng));
    for (int64_t i = 0; i < g.hkv * g.d; ++i) t.k.push_back(u(rng));
    for (int64_t i = 0; i < g.hkv * g.d; ++i) t.v.push_back(u(rng));
    s.push_back(std::move(t));
  }
  return s;
}

// The value as the pool stores it.
float as_stored(float x, const std::string& cache_dtype, float scale = 1.f) {
  if (cache_dtype == "float16") return fp16_to_float(float_to_fp16(x));
  if (cache_dtype == "bfloat16") return bf16_to_float(float_to_bf16(x));
  // OCP OFP8 E4M3FN, nearest even, saturating at +-448 (ONNX QuantizeLinear with saturate).
  if (cache_dtype == "fp8e4m3fn") return fp8e4m3fn_to_float(double_to_fp8e4m3fn(static_cast<double>(x / scale), true)) * scale;
  return x;
}

// Naive attention of token `p` of `seq` over its positions 0..p, in double: softmax(q.k / sqrt(D))
// weighted sum of v, query head h reading kv head h / (Hq / Hkv), k and v as the pool stores them.
std::vector<double> naive(const Geometry& g, const std::vector<Token>& seq, int64_t p) {
  std::vector<double> out(static_cast<size_t>(g.hq * g.d), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(g.d));
  for (int64_t h = 0; h < g.hq; ++h) {
    const int64_t kvh = h / (g.hq / g.hkv);
    std::vector<double> w(static_cast<size_t>(p + 1));
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j <= p; ++j) {
      double dot = 0;
      for (int64_t i = 0; i < g.d; ++i)
        dot += static_cast<double>(seq[p].q[h * g.d + i]) * as_stored(seq[j].k[kvh * g.d + i], g.cache_dtype, g.k_scale);
      w[j] = dot * scale;
      mx = std::max(mx, w[j]);
    }
    for (double& x : w) sum += (x = std::exp(x - mx));
    for (int64_t j = 0; j <= p; ++j)
      for (int64_t i = 0; i < g.d; ++i)
        out[h * g.d + i] += w[j] / sum * as_stored(seq[j].v[kvh * g.d + i], g.cache_dtype, g.v_scale);
  }
  return out;
}

ir::ValueId add_input(ir::Graph& g, const std::string& name, DataType dt, const Shape& s) {
  ir::ValueId v = g.add_value(name, dt);
  ir::SymShape sym;
  for (int64_t d : s) sym.push_back(ir::Dim::known(d));
  g.value(v).shape = sym;
  g.inputs.push_back(v);
  return v;
}

// The one-node graph of a step of T tokens; `attrs` override the geometry's attributes.
ir::Graph paged_graph(const Geometry& geo, int64_t t, int64_t layers, std::map<std::string, ir::Attribute> attrs = {}) {
  ir::Graph g;
  g.name = "paged";
  g.opset_imports[""] = 21;
  std::vector<ir::ValueId> in = {add_input(g, "q", DataType::kFloat32, {t, geo.hq, geo.d}),
                                 add_input(g, "k", DataType::kFloat32, {t, geo.hkv, geo.d}),
                                 add_input(g, "v", DataType::kFloat32, {t, geo.hkv, geo.d}),
                                 add_input(g, "positions", DataType::kInt64, {t}),
                                 add_input(g, "token_seq", DataType::kInt32, {t}),
                                 add_input(g, "block_table", DataType::kInt32, {geo.rows, geo.max_blocks}),
                                 add_input(g, "kv_pools", DataType::kInt64, {layers, 2})};
  ir::ValueId out = g.add_value("o", DataType::kFloat32);
  g.value(out).shape = ir::SymShape{ir::Dim::known(t), ir::Dim::known(geo.hq), ir::Dim::known(geo.d)};
  ir::Node n;
  n.name = "attn_paged";
  n.op = OpKind::kPagedAttention;
  n.inputs = in;
  n.outputs = {out};
  n.attrs = {{"layer", ir::Attribute::of_int(layers - 1)},
             {"block_size", ir::Attribute::of_int(geo.block_size)},
             {"cache_dtype", ir::Attribute::of_string(geo.cache_dtype)}};
  if (geo.cache_dtype == "fp8e4m3fn") {
    n.attrs["k_scale"] = ir::Attribute::of_float(geo.k_scale);
    n.attrs["v_scale"] = ir::Attribute::of_float(geo.v_scale);
  }
  for (auto& [k, a] : attrs) n.attrs[k] = a;
  g.add_node(std::move(n));
  g.outputs = {out};
  return g;
}

// The step's input tensors: tokens packed in order; the pool of the last layer at `pool`
// (earlier layers' rows hold a null address, which the op must not read).
std::vector<Tensor> step_inputs(const Geometry& geo, const std::vector<Token>& toks, const std::vector<int32_t>& table,
                                const void* pool, int64_t layers = 1) {
  const int64_t t = static_cast<int64_t>(toks.size());
  Tensor q(DataType::kFloat32, {t, geo.hq, geo.d}), k(DataType::kFloat32, {t, geo.hkv, geo.d}),
      v(DataType::kFloat32, {t, geo.hkv, geo.d}), pos(DataType::kInt64, {t}), seq(DataType::kInt32, {t}),
      bt(DataType::kInt32, {geo.rows, geo.max_blocks}), pools(DataType::kInt64, {layers, 2});
  for (int64_t i = 0; i < t; ++i) {
    std::copy(toks[i].q.begin(), toks[i].q.end(), q.data<float>() + i * geo.hq * geo.d);
    std::copy(toks[i].k.begin(), toks[i].k.end(), k.data<float>() + i * geo.hkv * geo.d);
    std::copy(toks[i].v.begin(), toks[i].v.end(), v.data<float>() + i * geo.hkv * geo.d);
    pos.data<int64_t>()[i] = toks[i].pos;
    seq.data<int32_t>()[i] = toks[i].seq;
  }
  std::copy(table.begin(), table.end(), bt.data<int32_t>());
  pools.data<int64_t>()[2 * (layers - 1)] = static_cast<int64_t>(reinterpret_cast<intptr_t>(pool));
  pools.data<int64_t>()[2 * (layers - 1) + 1] = geo.num_blocks;
  return {q, k, v, pos, seq, bt, pools};
}

StatusOr<Tensor> run_step(const Geometry& geo, const std::vector<Token>& toks, const std::vector<int32_t>& table,
                          const void* pool, int64_t layers = 1) {
  KILN_ASSIGN_OR_RETURN(auto outs, interpret(paged_graph(geo, static_cast<int64_t>(toks.size()), layers),
                                             step_inputs(geo, toks, table, pool, layers)));
  return outs[0];
}

// Max |got - naive| / max |naive| over the tokens' outputs (row i of `o` is token toks[i]).
double rel_error(const Geometry& geo, const Tensor& o, const std::vector<Token>& toks,
                 const std::vector<std::vector<Token>>& seqs) {
  double err = 0, ref_max = 0;
  for (size_t i = 0; i < toks.size(); ++i) {
    if (toks[i].seq < 0) continue;
    const std::vector<double> want = naive(geo, seqs[toks[i].seq], toks[i].pos);
    for (int64_t e = 0; e < geo.hq * geo.d; ++e) {
      err = std::max(err, std::fabs(o.data<float>()[i * geo.hq * geo.d + e] - want[e]));
      ref_max = std::max(ref_max, std::fabs(want[e]));
    }
  }
  return err / ref_max;
}

// Sequence 0 fed as a prefill of `prefill` tokens, then one token per step; every output vs naive.
void check_prefill_then_decode(const Geometry& geo, int64_t prefill, int64_t len) {
  const std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, len, 11)};
  // Blocks out of order and not the first ones: the table is what maps positions to blocks.
  const std::vector<int32_t> table = {7, 2, 9, 0, 0, 0};
  std::vector<uint8_t> pool(geo.pool_bytes(), 0);
  std::vector<Token> chunk(seqs[0].begin(), seqs[0].begin() + prefill);
  auto o = run_step(geo, chunk, table, pool.data());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_LT(rel_error(geo, *o, chunk, seqs), 1e-6) << "prefill";
  for (int64_t p = prefill; p < len; ++p) {
    auto d = run_step(geo, {seqs[0][p]}, table, pool.data());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_LT(rel_error(geo, *d, {seqs[0][p]}, seqs), 1e-6) << "decode at position " << p;
  }
}

TEST(PagedAttention, PrefillThenDecodeMatchNaiveAttention) { check_prefill_then_decode(Geometry{.hq = 2, .hkv = 2}, 5, 11); }

TEST(PagedAttention, GroupedAndMultiQuery) {
  check_prefill_then_decode(Geometry{.hq = 6, .hkv = 2}, 3, 9);
  check_prefill_then_decode(Geometry{.hq = 4, .hkv = 1}, 6, 10);
}

// Pool contents after a step: exactly the slots of real tokens changed, to their K/V.
TEST(PagedAttention, PaddingTokensWriteNothingAndOutputZero) {
  const Geometry geo;
  const auto s = random_sequence(geo, 0, 3, 5);
  const std::vector<int32_t> table = {4, 0, 0, 0, 0, 0};
  std::vector<float> pool(geo.pool_bytes() / 4, 123.f);
  std::vector<float> before = pool;
  std::vector<Token> toks = {s[0], s[1], s[2]};
  toks[0].seq = -1;
  toks[2].seq = -1;
  toks[2].pos = 1;  // a padding token's position is ignored (it would collide with token 1's slot)
  toks[1].pos = 0;  // the real token is the sequence's first
  auto o = run_step(geo, toks, table, pool.data());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  const int64_t row = geo.hq * geo.d;
  for (int64_t e = 0; e < row; ++e) {
    EXPECT_EQ(o->data<float>()[e], 0.f);
    EXPECT_EQ(o->data<float>()[2 * row + e], 0.f);
  }
  // Token 1 alone at position 0 attends to itself only: O = its V (kv head h / 2).
  for (int64_t h = 0; h < geo.hq; ++h)
    for (int64_t i = 0; i < geo.d; ++i)
      EXPECT_FLOAT_EQ(o->data<float>()[row + h * geo.d + i], toks[1].v[(h / 2) * geo.d + i]);
  size_t changed = 0;
  for (size_t i = 0; i < pool.size(); ++i) changed += pool[i] != before[i];
  EXPECT_EQ(changed, static_cast<size_t>(2 * geo.hkv * geo.d)) << "only token 1's K and V are written";
  // Its key sits at block 4, K half, head h, slot 0.
  for (int64_t h = 0; h < geo.hkv; ++h)
    for (int64_t i = 0; i < geo.d; ++i) {
      EXPECT_EQ(pool[((4 * 2 + 0) * geo.hkv + h) * geo.block_size * geo.d + i], toks[1].k[h * geo.d + i]);
      EXPECT_EQ(pool[((4 * 2 + 1) * geo.hkv + h) * geo.block_size * geo.d + i], toks[1].v[h * geo.d + i]);
    }
}

// In-flight batching: A's prefill alone; then B's prefill chunk packed with A's decode token
// (A's token in the middle of B's); then a decode token of each; then padding at the end.
TEST(PagedAttention, PrefillChunkPackedWithAnotherSequencesDecode) {
  const Geometry geo{.hq = 4, .hkv = 2, .d = 8, .block_size = 2, .num_blocks = 10, .rows = 2, .max_blocks = 4};
  const std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, 6, 21), random_sequence(geo, 1, 6, 22)};
  const std::vector<int32_t> table = {3, 8, 1, 5, 6, 0, 9, 2};  // A: 3 8 1 5, B: 6 0 9 2
  std::vector<uint8_t> pool(geo.pool_bytes(), 0);
  const auto& A = seqs[0];
  const auto& B = seqs[1];
  const std::vector<std::vector<Token>> steps = {
      {A[0], A[1], A[2]},
      {B[0], B[1], A[3], B[2], B[3]},
      {A[4], B[4]},
      {B[5], A[5], Token{-1, 0, A[0].q, A[0].k, A[0].v}},
  };
  for (size_t i = 0; i < steps.size(); ++i) {
    auto o = run_step(geo, steps[i], table, pool.data());
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_LT(rel_error(geo, *o, steps[i], seqs), 1e-6) << "step " << i;
  }
}

// 16-bit pools: K/V rounded to nearest even on append; a token attends to its own key as stored.
void check_half_pool(const std::string& cache_dtype) {
  const Geometry geo{.cache_dtype = cache_dtype};
  const std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, 7, 31)};
  const std::vector<int32_t> table = {1, 5, 0, 0, 0, 0};
  std::vector<uint16_t> pool(geo.pool_bytes() / 2, 0);
  auto first = run_step(geo, {seqs[0][0]}, table, pool.data());
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  const auto round = [&](float x) {
    return cache_dtype == "float16" ? float_to_fp16(x) : float_to_bf16(x);
  };
  bool any_rounded = false;
  for (int64_t h = 0; h < geo.hkv; ++h)
    for (int64_t i = 0; i < geo.d; ++i) {
      const int64_t at = ((1 * 2 + 0) * geo.hkv + h) * geo.block_size * geo.d + i;
      EXPECT_EQ(pool[at], round(seqs[0][0].k[h * geo.d + i]));
      EXPECT_EQ(pool[at + geo.hkv * geo.block_size * geo.d], round(seqs[0][0].v[h * geo.d + i]));
    }
  // Position 0 attends to itself only: O = V exactly as stored (not the float32 V).
  for (int64_t h = 0; h < geo.hq; ++h)
    for (int64_t i = 0; i < geo.d; ++i) {
      const float v = seqs[0][0].v[(h / 2) * geo.d + i];
      EXPECT_EQ(first->data<float>()[h * geo.d + i], as_stored(v, cache_dtype));
      any_rounded |= as_stored(v, cache_dtype) != v;
    }
  EXPECT_TRUE(any_rounded) << "the data must exercise the rounding";
  std::vector<Token> rest(seqs[0].begin() + 1, seqs[0].end());
  auto o = run_step(geo, rest, table, pool.data());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_LT(rel_error(geo, *o, rest, seqs), 1e-6);
}

// FP8 E4M3FN pool with per-tensor K and V scales (TensorRT-LLM's FP8 KV cache): the pool holds
// E4M3(x / scale) exactly (nearest even; a value past 448 * scale saturates), position 0 reads
// back V as stored (code * v_scale), and later steps match naive attention over the stored values.
TEST(PagedAttention, Float8E4M3Pool) {
  const Geometry geo{.cache_dtype = "fp8e4m3fn", .k_scale = 0.004f, .v_scale = 0.003f};
  std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, 7, 37)};
  seqs[0][0].k[3] = 5.f;   // 1250 codes: saturates to 448
  seqs[0][0].v[1] = -4.f;  // -1333: saturates to -448
  const std::vector<int32_t> table = {1, 5, 0, 0, 0, 0};
  std::vector<uint8_t> pool(geo.pool_bytes(), 0);
  auto first = run_step(geo, {seqs[0][0]}, table, pool.data());
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  for (int64_t h = 0; h < geo.hkv; ++h)
    for (int64_t i = 0; i < geo.d; ++i) {
      const int64_t at = ((1 * 2 + 0) * geo.hkv + h) * geo.block_size * geo.d + i;
      const float k = seqs[0][0].k[h * geo.d + i], v = seqs[0][0].v[h * geo.d + i];
      EXPECT_EQ(pool[at], double_to_fp8e4m3fn(static_cast<double>(k / geo.k_scale), true)) << "k " << h << "," << i;
      EXPECT_EQ(pool[at + geo.hkv * geo.block_size * geo.d], double_to_fp8e4m3fn(static_cast<double>(v / geo.v_scale), true))
          << "v " << h << "," << i;
    }
  EXPECT_EQ(fp8e4m3fn_to_float(pool[((1 * 2 + 0) * geo.hkv) * geo.block_size * geo.d + 3]), 448.f) << "saturated K";
  for (int64_t h = 0; h < geo.hq; ++h)
    for (int64_t i = 0; i < geo.d; ++i)
      EXPECT_EQ(first->data<float>()[h * geo.d + i], as_stored(seqs[0][0].v[(h / 2) * geo.d + i], geo.cache_dtype, geo.v_scale));
  std::vector<Token> rest(seqs[0].begin() + 1, seqs[0].end());
  auto o = run_step(geo, rest, table, pool.data());
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_LT(rel_error(geo, *o, rest, seqs), 1e-6);
  // A non-positive scale is refused, naming the node.
  auto bad = interpret(paged_graph(geo, 1, 1, {{"k_scale", ir::Attribute::of_float(0.f)}}),
                       step_inputs(geo, {seqs[0][0]}, table, pool.data()));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("k_scale"), std::string::npos) << bad.status().to_string();
}

TEST(PagedAttention, Float16Pool) { check_half_pool("float16"); }
TEST(PagedAttention, BFloat16Pool) { check_half_pool("bfloat16"); }

// Each bad step fails naming the node and the problem, and writes nothing to the pool.
TEST(PagedAttention, ErrorsNameTheNodeAndWriteNothing) {
  const Geometry geo;
  const auto s = random_sequence(geo, 0, 2, 41);
  const std::vector<int32_t> good = {3, 4, 5, 6, 7, 8};
  std::vector<float> pool(geo.pool_bytes() / 4, 5.f);
  const std::vector<float> before = pool;
  auto expect_error = [&](const ir::Graph& g, const std::vector<Tensor>& in, const std::string& what) {
    auto r = interpret(g, in);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.status().message().find("attn_paged"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().to_string();
    EXPECT_EQ(pool, before) << what;
  };
  const ir::Graph g = paged_graph(geo, 2, 1);
  {
    std::vector<Token> t = {s[0], s[1]};
    t[1].seq = 2;  // R = 2 rows
    expect_error(g, step_inputs(geo, t, good, pool.data()), "token_seq 2");
  }
  {
    std::vector<Token> t = {s[0], s[1]};
    t[1].pos = geo.block_size * geo.max_blocks;  // one block past the table's row
    expect_error(g, step_inputs(geo, t, good, pool.data()), "needs block 3");
  }
  {
    std::vector<int32_t> bad = good;
    bad[0] = static_cast<int32_t>(geo.num_blocks);
    expect_error(g, step_inputs(geo, {s[0], s[1]}, bad, pool.data()), "outside the pool's 12 blocks");
    bad[0] = -1;
    expect_error(g, step_inputs(geo, {s[0], s[1]}, bad, pool.data()), "= -1 is outside");
  }
  expect_error(g, step_inputs(geo, {s[0], s[1]}, good, nullptr), "null pool address");
  {
    // layer 1 of a kv_pools with one row
    const ir::Graph g2 = paged_graph(geo, 2, 1, {{"layer", ir::Attribute::of_int(1)}});
    expect_error(g2, step_inputs(geo, {s[0], s[1]}, good, pool.data()), "layer 1 is not a row of kv_pools");
  }
  {
    const ir::Graph g3 = paged_graph(geo, 2, 1, {{"cache_dtype", ir::Attribute::of_string("float8")}});
    expect_error(g3, step_inputs(geo, {s[0], s[1]}, good, pool.data()), "cache_dtype 'float8'");
  }
  // The same good step then runs (the errors above left no state behind).
  auto ok = run_step(geo, {s[0], s[1]}, good, pool.data());
  EXPECT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_NE(pool, before);
}

// A row of kv_pools other than the op's layer is never read: layer 1's op with row 0 null.
TEST(PagedAttention, ReadsOnlyItsLayersPool) {
  const Geometry geo;
  const std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, 3, 51)};
  std::vector<float> pool(geo.pool_bytes() / 4, 0.f);
  auto o = run_step(geo, seqs[0], {2, 3, 4, 0, 0, 0}, pool.data(), /*layers=*/2);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_LT(rel_error(geo, *o, seqs[0], seqs), 1e-6);
}

// The builder keeps the op: not folded, not merged with its twin, not removed; in a CUDA fp16
// layer graph its integer inputs keep their dtypes. The CPU plan, run twice through the
// Engine/ExecutionContext API, appends to the pool and matches the interpreter.
TEST(PagedAttention, SurvivesTheBuildersPipelines) {
  const Geometry geo;
  const std::vector<std::vector<Token>> seqs = {random_sequence(geo, 0, 4, 61)};
  // Two identical PagedAttention nodes (same inputs, same attributes) whose outputs are added:
  // common-subexpression elimination must not merge them (each appends).
  ir::Graph g = paged_graph(geo, 4, 1);
  ir::Node twin = g.nodes[0];
  twin.name = "attn_paged_twin";
  ir::ValueId o2 = g.add_value("o2", DataType::kFloat32);
  g.value(o2).shape = g.value(g.outputs[0]).shape;
  twin.outputs = {o2};
  g.add_node(twin);
  ir::ValueId sum = g.add_value("sum", DataType::kFloat32);
  g.value(sum).shape = g.value(o2).shape;
  ir::Node add;
  add.name = "sum";
  add.op = OpKind::kAdd;
  add.opset = 21;
  add.inputs = {g.outputs[0], o2};
  add.outputs = {sum};
  g.add_node(add);
  g.outputs = {sum};

  BuilderConfig cpu;
  cpu.target = TargetDevice::kCpu;
  auto opt = optimized_graph(g, cpu);
  ASSERT_TRUE(opt.ok()) << opt.status().to_string();
  int paged = 0;
  for (const ir::Node& n : opt->nodes) paged += !n.removed && n.op == OpKind::kPagedAttention;
  EXPECT_EQ(paged, 2);

  BuilderConfig half = cpu;
  half.target = TargetDevice::kCuda;
  half.fp16 = true;
  auto laid = cuda_layer_graph(g, half, nullptr);
  ASSERT_TRUE(laid.ok()) << laid.status().to_string();
  paged = 0;
  for (const ir::Node& n : laid->nodes) {
    if (n.removed || n.op != OpKind::kPagedAttention) continue;
    ++paged;
    EXPECT_EQ(laid->value(n.inputs[3]).dtype, DataType::kInt64);
    EXPECT_EQ(laid->value(n.inputs[4]).dtype, DataType::kInt32);
    EXPECT_EQ(laid->value(n.inputs[5]).dtype, DataType::kInt32);
    EXPECT_EQ(laid->value(n.inputs[6]).dtype, DataType::kInt64);
  }
  EXPECT_EQ(paged, 2);

  auto plan = build_from_graph(g, cpu);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<float> pool(geo.pool_bytes() / 4, 0.f);
  const std::vector<int32_t> table = {6, 1, 0, 0, 0, 0};
  const std::vector<Tensor> in = step_inputs(geo, seqs[0], table, pool.data());
  auto ctx = (*engine)->create_execution_context();
  size_t k = 0;
  for (const IOTensor& io : (*engine)->io_tensors()) {
    if (io.is_input) {
      ASSERT_TRUE(ctx->set_input(io.desc.name, in[k++]).ok()) << io.desc.name;
    }
  }
  ASSERT_TRUE(ctx->execute().ok());
  auto got = ctx->output("sum");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  std::vector<float> pool_ref(pool.size(), 0.f);
  auto ref = interpret(g, step_inputs(geo, seqs[0], table, pool_ref.data()));
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  EXPECT_EQ(pool, pool_ref);
  EXPECT_NE(pool, std::vector<float>(pool.size(), 0.f));
  for (int64_t i = 0; i < got->numel(); ++i) EXPECT_NEAR(got->data<float>()[i], (*ref)[0].data<float>()[i], 1e-6);
  for (int64_t i = 0; i < got->numel(); ++i) {  // the sum is 2 O
    const int64_t t = i / (geo.hq * geo.d), e = i % (geo.hq * geo.d);
    EXPECT_NEAR(got->data<float>()[i], 2 * naive(geo, seqs[0], t)[e], 1e-5);
  }
}

}  // namespace
}  // namespace kiln
