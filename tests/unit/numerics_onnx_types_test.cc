// The ONNX element types added for opsets 19-25 (docs/decisions/0046), checked against bit
// patterns written here from the specs, never from the code under test:
//   FLOAT8E4M3FNUZ / FLOAT8E5M2FNUZ: ONNX docs/docsgen/source/technical/float8.md ("E4M3FNUZ and
//     E5M2FNUZ"): bias 8 / 16, NaN 1.0000.000 (0x80), zero 0.0000.000, max S.1111.111 /
//     S.11111.11, min subnormal 2^-10 / 2^-17; value (-1)^S 2^(e-bias) (1 + m/2^M), subnormals
//     (-1)^S 2^(1-bias) m/2^M. Cast (Operators.md, Cast-25) tables: -0 -> 0, NaN/-NaN -> NaN,
//     saturate: +-Inf and overflow -> +-FLT_MAX; no saturate: -> NaN.
//   FLOAT8E8M0: float8.md "E8M0": bias 127, no sign, no zero, 11111111 NaN, max 11111110 = 2^127,
//     min 00000000 = 2^-127. Cast-25 round_mode up / down / nearest and its special-value table.
//   INT2 / UINT2: onnx.proto: four per byte, x0 | x1 << 2 | x2 << 4 | x3 << 6; [-2, 1] / [0, 3].
//   TensorProto codes (onnx.proto): FLOAT8E4M3FNUZ 18, FLOAT8E5M2FNUZ 20, FLOAT8E8M0 24,
//     UINT2 25, INT2 26.
#include <gtest/gtest.h>

#include <onnx/onnx_pb.h>

#include <cmath>
#include <limits>

#include "core/numerics.h"
#include "core/onnx_dtype.h"
#include "kiln/tensor.h"
#include "onnx/importer.h"

namespace kiln {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(OnnxTypes, CodesNamesAndSizes) {
  EXPECT_EQ(dtype_from_onnx(18), DataType::kFloat8E4M3FNUZ);
  EXPECT_EQ(dtype_from_onnx(20), DataType::kFloat8E5M2FNUZ);
  EXPECT_EQ(dtype_from_onnx(24), DataType::kFloat8E8M0);
  EXPECT_EQ(dtype_from_onnx(25), DataType::kUInt2);
  EXPECT_EQ(dtype_from_onnx(26), DataType::kInt2);
  EXPECT_EQ(dtype_from_onnx(14), DataType::kUndefined);  // complex64
  for (DataType t : {DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2FNUZ, DataType::kFloat8E8M0, DataType::kUInt2,
                     DataType::kInt2}) {
    EXPECT_EQ(dtype_from_onnx(dtype_to_onnx(t)), t) << dtype_name(t);
    EXPECT_EQ(dtype_from_name(dtype_name(t)), t) << dtype_name(t);
  }
  EXPECT_EQ(dtype_bits(DataType::kInt2), 2);
  EXPECT_EQ(dtype_storage_bytes(DataType::kUInt2, 5), 2u);  // ceil(5 / 4)
  EXPECT_EQ(dtype_storage_bytes(DataType::kFloat8E8M0, 5), 5u);
  EXPECT_TRUE(dtype_is_float(DataType::kFloat8E8M0));
  EXPECT_FALSE(dtype_is_signed(DataType::kFloat8E8M0));
  EXPECT_TRUE(dtype_is_signed(DataType::kFloat8E4M3FNUZ));
  EXPECT_TRUE(dtype_is_integer(DataType::kInt2) && dtype_is_signed(DataType::kInt2));
  EXPECT_TRUE(dtype_is_integer(DataType::kUInt2) && !dtype_is_signed(DataType::kUInt2));
}

// float8.md's FNUZ value formula, from the code's fields.
double fnuz_value(uint32_t code, int ebits, int mbits, int bias) {
  const int s = code >> 7, e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
  const double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp(1.0 + std::ldexp(m, -mbits), e - bias);
  return s ? -v : v;
}

TEST(OnnxTypes, FnuzEveryCodeDecodesPerSpec) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float a = fp8e4m3fnuz_to_float(static_cast<uint8_t>(c));
    const float b = fp8e5m2fnuz_to_float(static_cast<uint8_t>(c));
    if (c == 0x80) {
      EXPECT_TRUE(std::isnan(a) && std::isnan(b));
      continue;
    }
    EXPECT_EQ(a, fnuz_value(c, 4, 3, 8)) << c;
    EXPECT_EQ(b, fnuz_value(c, 5, 2, 16)) << c;
  }
  // The table's anchors: max S.1111.111 = 240 / S.11111.11 = 57344, min 2^-10 / 2^-17, and 1.0
  // is 0.1000.000 (0x40) / 0.10000.00 (0x40) where E4M3FN / E5M2 use 0x38 / 0x3C (bias one less).
  EXPECT_EQ(fp8e4m3fnuz_to_float(0x7f), 240.0f);
  EXPECT_EQ(fp8e4m3fnuz_to_float(0xff), -240.0f);
  EXPECT_EQ(fp8e4m3fnuz_to_float(0x01), std::ldexp(1.0f, -10));
  EXPECT_EQ(fp8e4m3fnuz_to_float(0x40), 1.0f);
  EXPECT_EQ(fp8e4m3fn_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8e5m2fnuz_to_float(0x7f), 57344.0f);
  EXPECT_EQ(fp8e5m2fnuz_to_float(0x01), std::ldexp(1.0f, -17));
  EXPECT_EQ(fp8e5m2fnuz_to_float(0x40), 1.0f);
  EXPECT_EQ(fp8e5m2_to_float(0x3c), 1.0f);
}

