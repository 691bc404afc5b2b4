// Transformer rows: LayerNormalization, RMSNormalization, Gelu, Reduce*, batched MatMul,
// MatMulBias, Attention (MHA / GQA / MQA, causal, masks, rank 3, a chunked scratch; the same cases
// again on the fused FlashAttention-2 tactic alone, Attention_flash_*), PagedAttention (an
// all-padding step), Rope (angles and caches, every layout), whole
// blocks through the optimizer, and integer inputs (embedding Gather, attention-mask Cast).
// Cases from the former tests/gpu/gpu_ops_test.cc, gpu_transformer_test.cc and
// gpu_int_inputs_test.cc, one row each.
#include <cmath>
#include <map>
#include <random>

#include "op_table/op_table.h"
#include "op_table/transformer_graphs.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

std::string dims_name(const Shape& s) {
  std::string r;
  for (int64_t d : s) {
    if (!r.empty()) r.push_back('x');
    r.append(std::to_string(d));
  }
  return r;
}

// "axis2", "axism1" (negative axes spelled with an m: test names allow no '-').
std::string axis_name(int64_t axis) {
  std::string r = "_axis";
  if (axis < 0) r.push_back('m');
  r.append(std::to_string(axis < 0 ? -axis : axis));
  return r;
}

Row layer_norm(const Shape& in, int64_t axis, bool bias) {
  Row r;
  r.name = "LayerNormalization_" + dims_name(in) + axis_name(axis) +
           (bias ? "" : "_nobias");
  r.make = [=] {
    TinyGraph t;
    auto x = t.input("x", in);
    Shape ns(in.begin() + (axis < 0 ? static_cast<int64_t>(in.size()) + axis : axis), in.end());
    std::vector<ir::ValueId> ins = {x, t.constant("scale", nonzero(ns, 2))};
    if (bias) ins.push_back(t.constant("bias", nonzero(ns, 3)));
    t.g.outputs = {t.node(OpKind::kLayerNormalization, "ln", ins, in,
                          {{"axis", Attribute::of_int(axis)}, {"epsilon", Attribute::of_float(1e-5f)}})};
    // Offset 3: a mean far from zero checks the two-pass variance.
    return OpCase{t.g, {nonzero(in, 1, 1.f, 3.f)}};
  };
  return r;
}

Row rms_norm(const Shape& x, int64_t axis, const Shape& scale, uint32_t seed) {
  Row r;
  r.name = "RMSNormalization_" + dims_name(x) + axis_name(axis) +
           "_scale" + dims_name(scale);
  r.tol.bf16 = 2e-2;
  r.make = [=] {
    TinyGraph t;
    auto xi = t.input("x", x);
    t.g.outputs = {t.node(OpKind::kRMSNormalization, "rms", {xi, t.constant("w", nonzero(scale, seed + 1))}, x,
                          {{"axis", Attribute::of_int(axis)}, {"epsilon", Attribute::of_float(1e-6f)}})};
    return OpCase{t.g, {nonzero(x, seed + 10, 3.f)}};
  };
  return r;
}

Row gelu(const std::string& approx, const Shape& s) {
  Row r;
  r.name = "Gelu_" + approx + "_" + dims_name(s);
  r.make = [=] {
    OpCase c = one_op(OpKind::kGelu, s, s, nullptr, {{"approximate", Attribute::of_string(approx)}}, nonzero(s, 4));
    c.graph.nodes[0].opset = 20;
    return c;
  };
  return r;
}

struct ReduceArgs {
  OpKind op;
  Shape in;
  std::vector<int64_t> axes;
  bool keep, axes_input;
  Shape out;
  float offset = 0;  // added to the never-zero data (ReduceLogSum needs positive sums)
};

Row reduce(const std::string& name, const ReduceArgs& k) {
  Row r;
  r.name = std::string(ir::op_name(k.op)) + "_" + name;
  r.make = [=] {
    std::map<std::string, Attribute> attrs = {{"keepdims", Attribute::of_int(k.keep)}};
    if (!k.axes_input && !k.axes.empty()) attrs["axes"] = Attribute::of_ints(k.axes);
    auto extra = [&](TinyGraph& t) {
      return k.axes_input ? std::vector<ir::ValueId>{t.constant("axes", ints(k.axes))} : std::vector<ir::ValueId>{};
    };
    return one_op(k.op, k.in, k.out, extra, attrs, nonzero(k.in, 5, 1.f, k.offset));
  };
  return r;
}

Row matmul_bias(const Shape& a, int64_t n, uint32_t seed) {
  Row r;
  r.name = "MatMulBias_" + dims_name(a) + "_n" + std::to_string(n);
  r.make = [=] {
    TinyGraph t;
    const int64_t k = a.back();
    Shape ys = a;
    ys.back() = n;
    auto ai = t.input("a", a);
    Tensor w = nonzero({k, n}, seed + 1, 1.f / std::sqrt(static_cast<float>(k)));
    t.g.outputs = {t.node(OpKind::kMatMulBias, "mmb", {ai, t.constant("w", w), t.constant("b", nonzero({n}, seed + 2))}, ys)};
    return OpCase{t.g, {nonzero(a, seed + 10)}};
  };
  return r;
}

// A GEMM and the Relu after it, unfused as an exporter writes them: the optimizer gives the GEMM
// the Relu as its epilogue (passes/fuse_gemm_activation.cc, docs/decisions/0058), so the plan has
// no Relu layer and the CUDA GEMM's tactic says "+relu" (cuBLASLt's RELU / RELU_BIAS epilogue).
// Gemm: 2-D, W [N, K] with transB or [K, N], C absent or [N] / [1, N], alpha / beta; MatMulBias:
// A of rank 3 or 4. Inputs of both signs, so the Relu zeroes about half the values.
Row gemm_relu(const std::string& name, int64_t m, int64_t k, int64_t n, bool trans_b, int bias_rank, float alpha,
              float beta, uint32_t seed) {
  Row r;
  r.name = "Gemm_Relu_" + name;
  r.expect_ops = {"Gemm"};
  r.absent_ops = {"Relu"};
  r.expect_tactic = "+relu";
  r.make = [=] {
    TinyGraph t;
    auto a = t.input("a", {m, k});
    Tensor w = nonzero(trans_b ? Shape{n, k} : Shape{k, n}, seed + 1, 1.f / std::sqrt(static_cast<float>(k)));
    std::vector<ir::ValueId> ins = {a, t.constant("w", w)};
    if (bias_rank > 0) ins.push_back(t.constant("c", nonzero(bias_rank == 1 ? Shape{n} : Shape{1, n}, seed + 2)));
    std::map<std::string, Attribute> attrs;
    if (trans_b) attrs["transB"] = Attribute::of_int(1);
    if (alpha != 1.f) attrs["alpha"] = Attribute::of_float(alpha);
    if (beta != 1.f) attrs["beta"] = Attribute::of_float(beta);
    auto y = t.node(OpKind::kGemm, "fc", ins, {m, n}, attrs);
    t.g.outputs = {t.node(OpKind::kRelu, "relu", {y}, {m, n})};
    return OpCase{t.g, {nonzero({m, k}, seed + 10)}};
  };
  return r;
}

