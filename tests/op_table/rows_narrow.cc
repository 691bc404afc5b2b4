// Rows on uint8 / int8 / uint16 / int16 / uint32 values (docs/decisions/0076): the quantization
// ops (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear), Cast from float to a narrow
// type, integer Clip, BitShift, MaxPool of uint8, MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv and Pow with a uint32 exponent; and TfIdfVectorizer over int32 / int64 tokens.
// Operands are graph inputs (run-time values; a few weights are constants), so the CUDA plan
// computes them in the wide type; every output must equal the CPU reference bit for bit in fp32
// plans (these layers compute exactly or with the CPU's float32 steps; Pow aside: powf against
// pow). Values reach the saturation bounds, rounding ties and out-of-range casts on purpose.
#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "core/numerics.h"
#include "core/onnx_dtype.h"
#include "op_table/op_table.h"

namespace kiln::testing::op_table {
namespace {

using ir::Attribute;
using ir::OpKind;

struct In {
  Tensor value;
  bool constant = false;
};

// Uniform integers in [lo, hi] of any integer dtype.
Tensor narrow_ints(DataType dt, const Shape& s, int64_t lo, int64_t hi, uint32_t seed) {
  Tensor t(dt, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) store_from_int64(dt, t.raw(), i, d(rng));
  return t;
}

Tensor narrow_scalar(DataType dt, int64_t v) {
  Tensor t(dt, {});
  store_from_int64(dt, t.raw(), 0, v);
  return t;
}

Tensor floats(const Shape& s, std::vector<float> v) {
  Tensor t(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v[static_cast<size_t>(i) % v.size()];
  return t;
}

// Halves in [-lo, hi] (ties of the rounding), with a few values far outside any 8-bit range.
Tensor halves(const Shape& s, int lo, int hi, uint32_t seed) {
  Tensor t(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-2 * lo, 2 * hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(d(rng)) / 2.f;
  return t;
}

// y... = op(inputs...) with outputs of the given dtypes and shapes.
OpCase narrow_case(OpKind op, std::vector<In> ins, std::vector<std::pair<Shape, DataType>> outs,
                   std::map<std::string, Attribute> attrs = {}) {
  TinyGraph t;
  OpCase c;
  std::vector<ir::ValueId> ids;
  for (size_t k = 0; k < ins.size(); ++k) {
    const std::string name = "in" + std::to_string(k);
    if (ins[k].constant) {
      ids.push_back(t.constant(name, ins[k].value));
    } else {
      ids.push_back(int_input(t, name, ins[k].value.shape(), ins[k].value.dtype()));
      c.inputs.push_back(ins[k].value);
    }
  }
  t.g.opset_imports[""] = 21;
  ir::Node n;
  n.op = op;
  n.opset = 21;  // Clip's bounds as inputs (11+), QuantizeLinear's int16 / uint16 (21)
  n.name = "node";
  n.inputs = ids;
  n.attrs = std::move(attrs);
  for (size_t k = 0; k < outs.size(); ++k) {
    const ir::ValueId y = t.g.add_value("y" + std::to_string(k), outs[k].second);
    t.g.value(y).shape = sym(outs[k].first);
    n.outputs.push_back(y);
    t.g.outputs.push_back(y);
  }
  t.g.add_node(std::move(n));
  c.graph = t.g;
  return c;
}

// Every row of this family is named Narrow_*: `--gtest_filter='OpTable/*/*Narrow_*'` runs them all.
Row row(const std::string& name, std::function<OpCase()> make) {
  Row r;
  r.name = "Narrow_" + name;
  r.tol = {0, 0, 0};
  r.cpu_tol = 0;
  r.precisions = {Precision::kFp32};
  r.make = std::move(make);
  return r;
}

Attribute int_attr(int64_t v) { return Attribute::of_int(v); }
Attribute str_attr(const std::string& v) { return Attribute::of_string(v); }
Attribute ints_attr(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

void quantize_rows(std::vector<Row>& r) {
  // Per tensor, uint8, constant scale / zero point: x / 0.5 reaches ties and both bounds.
  r.push_back(row("QuantizeLinear_uint8", [] {
    return narrow_case(OpKind::kQuantizeLinear,
                       {{halves({3, 40}, 80, 80, 1)}, {scalar_f(0.5f), true}, {narrow_scalar(DataType::kUInt8, 128), true}},
                       {{{3, 40}, DataType::kUInt8}});
  }));
  // Per axis, int8, run-time scale and zero point.
  r.push_back(row("QuantizeLinear_int8_axis", [] {
    return narrow_case(OpKind::kQuantizeLinear,
                       {{halves({2, 3, 20}, 90, 90, 2)}, {floats({3}, {0.5f, 0.25f, 1.5f})},
                        {narrow_ints(DataType::kInt8, {3}, -20, 20, 3)}},
                       {{{2, 3, 20}, DataType::kInt8}}, {{"axis", int_attr(1)}});
  }));
  r.push_back(row("QuantizeLinear_uint16", [] {
    return narrow_case(OpKind::kQuantizeLinear,
                       {{halves({4, 30}, 200, 200, 4)}, {scalar_f(0.0078125f)}, {narrow_scalar(DataType::kUInt16, 30000)}},
                       {{{4, 30}, DataType::kUInt16}});
  }));
  r.push_back(row("DequantizeLinear_uint8_axis", [] {
    return narrow_case(OpKind::kDequantizeLinear,
                       {{narrow_ints(DataType::kUInt8, {2, 3, 10}, 0, 255, 5)}, {floats({3}, {0.5f, 0.3f, 1.7f})},
                        {narrow_ints(DataType::kUInt8, {3}, 0, 255, 6)}},
                       {{{2, 3, 10}, DataType::kFloat32}}, {{"axis", int_attr(1)}});
  }));
  r.push_back(row("DequantizeLinear_int16", [] {
    return narrow_case(OpKind::kDequantizeLinear,
                       {{narrow_ints(DataType::kInt16, {5, 9}, -32768, 32767, 7)}, {scalar_f(0.001f)},
                        {narrow_scalar(DataType::kInt16, -5)}},
                       {{{5, 9}, DataType::kFloat32}});
  }));
  // In fp16 / bf16 plans the float32 result is rounded once to the layer's storage.
  {
    Row dq = row("DequantizeLinear_int8_16bit_plans", [] {
      return narrow_case(OpKind::kDequantizeLinear,
                         {{narrow_ints(DataType::kInt8, {4, 6}, -128, 127, 9)}, {scalar_f(0.0625f)},
                          {narrow_scalar(DataType::kInt8, 3)}},
                         {{{4, 6}, DataType::kFloat32}});
    });
    dq.precisions = {Precision::kFp32, Precision::kFp16, Precision::kBf16};
    dq.tol = {0, 1e-3, 8e-3};
    r.push_back(std::move(dq));
  }
  for (int variant = 0; variant < 3; ++variant) {
    // Mixed signs, all positive (min 0: zero point 0), all negative (max 0: zero point 255).
    const char* names[] = {"mixed", "positive", "negative"};
    r.push_back(row(std::string("DynamicQuantizeLinear_") + names[variant], [variant] {
      Tensor x = nonzero({6, 50}, 8 + variant, 3.f);
      for (int64_t i = 0; i < x.numel(); ++i) {
        float& v = x.data<float>()[i];
        if (variant == 1) v = std::fabs(v);
        if (variant == 2) v = -std::fabs(v);
      }
      return narrow_case(OpKind::kDynamicQuantizeLinear, {{x}},
                         {{{6, 50}, DataType::kUInt8}, {{}, DataType::kFloat32}, {{}, DataType::kUInt8}});
    }));
  }
}

void cast_clip_shift_rows(std::vector<Row>& r) {
  // Float to uint8 / int8 / uint16 truncates toward zero and keeps the low bits (wraps), as the
  // CPU's Cast: values outside the range, negative ones, huge ones and NaN.
  const std::pair<DataType, const char*> targets[] = {
      {DataType::kUInt8, "uint8"}, {DataType::kInt8, "int8"}, {DataType::kUInt16, "uint16"}, {DataType::kUInt32, "uint32"}};
  for (const auto& [dt_b, name] : targets) {
    const DataType dt = dt_b;
    r.push_back(row(std::string("Cast_float_to_") + name, [dt] {
      Tensor x = floats({4, 9}, {0.f, 0.9f, -0.9f, 1.5f, 255.7f, 256.2f, -1.2f, 300.f, -129.5f, 127.9f, 65535.5f, 70000.f,
                                 -40000.f, 1e10f, -1e10f, 3e19f, std::numeric_limits<float>::quiet_NaN(), 4294967295.f});
      return narrow_case(OpKind::kCast, {{x}}, {{{4, 9}, dt}}, {{"to", int_attr(dtype_to_onnx(dt))}});
    }));
  }
  // Clip of int8 with run-time bounds, one of them omitted, and without bounds (the type's range).
  r.push_back(row("Clip_int8", [] {
    return narrow_case(OpKind::kClip,
                       {{narrow_ints(DataType::kInt8, {3, 17}, -128, 127, 11)}, {narrow_scalar(DataType::kInt8, -20)},
                        {narrow_scalar(DataType::kInt8, 45)}},
                       {{{3, 17}, DataType::kInt8}});
  }));
  r.push_back(row("Clip_int8_min_only", [] {
    return narrow_case(OpKind::kClip,
                       {{narrow_ints(DataType::kInt8, {3, 17}, -128, 127, 12)}, {narrow_scalar(DataType::kInt8, 3)}},
                       {{{3, 17}, DataType::kInt8}});
  }));
  r.push_back(row("Clip_uint16_no_bounds", [] {
    return narrow_case(OpKind::kClip, {{narrow_ints(DataType::kUInt16, {40}, 0, 65535, 13)}}, {{{40}, DataType::kUInt16}});
  }));
  // BitShift: shifts up to and past the width (0), broadcast amounts.
  const std::pair<DataType, int> shifts[] = {{DataType::kUInt8, 8}, {DataType::kUInt16, 16}, {DataType::kUInt32, 32}};
  for (const auto& [dt_b, bits_b] : shifts) {
    const DataType dt = dt_b;
    const int bits = bits_b;
    for (const char* dir : {"LEFT", "RIGHT"}) {
      const std::string d = dir;
      r.push_back(row(std::string("BitShift_") + d + "_" + dtype_name(dt), [=] {
        const int64_t hi = bits == 32 ? int64_t{4294967295} : (int64_t{1} << bits) - 1;
        return narrow_case(OpKind::kBitShift,
                           {{narrow_ints(dt, {4, 10}, 0, hi, 14 + bits)}, {narrow_ints(dt, {10}, 0, bits + 2, 15 + bits)}},
                           {{{4, 10}, dt}}, {{"direction", str_attr(d)}});
      }));
    }
  }
  r.push_back(row("MaxPool_uint8", [] {
    return narrow_case(OpKind::kMaxPool, {{narrow_ints(DataType::kUInt8, {1, 2, 7, 7}, 0, 255, 16)}},
                       {{{1, 2, 4, 4}, DataType::kUInt8}},
                       {{"kernel_shape", ints_attr({3, 3})}, {"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})}});
  }));
  {
    // The float Pow kernel's powf against the CPU's pow: not bit for bit, so a float tolerance.
    Row pw = row("Pow_float_uint32_exponent", [] {
      return narrow_case(OpKind::kPow,
                         {{nonzero({3, 8}, 17, 2.f)}, {narrow_ints(DataType::kUInt32, {8}, 0, 5, 18)}},
                         {{{3, 8}, DataType::kFloat32}});
    });
    pw.tol = {1e-5, 0, 0};
    r.push_back(std::move(pw));
  }
}

void int_matmul_conv_rows(std::vector<Row>& r) {
  r.push_back(row("MatMulInteger_uint8_zero_points", [] {
    return narrow_case(OpKind::kMatMulInteger,
                       {{narrow_ints(DataType::kUInt8, {2, 5, 7}, 0, 255, 21)}, {narrow_ints(DataType::kUInt8, {7, 3}, 0, 255, 22)},
                        {narrow_ints(DataType::kUInt8, {5}, 0, 255, 23)}, {narrow_ints(DataType::kUInt8, {3}, 0, 255, 24)}},
                       {{{2, 5, 3}, DataType::kInt32}});
  }));
  r.push_back(row("MatMulInteger_int8_no_zero_points", [] {
    return narrow_case(OpKind::kMatMulInteger,
                       {{narrow_ints(DataType::kInt8, {4, 6}, -128, 127, 25)}, {narrow_ints(DataType::kInt8, {3, 6, 2}, -128, 127, 26)}},
                       {{{3, 4, 2}, DataType::kInt32}});
  }));
  // QLinearMatMul: batch broadcast, per-tensor scales, run-time zero points; results saturate.
  r.push_back(row("QLinearMatMul_uint8_3d", [] {
    return narrow_case(OpKind::kQLinearMatMul,
                       {{narrow_ints(DataType::kUInt8, {2, 4, 9}, 0, 255, 27)}, {scalar_f(0.02f)}, {narrow_scalar(DataType::kUInt8, 113)},
                        {narrow_ints(DataType::kUInt8, {9, 5}, 0, 255, 28)}, {scalar_f(0.013f)}, {narrow_scalar(DataType::kUInt8, 114)},
                        {scalar_f(0.07f)}, {narrow_scalar(DataType::kUInt8, 118)}},
                       {{{2, 4, 5}, DataType::kUInt8}});
  }));
  r.push_back(row("QLinearMatMul_int8", [] {
    return narrow_case(OpKind::kQLinearMatMul,
                       {{narrow_ints(DataType::kInt8, {3, 8}, -128, 127, 29)}, {scalar_f(0.05f)}, {narrow_scalar(DataType::kInt8, -3)},
                        {narrow_ints(DataType::kInt8, {8, 4}, -128, 127, 30), true}, {scalar_f(0.01f), true},
                        {narrow_scalar(DataType::kInt8, 2), true}, {scalar_f(0.2f)}, {narrow_scalar(DataType::kInt8, 7)}},
                       {{{3, 4}, DataType::kInt8}});
  }));
  r.push_back(row("ConvInteger_uint8_pads", [] {
    return narrow_case(OpKind::kConvInteger,
                       {{narrow_ints(DataType::kUInt8, {2, 3, 6, 5}, 0, 255, 31)}, {narrow_ints(DataType::kUInt8, {4, 3, 3, 3}, 0, 255, 32)},
                        {narrow_scalar(DataType::kUInt8, 100)}, {narrow_ints(DataType::kUInt8, {4}, 0, 255, 33)}},
                       {{{2, 4, 6, 5}, DataType::kInt32}}, {{"pads", ints_attr({1, 1, 1, 1})}});
  }));
  r.push_back(row("ConvInteger_int8_group_stride_dilation", [] {
    return narrow_case(OpKind::kConvInteger,
                       {{narrow_ints(DataType::kInt8, {1, 4, 9, 9}, -128, 127, 34)}, {narrow_ints(DataType::kInt8, {6, 2, 2, 3}, -128, 127, 35), true}},
                       {{{1, 6, 4, 3}, DataType::kInt32}},
                       {{"group", int_attr(2)}, {"strides", ints_attr({2, 2})}, {"dilations", ints_attr({2, 2})}});
  }));
  // QLinearConv with a per-channel w_scale and an int32 bias, and with a per-tensor one and no bias.
  r.push_back(row("QLinearConv_uint8_bias_per_channel", [] {
    return narrow_case(OpKind::kQLinearConv,
                       {{narrow_ints(DataType::kUInt8, {1, 2, 5, 5}, 0, 255, 36)}, {scalar_f(0.03f)}, {narrow_scalar(DataType::kUInt8, 120)},
                        {narrow_ints(DataType::kUInt8, {3, 2, 3, 3}, 0, 255, 37), true}, {floats({3}, {0.01f, 0.02f, 0.005f}), true},
                        {narrow_ints(DataType::kUInt8, {3}, 100, 150, 38), true}, {scalar_f(0.15f)},
                        {narrow_scalar(DataType::kUInt8, 128)}, {narrow_ints(DataType::kInt32, {3}, -3000, 3000, 39), true}},
                       {{{1, 3, 5, 5}, DataType::kUInt8}}, {{"pads", ints_attr({1, 1, 1, 1})}});
  }));
  r.push_back(row("QLinearConv_int8", [] {
    return narrow_case(OpKind::kQLinearConv,
                       {{narrow_ints(DataType::kInt8, {2, 3, 6, 6}, -128, 127, 40)}, {scalar_f(0.04f)}, {narrow_scalar(DataType::kInt8, 1)},
                        {narrow_ints(DataType::kInt8, {2, 3, 2, 2}, -128, 127, 41)}, {scalar_f(0.02f)},
                        {narrow_scalar(DataType::kInt8, 0)}, {scalar_f(0.5f)}, {narrow_scalar(DataType::kInt8, -4)}},
                       {{{2, 2, 5, 5}, DataType::kInt8}});
  }));
}

// TfIdfVectorizer over int32 / int64 token rows (not narrow, but the integer-input family of
// decision 0076): a pool of unigrams, bigrams and a trigram, one bigram repeated (the last bin
// wins), skips, and each mode with weights.
void tfidf_rows(std::vector<Row>& r) {
  const std::pair<const char*, int64_t> modes[] = {{"TF", 0}, {"IDF", 2}, {"TFIDF", 3}};
  for (const auto& [mode_b, skip_b] : modes) {
    const std::string mode = mode_b;
    const int64_t skip = skip_b;
    for (DataType dt : {DataType::kInt32, DataType::kInt64}) {
      Row w = row("x", {});
      w.name = std::string("TfIdf_") + mode + "_skip" + std::to_string(skip) + "_" + dtype_name(dt);
      w.make = [=] {
        std::map<std::string, Attribute> a = {
            {"mode", str_attr(mode)},
            {"min_gram_length", int_attr(1)},
            {"max_gram_length", int_attr(3)},
            {"max_skip_count", int_attr(skip)},
            {"ngram_counts", ints_attr({0, 4, 10})},
            {"ngram_indexes", ints_attr({0, 1, 2, 3, 4, 5, 6, 7})},
            {"pool_int64s", ints_attr({2, 3, 5, 4, 5, 6, 7, 8, 5, 6, 2, 3, 5})},
        };
        if (mode != "TF") {
          Attribute wa;
          wa.kind = Attribute::Kind::kFloats;
          wa.floats = {0.5f, 1.f, 1.5f, 2.f, 0.25f, 3.f, 0.1f, 7.f};
          a["weights"] = wa;
        }
        return narrow_case(OpKind::kTfIdfVectorizer, {{narrow_ints(dt, {3, 12}, 2, 8, 50)}}, {{{3, 8}, DataType::kFloat32}},
                           std::move(a));
      };
      w.expect_ops = {"TfIdfVectorizer"};
      r.push_back(std::move(w));
    }
  }
}

}  // namespace

std::vector<Row> narrow_rows() {
  std::vector<Row> r;
  quantize_rows(r);
  cast_clip_shift_rows(r);
  int_matmul_conv_rows(r);
  tfidf_rows(r);
  return r;
}

}  // namespace kiln::testing::op_table