TEST(OnnxTypes, FnuzEncodeRoundTripsAndRoundsToNearestEven) {
  for (uint32_t c = 0; c < 256; ++c) {
    if (c == 0x80) continue;
    EXPECT_EQ(double_to_fp8e4m3fnuz(fnuz_value(c, 4, 3, 8)), c) << c;
    EXPECT_EQ(double_to_fp8e5m2fnuz(fnuz_value(c, 5, 2, 16)), c) << c;
  }
  // Midpoints between neighbouring positive codes go to the even code (RNE).
  for (uint32_t c = 0; c < 0x7f; ++c) {
    const double mid4 = (fnuz_value(c, 4, 3, 8) + fnuz_value(c + 1, 4, 3, 8)) / 2;
    EXPECT_EQ(double_to_fp8e4m3fnuz(mid4), (c % 2 == 0) ? c : c + 1) << c;
    const double mid5 = (fnuz_value(c, 5, 2, 16) + fnuz_value(c + 1, 5, 2, 16)) / 2;
    EXPECT_EQ(double_to_fp8e5m2fnuz(mid5), (c % 2 == 0) ? c : c + 1) << c;
  }
}

TEST(OnnxTypes, FnuzCastTables) {
  // Cast-25, saturate = 1: 0 -> 0, -0 -> 0, NaN -> NaN, +-Inf and [x] beyond max -> +-max.
  for (bool sat : {true, false}) {
    EXPECT_EQ(double_to_fp8e4m3fnuz(0.0, sat), 0x00);
    EXPECT_EQ(double_to_fp8e4m3fnuz(-0.0, sat), 0x00);
    EXPECT_EQ(double_to_fp8e4m3fnuz(kNaN, sat), 0x80);
    EXPECT_EQ(double_to_fp8e4m3fnuz(-kNaN, sat), 0x80);
    EXPECT_EQ(double_to_fp8e5m2fnuz(-0.0, sat), 0x00);
    EXPECT_EQ(double_to_fp8e5m2fnuz(-kNaN, sat), 0x80);
    // -2^-12 rounds to zero (half the smallest subnormal 2^-10 is 2^-11): no -0, so 0x00.
    EXPECT_EQ(double_to_fp8e4m3fnuz(-std::ldexp(1.0, -12), sat), 0x00);
    EXPECT_EQ(double_to_fp8e5m2fnuz(-std::ldexp(1.0, -19), sat), 0x00);
  }
  EXPECT_EQ(double_to_fp8e4m3fnuz(kInf, true), 0x7f);
  EXPECT_EQ(double_to_fp8e4m3fnuz(-kInf, true), 0xff);
  EXPECT_EQ(double_to_fp8e4m3fnuz(1e6, true), 0x7f);
  EXPECT_EQ(double_to_fp8e4m3fnuz(248.0, true), 0x7f);  // 248 rounds (RNE) to 256 > 240
  EXPECT_EQ(double_to_fp8e4m3fnuz(247.0, true), 0x7f);  // rounds to 240 itself
  EXPECT_EQ(double_to_fp8e5m2fnuz(-kInf, true), 0xff);
  EXPECT_EQ(double_to_fp8e5m2fnuz(1e6, true), 0x7f);
  // saturate = 0: Inf, -Inf and overflow -> NaN (0x80).
  EXPECT_EQ(double_to_fp8e4m3fnuz(kInf, false), 0x80);
  EXPECT_EQ(double_to_fp8e4m3fnuz(-kInf, false), 0x80);
  EXPECT_EQ(double_to_fp8e4m3fnuz(248.0, false), 0x80);
  EXPECT_EQ(double_to_fp8e4m3fnuz(247.0, false), 0x7f);
  EXPECT_EQ(double_to_fp8e5m2fnuz(-1e6, false), 0x80);
  EXPECT_EQ(double_to_fp8e5m2fnuz(kInf, false), 0x80);
}