// A MatMulBias and the element-wise activation `act` after it, which the optimizer folds into the
// GEMM (passes::fuse_gemm_activation): no `act` layer is left and a tactic name says `tactic`.
Row matmul_bias_then(const std::string& what, OpKind act, const std::map<std::string, Attribute>& attrs, const std::string& tactic,
                     const Shape& a, int64_t n, uint32_t seed) {
  Row r = matmul_bias(a, n, seed);
  r.name = "MatMulBias_" + what + "_" + dims_name(a) + "_n" + std::to_string(n);
  r.expect_ops = {"MatMulBias"};
  r.absent_ops = {ir::op_name(act)};
  r.expect_tactic = tactic;
  auto make = r.make;
  r.make = [=] {
    OpCase c = make();
    TinyGraph t;
    t.g = c.graph;
    Shape ys = a;
    ys.back() = n;
    t.g.outputs = {t.node(act, "act", {t.g.outputs[0]}, ys, attrs)};
    return OpCase{t.g, c.inputs};
  };
  return r;
}

Row matmul_bias_relu(const Shape& a, int64_t n, uint32_t seed) {
  return matmul_bias_then("Relu", OpKind::kRelu, {}, "+relu", a, n, seed);
}

// GPT-2's MLP: MatMul + bias, then Gelu(approximate = "tanh"): one GEMM with activation GeluTanh —
// cuBLASLt's GELU epilogue where the device check says it computes that formula, else the GEMM and
// Kiln's GELU kernel; either way a tactic name says "gelu_tanh" and no Gelu layer is left.
Row matmul_bias_gelu_tanh(const Shape& a, int64_t n, uint32_t seed) {
  return matmul_bias_then("GeluTanh", OpKind::kGelu, {{"approximate", Attribute::of_string("tanh")}}, "gelu_tanh", a, n, seed);
}

// A MatMul + bias and a residual Add after it, as a transformer block's output projection is
// exported: the optimizer folds the Add into the GEMM (MatMulBias input 3, passes::
// fuse_gemm_residual), so the plan has no Add layer and the CUDA GEMM's tactic says "+residual"
// (cuBLASLt's C with beta = 1). The residual is the block's input, computed before the GEMM.
Row matmul_bias_residual(const Shape& a, uint32_t seed) {
  Row r;
  r.name = "MatMulBias_Residual_" + dims_name(a);
  r.expect_ops = {"MatMulBias"};
  r.absent_ops = {"Add"};
  r.expect_tactic = "+residual";
  r.make = [=] {
    TinyGraph t;
    const int64_t k = a.back();
    auto x = t.input("x", a);
    Tensor w = nonzero({k, k}, seed + 1, 1.f / std::sqrt(static_cast<float>(k)));
    auto m = t.node(OpKind::kMatMul, "proj", {x, t.constant("w", w)}, a);
    auto y = t.node(OpKind::kAdd, "proj_bias", {m, t.constant("b", nonzero({k}, seed + 2))}, a);
    t.g.outputs = {t.node(OpKind::kAdd, "residual", {y, x}, a)};
    return OpCase{t.g, {nonzero(a, seed + 10)}};
  };
  return r;
}

// QuantLinear (passes/fuse_qdq_linear.cc): X [*, K] quantized per tensor, an 8-bit weight [N, K]
// (int8, or E4M3FN bytes), a scale per output channel, an optional bias; int8 with a zero point
// too (the epilogue's row-sum correction). per_tensor: every channel the same scale (per-tensor
// weight scales; FP8 with a 16-bit Y then runs cuBLASLt's fused scalar-scale GEMM, decision 0085).
Row quant_linear(const Shape& x, int64_t n, bool fp8, bool bias, int64_t zp, uint32_t seed, bool relu = false,
                 bool per_tensor = false) {
  Row r;
  r.name = std::string("QuantLinear_") + (fp8 ? "fp8_" : "int8_") + dims_name(x) + "_n" + std::to_string(n) +
           (bias ? "_bias" : "") + (zp ? "_zp" : "") + (relu ? "_relu" : "") + (per_tensor ? "_wtensor" : "");
  // FP8: Hopper's FP8 tensor cores accumulate with fewer bits than float32 (about 14 mantissa
  // bits, DeepSeek-V3 report, arXiv 2412.19437 §3.3.2); measured on an H100 (session 12) a K = 64
  // row at 3.7e-4 of max |y| against the CPU's float32 sums, so fp32 plans get 1e-3 there.
  if (fp8) r.tol.fp32 = 1e-3;
  r.make = [=] {
    TinyGraph t;
    const int64_t k = x.back();
    Shape ys = x;
    ys.back() = n;
    auto xi = t.input("x", x);
    Tensor w(fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8, {n, k});
    uint32_t st = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n * k; ++i) {
      st = st * 1664525u + 1013904223u;
      const uint32_t v = st >> 24;
      // int8: -127..127; E4M3FN: any finite byte (0x7F / 0xFF are NaN) of magnitude <= 1.5.
      w.data<int8_t>()[i] = fp8 ? static_cast<int8_t>((v & 0x80) | ((v & 0x7f) % 0x39)) : static_cast<int8_t>(v % 255 - 127);
    }
    Tensor ws = nonzero({n}, seed + 1);
    for (int64_t i = 0; i < n; ++i)
      ws.data<float>()[i] = per_tensor ? 0.007f : 0.002f + 0.01f * std::fabs(ws.data<float>()[i]);
    std::vector<ir::ValueId> ins = {xi, t.constant("w", w), t.constant("w_scale", ws)};
    if (bias) ins.push_back(t.constant("b", nonzero({n}, seed + 2)));
    std::map<std::string, Attribute> attrs = {{"x_scale", Attribute::of_float(0.02f)},
                                              {"x_zero_point", Attribute::of_int(zp)}};
    if (relu) attrs["activation"] = Attribute::of_string("Relu");
    t.g.outputs = {t.node(OpKind::kQuantLinear, "ql", ins, ys, attrs)};
    return OpCase{t.g, {nonzero(x, seed + 10)}};
  };
  return r;
}