TEST(OnnxTypes, E8M0DecodesAndRounds) {
  EXPECT_EQ(fp8e8m0_to_float(0x7f), 1.0f);
  EXPECT_EQ(fp8e8m0_to_float(0xfe), std::ldexp(1.0f, 127));
  EXPECT_EQ(fp8e8m0_to_float(0x00), std::ldexp(1.0f, -127));
  EXPECT_TRUE(std::isnan(fp8e8m0_to_float(0xff)));
  for (uint32_t c = 0; c < 255; ++c) {
    EXPECT_EQ(fp8e8m0_to_float(static_cast<uint8_t>(c)), std::ldexp(1.0, static_cast<int>(c) - 127)) << c;
    // A power of two is itself in every mode.
    for (auto m : {E8M0Rounding::kUp, E8M0Rounding::kDown, E8M0Rounding::kNearest})
      EXPECT_EQ(double_to_fp8e8m0(std::ldexp(1.0, static_cast<int>(c) - 127), true, m), c) << c;
  }
  // ONNX's Cast e8m0 test inputs (saturate, round up): 0.124 -> 2^-3, 1.1 -> 2^1.
  const double in[] = {0.0, 0.124, 0.25, 0.5, 1.1, 2.0, 4.0, 8.0};
  const uint8_t up[] = {0, 124, 125, 126, 128, 128, 129, 130};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(double_to_fp8e8m0(in[i]), up[i]) << in[i];
  EXPECT_EQ(double_to_fp8e8m0(1.1, true, E8M0Rounding::kDown), 127);
  EXPECT_EQ(double_to_fp8e8m0(1.9, true, E8M0Rounding::kDown), 127);
  EXPECT_EQ(double_to_fp8e8m0(1.4, true, E8M0Rounding::kNearest), 127);
  EXPECT_EQ(double_to_fp8e8m0(1.5, true, E8M0Rounding::kNearest), 128);  // ties round up
  EXPECT_EQ(double_to_fp8e8m0(0.75, true, E8M0Rounding::kNearest), 127);
  // The special-value table: saturate + up | non-saturate.
  EXPECT_EQ(double_to_fp8e8m0(kNaN, true), 0xff);
  EXPECT_EQ(double_to_fp8e8m0(kNaN, false, E8M0Rounding::kNearest), 0xff);
  EXPECT_EQ(double_to_fp8e8m0(kInf, true), 0xfe);
  EXPECT_EQ(double_to_fp8e8m0(kInf, false, E8M0Rounding::kNearest), 0xff);
  EXPECT_EQ(double_to_fp8e8m0(0.0, false, E8M0Rounding::kNearest), 0xff);
  EXPECT_EQ(double_to_fp8e8m0(3e38, true), 0xfe);   // rounds up to 2^128: past E8M0_MAX
  EXPECT_EQ(double_to_fp8e8m0(3e38, false), 0xff);
  EXPECT_EQ(double_to_fp8e8m0(std::ldexp(1.0, -130), true, E8M0Rounding::kNearest), 0x00);
  EXPECT_EQ(double_to_fp8e8m0(std::ldexp(1.0, -130), false, E8M0Rounding::kNearest), 0xff);
  E8M0Rounding m;
  EXPECT_TRUE(e8m0_rounding_from_name("nearest", &m) && m == E8M0Rounding::kNearest);
  EXPECT_FALSE(e8m0_rounding_from_name("even", &m));
}

TEST(OnnxTypes, TwoBitPackingFourPerByteLowBitsFirst) {
  // int2 [1, -2, -1, 0, 1]: codes 01 10 11 00 | 01 -> 0b00111001 = 0x39, then 0x01.
  uint8_t buf[2] = {0, 0};
  const int64_t v[5] = {1, -2, -1, 0, 1};
  for (int i = 0; i < 5; ++i) store_from_int64(DataType::kInt2, buf, i, v[i]);
  EXPECT_EQ(buf[0], 0x39);
  EXPECT_EQ(buf[1], 0x01);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(load_as_int64(DataType::kInt2, buf, i), v[i]);
  // uint2 [3, 0, 2, 1] -> 0b01100011 = 0x63; decoding reads the same bits back.
  uint8_t u = 0x63;
  const int64_t want[4] = {3, 0, 2, 1};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load_as_int64(DataType::kUInt2, &u, i), want[i]);
  for (uint32_t c = 0; c < 4; ++c) EXPECT_EQ(int2_from_code(static_cast<uint8_t>(c)), c < 2 ? static_cast<int>(c) : static_cast<int>(c) - 4);
  // Out of range saturates (as Kiln's int4 does); float input rounds half to even first.
  uint8_t b = 0xff;
  store_from_int64(DataType::kInt2, &b, 1, 5);
  EXPECT_EQ(b, 0xf7);  // element 1 = 01, the other three untouched
  const double in[] = {0.5, 1.5, -1.5, -2.5, -7.0, 9.0, kNaN};
  const int64_t want_i2[] = {0, 1, -2, -2, -2, 1, 0};
  const int64_t want_u2[] = {0, 2, 0, 0, 0, 3, 0};
  for (int i = 0; i < 7; ++i) {
    store_from_double(DataType::kInt2, &b, 2, in[i]);
    EXPECT_EQ(load_as_int64(DataType::kInt2, &b, 2), want_i2[i]) << in[i];
    store_from_double(DataType::kUInt2, &b, 3, in[i]);
    EXPECT_EQ(load_as_int64(DataType::kUInt2, &b, 3), want_u2[i]) << in[i];
  }
}

TEST(OnnxTypes, CastTensorConvertsThroughTheNewTypes) {
  Tensor x(DataType::kFloat32, {4});
  const float xv[4] = {1.0f, -3.0f, 300.0f, 0.75f};
  for (int i = 0; i < 4; ++i) x.data<float>()[i] = xv[i];
  auto f = cast_tensor(x, DataType::kFloat8E4M3FNUZ);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->data<uint8_t>()[0], 0x40);
  EXPECT_EQ(f->data<uint8_t>()[1], 0xcc);  // -3 = -1.5 * 2^1: 1.1001.100
  EXPECT_EQ(f->data<uint8_t>()[2], 0x7f);  // saturates to 240
  auto back = cast_tensor(*f, DataType::kFloat32);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->data<float>()[1], -3.0f);
  EXPECT_EQ(back->data<float>()[3], 0.75f);
  auto i2 = cast_tensor(x, DataType::kInt2);
  ASSERT_TRUE(i2.ok());
  EXPECT_EQ(i2->shape(), Shape{4});
  EXPECT_EQ(i2->nbytes(), 1u);
  EXPECT_EQ(i2->data<uint8_t>()[0], 0x59);  // [1, -2, 1, 1]: 01 | 10 << 2 | 01 << 4 | 01 << 6 (saturated; 0.75 rounds to 1)
}