// QuantConv (passes/fuse_qdq_conv.cc; docs/decisions/0078): X [N, C, H, W] quantized per tensor,
// an 8-bit weight [K, C, R, S] (int8, or E4M3FN bytes), a scale per output channel, an optional
// bias and residual, ReLU. Stored NHWC on the CUDA path at every precision. The 1x1 rows (C, K
// multiples of 16) take the cuBLASLt GEMM tactic, the INT8 3x3 rows cuDNN INT8, the FP8 3x3 rows
// cuDNN's FP8 graph conv (or Kiln's reference conv where the builder finds it faster).
Row quant_conv(const Shape& x, int64_t k, int64_t ks, int64_t stride, bool fp8, bool residual, bool relu, int64_t zp,
               uint32_t seed) {
  Row r;
  const int64_t pad = ks / 2;
  r.name = std::string("QuantConv_") + (fp8 ? "fp8_" : "int8_") + dims_name(x) + "_k" + std::to_string(k) + "_" +
           std::to_string(ks) + "x" + std::to_string(ks) + "_s" + std::to_string(stride) + (residual ? "_residual" : "") +
           (relu ? "_relu" : "") + (zp ? "_zp" : "");
  r.make = [=] {
    TinyGraph t;
    const int64_t c = x[1], oh = (x[2] + 2 * pad - ks) / stride + 1, ow = (x[3] + 2 * pad - ks) / stride + 1;
    const Shape ys = {x[0], k, oh, ow};
    auto xi = t.input("x", x);
    Tensor w(fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8, {k, c, ks, ks});
    uint32_t st = seed * 2654435761u + 1;
    for (int64_t i = 0; i < w.numel(); ++i) {
      st = st * 1664525u + 1013904223u;
      const uint32_t v = st >> 24;
      w.data<int8_t>()[i] = fp8 ? static_cast<int8_t>((v & 0x80) | ((v & 0x7f) % 0x39)) : static_cast<int8_t>(v % 255 - 127);
    }
    Tensor ws = nonzero({k}, seed + 1);
    for (int64_t i = 0; i < k; ++i) ws.data<float>()[i] = 0.002f + 0.01f * std::fabs(ws.data<float>()[i]);
    std::vector<ir::ValueId> ins = {xi, t.constant("w", w), t.constant("w_scale", ws), t.constant("b", nonzero({k}, seed + 2))};
    std::vector<Tensor> inputs = {nonzero(x, seed + 10)};
    if (residual) {
      ins.push_back(t.input("r", ys));
      inputs.push_back(nonzero(ys, seed + 11));
    }
    std::map<std::string, Attribute> attrs = {{"x_scale", Attribute::of_float(0.02f)},
                                              {"x_zero_point", Attribute::of_int(zp)},
                                              {"strides", Attribute::of_ints({stride, stride})},
                                              {"pads", Attribute::of_ints({pad, pad, pad, pad})},
                                              {"activation", Attribute::of_string(relu ? "Relu" : "")}};
    t.g.outputs = {t.node(OpKind::kQuantConv, "qc", ins, ys, attrs)};
    return OpCase{t.g, inputs};
  };
  return r;
}

// Two QuantConvs passing 8-bit activations (passes/requantize_quant_conv.cc; docs/decisions/0081):
// the producer (k1 x k1, + residual when asked, ReLU) writes QuantizeLinear(y, y_scale,
// y_zero_point) codes (int8 or E4M3FN, 1 byte per element: StorageType kI8 / kF8E4M3 on the GPU),
// the consumer (k2 x k2, pad k2 / 2) takes them as its X unquantized and writes float. The GPU
// checks the epilogue's requantization (every tactic of the producer but the FP8 cuDNN graph) and
// an 8-bit X that skips the quantize kernel against the CPU. fp32 tolerance 2e-3: the codes are
// equal on both sides for INT8 (integer sums, the epilogue rounded step by step as the CPU), but an
// FP8 sum in float32 (GPU) vs double (CPU) may move a code at a rounding boundary by one step.
Row quant_conv_chain(const Shape& x, int64_t k1, int64_t k1s, int64_t k2, int64_t k2s, bool fp8, bool residual,
                     int64_t y_zp, uint32_t seed) {
  Row r;
  r.name = std::string("QuantConv_") + (fp8 ? "fp8_" : "int8_") + "8bit_chain_" + dims_name(x) + "_k" +
           std::to_string(k1) + "_" + std::to_string(k1s) + "x" + std::to_string(k1s) + "_k" + std::to_string(k2) + "_" +
           std::to_string(k2s) + "x" + std::to_string(k2s) + (residual ? "_residual" : "") + (y_zp ? "_zp" : "");
  r.tol = Tolerance{2e-3, 2e-2, 6e-2};
  r.expect_ops = {"QuantConv"};
  r.expect_tactic = fp8 ? "y=fp8e4m3" : "y=int8";
  r.quant_conv = true;  // FP8 convs pass 8-bit activations only with it
  r.make = [=] {
    TinyGraph t;
    const DataType q = fp8 ? DataType::kFloat8E4M3FN : DataType::kInt8;
    uint32_t st = seed * 2654435761u + 1;
    auto weight = [&](int64_t k, int64_t c, int64_t ks) {
      Tensor w(q, {k, c, ks, ks});
      for (int64_t i = 0; i < w.numel(); ++i) {
        st = st * 1664525u + 1013904223u;
        const uint32_t v = st >> 24;
        w.data<int8_t>()[i] = fp8 ? static_cast<int8_t>((v & 0x80) | ((v & 0x7f) % 0x39)) : static_cast<int8_t>(v % 255 - 127);
      }
      return w;
    };
    auto scales = [&](int64_t k, uint32_t s) {
      Tensor ws = nonzero({k}, s);
      for (int64_t i = 0; i < k; ++i) ws.data<float>()[i] = 0.002f + 0.01f * std::fabs(ws.data<float>()[i]);
      return ws;
    };
    const int64_t c = x[1], p1 = k1s / 2, p2 = k2s / 2;
    const Shape ys = {x[0], k1, x[2] + 2 * p1 - k1s + 1, x[3] + 2 * p1 - k1s + 1};
    const Shape zs = {x[0], k2, ys[2] + 2 * p2 - k2s + 1, ys[3] + 2 * p2 - k2s + 1};
    auto xi = t.input("x", x);
    std::vector<ir::ValueId> ins1 = {xi, t.constant("w1", weight(k1, c, k1s)), t.constant("w1_scale", scales(k1, seed + 1)),
                                     t.constant("b1", nonzero({k1}, seed + 2))};
    std::vector<Tensor> inputs = {nonzero(x, seed + 10)};
    if (residual) {
      ins1.push_back(t.input("r", ys));
      inputs.push_back(nonzero(ys, seed + 11));
    }
    const float y_scale = fp8 ? 0.002f : 0.04f;
    auto y = t.node(OpKind::kQuantConv, "qc1", ins1, ys,
                    {{"x_scale", Attribute::of_float(0.02f)}, {"x_zero_point", Attribute::of_int(0)},
                     {"pads", Attribute::of_ints({p1, p1, p1, p1})}, {"activation", Attribute::of_string("Relu")},
                     {"y_scale", Attribute::of_float(y_scale)}, {"y_zero_point", Attribute::of_int(y_zp)},
                     {"y_type", Attribute::of_string(dtype_name(q))}});
    t.g.value(y).dtype = q;
    std::vector<ir::ValueId> ins2 = {y, t.constant("w2", weight(k2, k1, k2s)), t.constant("w2_scale", scales(k2, seed + 3)),
                                     t.constant("b2", nonzero({k2}, seed + 4))};
    t.g.outputs = {t.node(OpKind::kQuantConv, "qc2", ins2, zs,
                          {{"x_scale", Attribute::of_float(y_scale)}, {"x_zero_point", Attribute::of_int(y_zp)},
                           {"pads", Attribute::of_ints({p2, p2, p2, p2})}, {"activation", Attribute::of_string("")}})};
    return OpCase{t.g, inputs};
  };
  return r;
}