// TensorProto reading: raw_data and int32_data, as onnx.proto lays them out.
onnx::TensorProto proto(int type, std::vector<int64_t> dims) {
  onnx::TensorProto p;
  p.set_name("t");
  p.set_data_type(type);
  for (int64_t d : dims) p.add_dims(d);
  return p;
}

TEST(OnnxTypes, TensorProtoRawAndInt32Data) {
  onnx::TensorProto a = proto(26, {5});  // INT2 [1, -2, -1, 0, 1], packed
  a.set_raw_data(std::string("\x39\x01", 2));
  auto ta = onnx_import::tensor_from_proto(a, "");
  ASSERT_TRUE(ta.ok()) << ta.status().to_string();
  EXPECT_EQ(ta->dtype(), DataType::kInt2);
  EXPECT_EQ(load_as_int64(DataType::kInt2, ta->raw(), 1), -2);
  EXPECT_EQ(load_as_int64(DataType::kInt2, ta->raw(), 4), 1);
  onnx::TensorProto b = proto(25, {5});  // UINT2 in int32_data: four elements per entry
  b.add_int32_data(0x63);
  b.add_int32_data(0x02);
  auto tb = onnx_import::tensor_from_proto(b, "");
  ASSERT_TRUE(tb.ok()) << tb.status().to_string();
  EXPECT_EQ(load_as_int64(DataType::kUInt2, tb->raw(), 0), 3);
  EXPECT_EQ(load_as_int64(DataType::kUInt2, tb->raw(), 2), 2);
  EXPECT_EQ(load_as_int64(DataType::kUInt2, tb->raw(), 4), 2);
  b.add_int32_data(0);  // a third entry: too many for 5 elements
  EXPECT_EQ(onnx_import::tensor_from_proto(b, "").status().code(), StatusCode::kInvalidModel);
  onnx::TensorProto c = proto(18, {3});  // E4M3FNUZ codes, one per int32_data entry
  for (int v : {0x40, 0x80, 0xff}) c.add_int32_data(v);
  auto tc = onnx_import::tensor_from_proto(c, "");
  ASSERT_TRUE(tc.ok()) << tc.status().to_string();
  EXPECT_EQ(load_as_double(DataType::kFloat8E4M3FNUZ, tc->raw(), 0), 1.0);
  EXPECT_TRUE(std::isnan(load_as_double(DataType::kFloat8E4M3FNUZ, tc->raw(), 1)));
  EXPECT_EQ(load_as_double(DataType::kFloat8E4M3FNUZ, tc->raw(), 2), -240.0);
  onnx::TensorProto d = proto(24, {2});  // E8M0 raw: 2^0, 2^-3
  d.set_raw_data(std::string("\x7f\x7c", 2));
  auto td = onnx_import::tensor_from_proto(d, "");
  ASSERT_TRUE(td.ok()) << td.status().to_string();
  EXPECT_EQ(load_as_double(DataType::kFloat8E8M0, td->raw(), 1), 0.125);
  onnx::TensorProto e = proto(20, {2});  // E5M2FNUZ raw with one byte missing
  e.set_raw_data(std::string("\x40", 1));
  auto te = onnx_import::tensor_from_proto(e, "");
  ASSERT_FALSE(te.ok());
  EXPECT_NE(te.status().message().find("tensor 't'"), std::string::npos) << te.status().message();
}

}  // namespace
}  // namespace kiln