// PagedAttention (docs/decisions/0059, 0063) of a step whose tokens are all padding. The pool is
// named by address in input kv_pools (host memory for a CPU plan, device memory for a CUDA plan),
// so no one input set names a pool both plans can use: padding tokens read and write nothing and
// give zeros on both (kv_pools holds an aligned placeholder address, never dereferenced). Steps
// with real tokens: tests/llm/paged_attention_test.cc (CPU) and tests/gpu/
// gpu_paged_attention_test.cc (the CUDA plan against the CPU plan, pools included).
Row paged_attention_all_padding() {
  Row r;
  r.name = "PagedAttention_all_padding_GQA_8_2_d64";
  r.tol = kMoveTol;  // zeros, bit-exact
  r.make = [] {
    constexpr int64_t kT = 5;
    TinyGraph t;
    std::vector<ir::ValueId> ins = {t.input("q", {kT, 8, 64}), t.input("k", {kT, 2, 64}), t.input("v", {kT, 2, 64}),
                                    int_input(t, "positions", {kT}, DataType::kInt64),
                                    int_input(t, "token_seq", {kT}, DataType::kInt32),
                                    int_input(t, "block_table", {2, 3}, DataType::kInt32),
                                    int_input(t, "kv_pools", {1, 2}, DataType::kInt64)};
    t.g.outputs = {t.node(OpKind::kPagedAttention, "paged", ins, {kT, 8, 64},
                          {{"layer", Attribute::of_int(0)}, {"block_size", Attribute::of_int(4)},
                           {"cache_dtype", Attribute::of_string("float16")}})};
    return OpCase{t.g,
                  {nonzero({kT, 8, 64}, 1400), nonzero({kT, 2, 64}, 1401), nonzero({kT, 2, 64}, 1402),
                   ints({0, 1, 2, 3, 4}), ints({-1, -1, -1, -1, -1}, DataType::kInt32),
                   ints({0, 1, 2, 3, 4, 5}, DataType::kInt32, {2, 3}), ints({256, 4}, DataType::kInt64, {1, 2})}};
  };
  return r;
}

// Rope (ops.def; docs/decisions/0067): one q / k tensor rotated at int positions, angles from an
// inv_freq table (theta 500000, as Llama 3) or cos / sin read from caches. Positions reach 100000
// (angles ~1e5 rad: a fast-math sin / cos would be off by far more than the tolerance). Layouts:
// packed [T, H, D] (odd head counts), [B, H, S, D], [B, S, H, D] (head_axis 2); rotate_half and
// interleaved pairs; a rotary_dim below D (features past it copied). 16-byte vector path for
// D % 8 == 0 halves, element by element otherwise.
struct RopeArgs {
  Shape x;
  int64_t head_axis = 1;
  int64_t rotary_dim = 0;  // 0 = D
  bool interleaved = false;
  int64_t cache_positions = 0;  // > 0: cos / sin caches [P, R/2] instead of inv_freq
  DataType positions = DataType::kInt64;
};

Row rope_row(const std::string& name, const RopeArgs& a, uint32_t seed) {
  Row r;
  r.name = "Rope_" + name;
  r.make = [=] {
    TinyGraph t;
    const ir::ValueId x = t.input("x", a.x);
    Shape ps;
    for (size_t i = 0; i + 1 < a.x.size(); ++i)
      if (static_cast<int64_t>(i) != a.head_axis) ps.push_back(a.x[i]);
    const ir::ValueId pos = int_input(t, "positions", ps, a.positions);
    const int64_t half = (a.rotary_dim > 0 ? a.rotary_dim : a.x.back()) / 2;
    std::vector<ir::ValueId> ins = {x, pos};
    if (a.cache_positions > 0) {
      Tensor c(DataType::kFloat32, {a.cache_positions, half}), s(DataType::kFloat32, {a.cache_positions, half});
      for (int64_t p = 0; p < a.cache_positions; ++p)
        for (int64_t i = 0; i < half; ++i) {
          const double ang = static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(i) / (2.0 * half));
          c.data<float>()[p * half + i] = static_cast<float>(std::cos(ang));
          s.data<float>()[p * half + i] = static_cast<float>(std::sin(ang));
        }
      ins.push_back(t.constant("cos_cache", std::move(c)));
      ins.push_back(t.constant("sin_cache", std::move(s)));
    } else {
      Tensor inv(DataType::kFloat32, {half});
      for (int64_t i = 0; i < half; ++i)
        inv.data<float>()[i] = static_cast<float>(std::pow(500000.0, -2.0 * static_cast<double>(i) / (2.0 * half)));
      ins.push_back(t.constant("inv_freq", std::move(inv)));
    }
    t.g.outputs = {t.node(OpKind::kRope, "rope", ins, a.x,
                          {{"head_axis", Attribute::of_int(a.head_axis)}, {"rotary_dim", Attribute::of_int(a.rotary_dim)},
                           {"interleaved", Attribute::of_int(a.interleaved ? 1 : 0)}})};
    int64_t n = 1;
    for (int64_t d : ps) n *= d;
    std::vector<int64_t> p(static_cast<size_t>(n));
    const int64_t hi = a.cache_positions > 0 ? a.cache_positions - 1 : 131071;
    std::mt19937 rng(seed);
    for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = std::uniform_int_distribution<int64_t>(0, hi)(rng);
    p[0] = 0;  // the identity rotation
    if (a.cache_positions == 0 && n > 1) p[1] = 100000;
    return OpCase{t.g, {nonzero(a.x, seed + 1), ints(p, a.positions, ps)}};
  };
  return r;
}

Row attention(const std::string& name, const AttnCase& c, uint32_t seed, size_t workspace_limit = 0) {
  Row r;
  r.name = "Attention_" + name;
  r.workspace_limit = workspace_limit;
  r.make = [=] { return attention_graph(c, seed); };
  return r;
}

// The fused FlashAttention-2 tactic (kernels_flash_attention.cu, docs/decisions/0061) alone: only
// Kiln's kernels are enabled, so the Attention layer cannot take the cuBLASLt path, and the tactic
// name says which kernel ran. fp16 / bf16 only (the kernel's storage types); sequence lengths off
// the 64-row / 64-key tiles check the tails.
Row flash_attention(const std::string& name, const AttnCase& c, uint32_t seed) {
  Row r = attention("flash_" + name, c, seed);
  r.precisions = {Precision::kFp16, Precision::kBf16};
  r.tactic_sources = "kiln";
  r.expect_tactic = "kiln.flash_attention";
  return r;
}

// head_layout "bshd" (docs/decisions/0065): the case written as the exporters write it (Q/K/V
// [B, S, H, D] through Transpose(0,2,1,3), the output through the same), which the optimizer
// folds into one Attention layer of head_layout "bshd" — no Transpose left in the plan — checked
// against the CPU reference of the unfolded graph. The CUDA plan reads that layout through the
// fused kernel's strides or the cuBLASLt path's copies, whichever the builder times faster; fp32
// and head sizes the fused kernel does not take get explicit transpose layers from the factory.
Row attention_bshd(const std::string& name, AttnCase c, uint32_t seed) {
  c.bshd = true;
  Row r = attention("bshd_" + name, c, seed);
  r.expect_ops = {"Attention"};
  r.absent_ops = {"Transpose"};
  return r;
}

// The same on the fused kernel alone (tactic sources "kiln"): its tactic name ends in "bshd", so
// the kernel read Q/K/V and wrote O through the bshd strides.
Row flash_attention_bshd(const std::string& name, AttnCase c, uint32_t seed) {
  Row r = attention_bshd("flash_" + name, c, seed);
  r.precisions = {Precision::kFp16, Precision::kBf16};
  r.tactic_sources = "kiln";
  r.expect_tactic = "bshd";
  return r;
}

Row graph_row(const std::string& name, std::function<OpCase()> make, std::vector<std::string> expect, Tolerance tol = kArithTol) {
  Row r;
  r.name = name;
  r.make = std::move(make);
  r.expect_ops = std::move(expect);
  r.tol = tol;
  return r;
}

}  // namespace

std::vector<Row> transformer_rows() {
  std::vector<Row> rows = {
      layer_norm({4, 64}, -1, true), layer_norm({2, 3, 8, 16}, -1, true), layer_norm({2, 5, 24}, 1, false),
      layer_norm({3, 768}, -1, true), layer_norm({1, 1, 7}, 2, true),
      rms_norm({4, 64}, -1, {64}, 700), rms_norm({2, 3, 80}, -1, {80}, 710), rms_norm({2, 5, 24}, 1, {5, 24}, 720),
      rms_norm({3, 7, 33}, -1, {1}, 730), rms_norm({2, 4096}, -1, {4096}, 740), rms_norm({1, 9, 64}, 2, {1, 1, 64}, 750),
      // decode rows through the 16-byte path (1, 2 and 4 vectors per thread) and one past it (8200 > 8192)
      rms_norm({1, 2048}, -1, {2048}, 760), rms_norm({8, 3072}, -1, {3072}, 770), rms_norm({3, 8192}, -1, {8192}, 780),
      rms_norm({2, 8200}, -1, {8200}, 790),
      gelu("none", {5, 33}), gelu("none", {2, 4, 6, 8}), gelu("tanh", {5, 33}), gelu("tanh", {2, 4, 6, 8}),
      reduce("last_axis_keep", {OpKind::kReduceMean, {4, 8, 32}, {-1}, true, false, {4, 8, 1}}),
      reduce("long_rows", {OpKind::kReduceMean, {3, 1000}, {1}, false, false, {3}}),
      reduce("middle_pair_axes_input", {OpKind::kReduceSum, {2, 3, 4, 5}, {1, 2}, true, true, {2, 1, 1, 5}}),
      reduce("middle_axis", {OpKind::kReduceMax, {3, 7, 5}, {1}, false, false, {3, 5}}),
      reduce("all_axes", {OpKind::kReduceMin, {2, 3, 4}, {}, true, false, {1, 1, 1}}),

      reduce("size1_axis_between", {OpKind::kReduceMax, {2, 1, 6}, {0, 2}, false, false, {1}}),
      reduce("middle_axis", {OpKind::kReduceProd, {3, 7, 5}, {1}, true, false, {3, 1, 5}}),
      reduce("last_axis", {OpKind::kReduceL1, {4, 8, 32}, {-1}, false, false, {4, 8}}),
      reduce("all_axes", {OpKind::kReduceL2, {2, 3, 4}, {}, true, false, {1, 1, 1}}),
      reduce("middle_pair_axes", {OpKind::kReduceSumSquare, {2, 3, 4, 5}, {1, 2}, true, false, {2, 1, 1, 5}}),
      reduce("first_axis", {OpKind::kReduceLogSumExp, {6, 5, 4}, {0}, false, false, {5, 4}}),
      reduce("long_rows", {OpKind::kReduceLogSumExp, {3, 1000}, {1}, false, false, {3}}),
      reduce("middle_axis", {OpKind::kReduceLogSum, {3, 7, 5}, {1}, true, false, {3, 1, 5}, 1.5f}),
      reduce("non_contiguous_axes", {OpKind::kReduceMean, {2, 3, 4, 5}, {0, 2, 3}, true, false, {1, 3, 1, 1}}),
      reduce("non_contiguous_axes", {OpKind::kReduceL2, {3, 4, 5}, {0, 2}, false, false, {4}}),
      matmul_bias({2, 8, 32}, 48, 800), matmul_bias({1, 77, 64}, 192, 810), matmul_bias({2, 3, 5, 7}, 9, 820),
      gemm_relu("transB_bias_6x16_n10", 6, 16, 10, true, 1, 1.f, 1.f, 1300),
      gemm_relu("no_C_64x32_n48", 64, 32, 48, false, 0, 1.f, 1.f, 1310),
      gemm_relu("alpha_beta_row_bias_5x12_n7", 5, 12, 7, false, 2, 0.5f, 2.f, 1320),
      matmul_bias_relu({2, 8, 32}, 48, 1330), matmul_bias_relu({1, 77, 64}, 192, 1340),
      matmul_bias_relu({2, 3, 5, 7}, 9, 1350), matmul_bias_residual({2, 8, 32}, 1360),
      matmul_bias_gelu_tanh({2, 8, 32}, 48, 1370), matmul_bias_gelu_tanh({1, 77, 64}, 3072, 1380),
      matmul_bias_residual({1, 77, 64}, 1370), matmul_bias_residual({2, 3, 5, 16}, 1380),
      quant_linear({2, 8, 32}, 48, false, true, 0, 1200), quant_linear({16, 64}, 32, false, false, 3, 1210),
      quant_linear({2, 8, 32}, 48, true, true, 0, 1220), quant_linear({3, 5, 48}, 16, true, false, 0, 1230),
      quant_linear({64, 32}, 64, false, true, 0, 1240, true), quant_linear({64, 32}, 64, true, true, 0, 1250, true),
      quant_linear({2, 8, 32}, 48, true, true, 0, 1260, false, true), quant_linear({1, 64}, 32, true, false, 0, 1270, false, true),
      quant_linear({64, 32}, 64, true, true, 0, 1280, true, true),
      quant_conv({2, 32, 6, 6}, 48, 1, 1, false, true, true, 0, 1260), quant_conv({2, 32, 6, 6}, 48, 1, 1, true, true, true, 0, 1270),
      quant_conv({1, 16, 5, 5}, 32, 1, 1, false, false, false, 3, 1280), quant_conv({2, 8, 7, 7}, 12, 3, 1, false, true, true, 0, 1290),
      quant_conv({1, 16, 9, 9}, 16, 3, 2, false, false, true, 0, 1295),
      quant_conv({2, 16, 7, 7}, 32, 3, 1, true, true, true, 0, 1296), quant_conv({1, 32, 9, 9}, 16, 3, 2, true, false, false, 0, 1297),
      // 8-bit activations between two QuantConvs (docs/decisions/0081): 1x1 (GEMM) -> 3x3, 3x3 with
      // a residual -> 1x1 reading an INT8 zero point, INT8 and FP8.
      quant_conv_chain({2, 32, 6, 6}, 32, 1, 16, 3, false, false, 0, 1400),
      quant_conv_chain({2, 32, 6, 6}, 32, 1, 16, 3, true, false, 0, 1410),
      quant_conv_chain({1, 16, 7, 7}, 32, 3, 16, 1, false, true, -4, 1420),
      quant_conv_chain({1, 16, 7, 7}, 32, 3, 16, 1, true, true, 0, 1430),
      attention("MHA_d64", {2, 4, 4, 16, 16, 64, 64}, 510),
      attention("seq77_d80", {1, 2, 2, 77, 77, 80, 80}, 520),
      attention("GQA_8_2_seq33", {2, 8, 2, 33, 33, 64, 64}, 530),
      attention("MQA_4_1_dv32", {1, 4, 1, 19, 19, 64, 32}, 540),
      attention("causal_square", {2, 4, 4, 40, 40, 64, 64, true}, 550),
      attention("causal_Sq_lt_Sk", {1, 4, 2, 5, 37, 64, 64, true}, 560),
      attention("causal_Sq_gt_Sk", {1, 2, 2, 9, 4, 64, 64, true}, 570),
      attention("additive_mask_input", {2, 4, 4, 45, 45, 64, 64, false, AttnCase::kAddInput}, 580),
      attention("additive_const_SqSk", {2, 2, 2, 24, 24, 80, 80, false, AttnCase::kAddConst2d}, 590),
      attention("bool_mask_empty_row", {2, 4, 4, 31, 31, 64, 64, false, AttnCase::kBoolConst}, 600),
      attention("bool_mask_causal_GQA", {2, 4, 2, 20, 20, 64, 64, true, AttnCase::kBoolConst}, 610),
      attention("rank3", {1, 6, 6, 50, 50, 64, 64, false, AttnCase::kNone, 3}, 620),
      // 32 units of 128 x 128 scores (64 KiB fp32 each) under a 1 MiB workspace limit: the
      // scores run in chunks (fp32: 8 units, fp16: 4).
      attention("chunked_1MiB_workspace", {4, 8, 8, 128, 128, 64, 64, true}, 900, size_t{1} << 20),
      flash_attention("MHA_d64_seq100", {2, 4, 4, 100, 100, 64, 64}, 1400),
      flash_attention("MHA_d128_seq77", {2, 2, 2, 77, 77, 128, 128}, 1410),
      flash_attention("Sq_ne_Sk_d64", {1, 4, 4, 37, 150, 64, 64}, 1420),
      flash_attention("causal_square_seq130", {2, 4, 4, 130, 130, 64, 64, true}, 1430),
      flash_attention("causal_Sq_lt_Sk_d128", {1, 4, 2, 5, 150, 128, 128, true}, 1440),
      flash_attention("causal_Sq_gt_Sk", {1, 2, 2, 70, 20, 64, 64, true}, 1450),
      flash_attention("additive_mask_input_Sq_ne_Sk", {2, 4, 4, 45, 70, 64, 64, false, AttnCase::kAddInput}, 1460),
      flash_attention("additive_const_SqSk_d128", {2, 2, 2, 24, 24, 128, 128, false, AttnCase::kAddConst2d}, 1470),
      flash_attention("bool_mask_empty_row", {2, 4, 4, 31, 90, 64, 64, false, AttnCase::kBoolConst}, 1480),
      flash_attention("bool_mask_input_Sq_ne_Sk", {2, 4, 4, 40, 72, 64, 64, false, AttnCase::kBoolInput}, 1485),
      flash_attention("bool_mask_causal_GQA", {2, 4, 2, 20, 20, 64, 64, true, AttnCase::kBoolConst}, 1490),
      flash_attention("GQA_8_2_seq65", {2, 8, 2, 33, 65, 64, 64}, 1500),
      flash_attention("MQA_4_1_d128", {1, 4, 1, 19, 130, 128, 128}, 1510),
      flash_attention("rank3", {1, 6, 6, 50, 50, 64, 64, false, AttnCase::kNone, 3}, 1520),
      flash_attention("BERT_base_b2_mask", {2, 12, 12, 128, 128, 64, 64, false, AttnCase::kAddInput}, 1530),
      paged_attention_all_padding(),
      rope_row("packed_decode_T5_H7_d64", {{5, 7, 64}}, 1700),
      rope_row("packed_prefill_T37_H8_d128", {{37, 8, 128}}, 1710),
      rope_row("bhsd_2x3x9x64", {{2, 3, 9, 64}}, 1720),
      rope_row("bshd_head_axis2_int32_2x9x5x64", {{2, 9, 5, 64}, 2, 0, false, 0, DataType::kInt32}, 1730),
      rope_row("partial_rotary_dim64_of_96", {{4, 3, 96}, 1, 64}, 1740),
      rope_row("interleaved_rotary_dim24_of_40", {{3, 5, 40}, 1, 24, true}, 1750),
      rope_row("odd_half_d20", {{6, 3, 20}}, 1760),
      rope_row("caches_bhsd_2x3x6x64", {{2, 3, 6, 64}, 1, 0, false, 50}, 1770),
      rope_row("caches_interleaved_int32", {{4, 5, 32}, 1, 0, true, 40, DataType::kInt32}, 1780),
      attention_bshd("MHA_d64", {2, 4, 4, 16, 16, 64, 64}, 1600),
      attention_bshd("GQA_8_2_Sq_ne_Sk_mask_d64", {2, 8, 2, 33, 65, 64, 64, false, AttnCase::kAddInput}, 1610),
      attention_bshd("causal_d80_dv80", {2, 4, 4, 40, 40, 80, 80, true}, 1620),
      attention_bshd("bool_mask_input_dv32", {2, 4, 4, 31, 31, 64, 32, false, AttnCase::kBoolInput}, 1630),
      flash_attention_bshd("MHA_d64_seq100", {2, 4, 4, 100, 100, 64, 64}, 1640),
      flash_attention_bshd("GQA_8_2_causal_d128", {2, 8, 2, 70, 70, 128, 128, true}, 1650),
      flash_attention_bshd("BERT_base_b2_mask", {2, 12, 12, 128, 128, 64, 64, false, AttnCase::kAddInput}, 1660),
      flash_attention_bshd("bool_mask_const_Sq_ne_Sk", {2, 4, 4, 40, 72, 64, 64, false, AttnCase::kBoolConst}, 1670),
      graph_row("MatMul_batched_equal_batches", [] { return batched_matmul_case(0); }, {"MatMul"}),
      graph_row("MatMul_batched_A_shared_const", [] { return batched_matmul_case(1); }, {"MatMul"}),
      graph_row("MatMul_batched_B_shared_2d_activation", [] { return batched_matmul_case(2); }, {"MatMul"}),
      graph_row("MatMul_batched_const_3d_B", [] { return batched_matmul_case(3); }, {"MatMul"}),
      graph_row("TransformerBlock_2x8x32_h4", [] { return OpCase{transformer_block(2, 8, 32, 4), {nonzero({2, 8, 32}, 30)}}; },
                {"Attention", "MatMulBias", "LayerNormalization"}),
      graph_row("TransformerBlock_ViT_B_sizes",
                [] { return OpCase{transformer_block(1, 197, 768, 12), {nonzero({1, 197, 768}, 31)}}; },
                {"Attention", "MatMulBias"}, {1e-3, 2e-2, 6e-2}),
      // The RMSNorm is the q/k/v GEMM's prologue (docs/decisions/0092).
      graph_row("DecoderBlock_fused_2x37x128", [] { return OpCase{decoder_block(2, 37, 128, 2), {nonzero({2, 37, 128}, 1100)}}; },
                {"Attention", "MatMulBias"}),
      // The gated MLP: 3 rows (the GPU's skinny GEMM with the norm and the gate inside), 74 rows
      // (cuBLASLt with the norm kernel before it and the gate kernel after).
      graph_row("DecoderMlp_norm_silu_gate_1x3x256", [] { return OpCase{decoder_mlp(1, 3, 256, 136), {nonzero({1, 3, 256}, 1210)}}; },
                {"MatMulBias"}),
      graph_row("DecoderMlp_norm_silu_gate_2x37x128", [] { return OpCase{decoder_mlp(2, 37, 128, 200), {nonzero({2, 37, 128}, 1220)}}; },
                {"MatMulBias"}),
      graph_row("ClassTokenHead_shape_arithmetic", [] { return OpCase{class_token_head(), {nonzero({2, 4, 8}, 53)}}; },
                {"LayerNormalization"}),
  };
  {  // a spatial mean of a 4-D tensor: the optimizer makes it a GlobalAveragePool (NHWC in 16-bit) ...
    Row r = reduce("spatial_4d_as_pool", {OpKind::kReduceMean, {2, 16, 4, 4}, {2, 3}, true, false, {2, 16, 1, 1}});
    r.expect_ops = {"GlobalAveragePool"};
    r.layout = LayoutRule::kFollowsPrecision;
    rows.push_back(r);
  }
  {  // ... and without that rewrite, the reduce kernel
    Row r = reduce("spatial_4d", {OpKind::kReduceMean, {2, 16, 4, 4}, {2, 3}, true, false, {2, 16, 1, 1}});
    r.disabled_passes = {"reduce_mean_to_global_pool"};
    rows.push_back(r);
  }
  {  // the pre-LN block as written (no fusions): every layer on its own kernel
    Row r = graph_row("TransformerBlock_2x8x32_h4_unoptimized",
                      [] { return OpCase{transformer_block(2, 8, 32, 4), {nonzero({2, 8, 32}, 30)}}; },
                      {"MatMul", "Softmax", "Gelu", "LayerNormalization", "Transpose", "Reshape"});
    r.opt_level = 0;
    rows.push_back(r);
  }
  // Integer graph inputs: negative ids count from the end of the table (ONNX), on both paths.
  for (DataType dt : {DataType::kInt64, DataType::kInt32}) {
    Row r;
    r.name = std::string("Embedding_Gather_LayerNorm_ids_") + (dt == DataType::kInt64 ? "int64" : "int32");
    r.tol = {1e-5, 2e-2, 6e-2};
    r.expect_ops = {"Gather", "LayerNormalization"};
    r.make = [dt] { return OpCase{embedding_graph(dt), {int_tensor(dt, {kBatch, kSeq}, -kVocab, kVocab - 1, 5)}}; };
    rows.push_back(r);
  }
  {
    Row r;
    r.name = "AttentionMask_int64_Cast_chain_Softmax";
    r.tol = {1e-5, 2e-2, 6e-2};
    r.expect_ops = {"Cast", "Softmax"};
    r.make = [] {
      return OpCase{mask_graph(), {random_tensor({kBatch, 4, kSeq, kSeq}, 21), int_tensor(DataType::kInt64, {kBatch, kSeq}, 0, 1, 22)}};
    };
    rows.push_back(r);
  }
  // NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss: x (N, C, d1, d2), targets a graph input
  // (int64, or int32), optional constant class weights, ignore_index hitting some targets.
  struct LossCase {
    const char* name;
    OpKind op;
    const char* reduction;
    bool weight, ignore, log_prob;
    DataType target_dt;
  };
  for (const LossCase& lc : std::vector<LossCase>{
           {"none_weight_ignore", OpKind::kNegativeLogLikelihoodLoss, "none", true, true, false, DataType::kInt64},
           {"mean_weight_ignore", OpKind::kNegativeLogLikelihoodLoss, "mean", true, true, false, DataType::kInt64},
           {"sum_int32", OpKind::kNegativeLogLikelihoodLoss, "sum", false, false, false, DataType::kInt32},
           {"mean", OpKind::kNegativeLogLikelihoodLoss, "mean", false, false, false, DataType::kInt64},
           {"mean_log_prob", OpKind::kSoftmaxCrossEntropyLoss, "mean", false, false, true, DataType::kInt64},
           {"none_weight_ignore_log_prob", OpKind::kSoftmaxCrossEntropyLoss, "none", true, true, true, DataType::kInt64},
           {"sum_weight", OpKind::kSoftmaxCrossEntropyLoss, "sum", true, false, false, DataType::kInt32},
       }) {
    Row r;
    r.name = std::string(ir::op_name(lc.op)) + "_" + lc.name;
    r.make = [lc] {
      TinyGraph t;
      const Shape xs = {3, 5, 2, 4}, ts = {3, 2, 4};
      auto x = t.input("x", xs);
      auto target = int_input(t, "target", ts, lc.target_dt);
      std::vector<ir::ValueId> ins = {x, target};
      if (lc.weight) ins.push_back(t.constant("w", nonzero({5}, 903, 1.f, 1.2f)));
      std::map<std::string, Attribute> attrs = {{"reduction", Attribute::of_string(lc.reduction)}};
      if (lc.ignore) attrs["ignore_index"] = Attribute::of_int(2);
      const Shape ys = std::string(lc.reduction) == "none" ? ts : Shape{};
      const ir::ValueId y = t.node(lc.op, "loss", ins, ys, attrs);
      t.g.outputs = {y};
      if (lc.log_prob) {
        const ir::ValueId lp = t.g.add_value("log_prob", DataType::kFloat32);
        t.g.value(lp).shape = sym(xs);
        t.g.nodes.back().outputs.push_back(lp);
        t.g.value(lp).producer = t.g.nodes.back().id;
        t.g.outputs.push_back(lp);
      }
      return OpCase{t.g, {nonzero(xs, 901, 2.f), int_tensor(lc.target_dt, ts, 0, 4, 902)}};
    };
    rows.push_back(r);
  }
  // LayerNormalization with its optional Mean and InvStdDev outputs (both, and InvStdDev alone).
  for (bool mean : {true, false}) {
    Row r;
    r.name = std::string("LayerNormalization_stats_") + (mean ? "mean_invstd" : "invstd");
    r.make = [mean] {
      TinyGraph t;
      const Shape xs = {3, 4, 10};
      auto x = t.input("x", xs);
      const ir::ValueId y = t.node(OpKind::kLayerNormalization, "ln", {x, t.constant("scale", nonzero({4, 10}, 2))}, xs,
                                   {{"axis", Attribute::of_int(1)}, {"epsilon", Attribute::of_float(1e-5f)}});
      t.g.outputs = {y};
      ir::Node& ln = t.g.nodes.back();
      for (int k = 1; k <= 2; ++k) {
        if (k == 1 && !mean) {
          ln.outputs.push_back(ir::kNoValue);
          continue;
        }
        const ir::ValueId v = t.g.add_value(k == 1 ? "mean" : "inv_std_dev", DataType::kFloat32);
        t.g.value(v).shape = sym({3, 1, 1});
        t.g.value(v).producer = ln.id;
        ln.outputs.push_back(v);
        t.g.outputs.push_back(v);
      }
      return OpCase{t.g, {nonzero(xs, 1, 1.f, 3.f)}};
    };
    rows.push_back(r);
  }
  return rows;
}

}  // namespace kiln::testing::op_table
