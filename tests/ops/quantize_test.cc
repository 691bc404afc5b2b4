// QuantizeLinear / DequantizeLinear on the CPU reference, one test per combination of scale /
// zero-point shape, attribute and quantized type that ONNX opsets 10-25 allow
// (Operators.md QuantizeLinear-25 / DequantizeLinear-25, Cast-25 for the float8 tables). Every
// expected value is worked out by hand in the comments from the spec's formulas
//   y = saturate(round_half_even(x / y_scale) + y_zero_point),   x = (q - zero_point) * scale.
#include <gtest/gtest.h>

#include <cmath>

#include "core/numerics.h"
#include "ops/run_op.h"

namespace kiln::cpu {
namespace {

using testing::make;
using testing::OpRun;
using testing::run_op;
using Attrs = std::map<std::string, ir::Attribute>;
using ir::OpKind;

ir::Attribute i(int64_t v) { return ir::Attribute::of_int(v); }

template <typename T>
std::vector<T> values(const Tensor& t) { return std::vector<T>(t.data<T>(), t.data<T>() + t.numel()); }

// The storage bytes (packed 4- and 2-bit types: ceil(n / 2) and ceil(n / 4) of them).
std::vector<uint8_t> bytes(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> r;
  for (int64_t k = 0; k < t.numel(); ++k) r.push_back(load_as_int64(t.dtype(), t.raw(), k));
  return r;
}

std::vector<double> reals(const Tensor& t) {
  std::vector<double> r;
  for (int64_t k = 0; k < t.numel(); ++k) r.push_back(load_as_double(t.dtype(), t.raw(), k));
  return r;
}

void expect_error(const OpRun& r, const std::string& part) {
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("test_node"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find(part), std::string::npos) << r.status.message();
}

TEST(QuantizeLinear, ScalarScaleWithShape1ZeroPointAndViceVersa) {
  Tensor x = make<float>(DataType::kFloat32, {3}, {2.5f, -1.0f, 7.0f});
  Tensor s0 = make<float>(DataType::kFloat32, {}, {0.5f});
  Tensor s1 = make<float>(DataType::kFloat32, {1}, {0.5f});
  Tensor z0 = make<uint8_t>(DataType::kUInt8, {}, {10});
  Tensor z1 = make<uint8_t>(DataType::kUInt8, {1}, {10});
  // 2.5 / 0.5 = 5 + 10 = 15; -2 + 10 = 8; 14 + 10 = 24.
  for (auto [s, z] : {std::pair{&s0, &z1}, std::pair{&s1, &z0}, std::pair{&s1, &z1}}) {
    OpRun q = run_op(OpKind::kQuantizeLinear, 13, {&x, s, z});
    ASSERT_TRUE(q.status.ok()) << q.status.to_string();
    EXPECT_EQ(values<uint8_t>(q.outputs[0]), (std::vector<uint8_t>{15, 8, 24}));
    OpRun dq = run_op(OpKind::kDequantizeLinear, 13, {&q.outputs[0], s, z});
    ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
    EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{2.5f, -1.0f, 7.0f}));
  }
  // A [2] zero point beside a scalar scale is not a shape ONNX allows.
  Tensor z2 = make<uint8_t>(DataType::kUInt8, {2}, {1, 2});
  expect_error(run_op(OpKind::kQuantizeLinear, 13, {&x, &s0, &z2}), "zero point shape [2]");
}

TEST(QuantizeLinear, PerAxisWithNegativeAxis) {
  // x [2, 3] along axis -1 (= 1): scales {1, 2, 0.5}, int8 zero points {0, 10, -3}.
  Tensor x = make<float>(DataType::kFloat32, {2, 3}, {2.5f, 3.0f, -1000.0f, -2.5f, 1.5f, 1000.0f});
  Tensor s = make<float>(DataType::kFloat32, {3}, {1.0f, 2.0f, 0.5f});
  Tensor z = make<int8_t>(DataType::kInt8, {3}, {0, 10, -3});
  OpRun q = run_op(OpKind::kQuantizeLinear, 13, {&x, &s, &z}, {{"axis", i(-1)}});
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  // 2.5 -> 2 (half to even); 1.5 -> 2, +10 = 12; -2000 saturates to -128; -2.5 -> -2; 0.75 -> 1,
  // +10 = 11; 2000 -> 127.
  EXPECT_EQ(values<int8_t>(q.outputs[0]), (std::vector<int8_t>{2, 12, -128, -2, 11, 127}));
  // Along axis -2 (= 0) of the same x: scales {0.5, 4} per row, no zero point (uint8).
  Tensor s2 = make<float>(DataType::kFloat32, {2}, {0.5f, 4.0f});
  OpRun q2 = run_op(OpKind::kQuantizeLinear, 13, {&x, &s2}, {{"axis", i(-2)}});
  ASSERT_TRUE(q2.status.ok()) << q2.status.to_string();
  // Row 0: 5, 6, -2000 -> 0. Row 1: -0.625 -> -1 -> 0, 0.375 -> 0, 250.
  EXPECT_EQ(values<uint8_t>(q2.outputs[0]), (std::vector<uint8_t>{5, 6, 0, 0, 0, 250}));
  OpRun dq = run_op(OpKind::kDequantizeLinear, 13, {&q2.outputs[0], &s2}, {{"axis", i(-2)}});
  ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
  EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{2.5f, 3.0f, 0.0f, 0.0f, 0.0f, 1000.0f}));
  expect_error(run_op(OpKind::kQuantizeLinear, 13, {&x, &s2}, {{"axis", i(-3)}}), "outside x's rank 2");
  expect_error(run_op(OpKind::kQuantizeLinear, 13, {&x, &s2}, {{"axis", i(1)}}), "per-axis scale has 2 values, x has 3");
}

TEST(QuantizeLinear, BlockedAlongTheLastAxisWithARemainderBlock) {
  // x [2, 5], axis 1, block_size 2: scale and zero point [2, ceil(5/2) = 3].
  Tensor x = make<float>(DataType::kFloat32, {2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5});
  Tensor s = make<float>(DataType::kFloat32, {2, 3}, {0.5f, 1.0f, 2.0f, 1.0f, 0.25f, 4.0f});
  Tensor z = make<int8_t>(DataType::kInt8, {2, 3}, {0, 1, -1, 2, 0, 0});
  for (int64_t axis : {1, -1}) {
    OpRun q = run_op(OpKind::kQuantizeLinear, 21, {&x, &s, &z}, {{"axis", i(axis)}, {"block_size", i(2)}});
    ASSERT_TRUE(q.status.ok()) << q.status.to_string();
    // Row 0: 1/0.5 = 2; 2/0.5 = 4; 3/1 + 1 = 4; 4/1 + 1 = 5; 5/2 = 2.5 -> 2, -1 = 1.
    // Row 1: -1/1 + 2 = 1; -2 + 2 = 0; -3/0.25 = -12; -4/0.25 = -16; -5/4 = -1.25 -> -1.
    EXPECT_EQ(values<int8_t>(q.outputs[0]), (std::vector<int8_t>{2, 4, 4, 5, 1, 1, 0, -12, -16, -1}));
    OpRun dq = run_op(OpKind::kDequantizeLinear, 21, {&q.outputs[0], &s, &z}, {{"axis", i(axis)}, {"block_size", i(2)}});
    ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
    // (2-0)*0.5 = 1, 4*0.5 = 2, (4-1)*1 = 3, (5-1)*1 = 4, (1+1)*2 = 4; (1-2)*1 = -1, -2, -3, -4, -1*4 = -4.
    EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{1, 2, 3, 4, 4, -1, -2, -3, -4, -4}));
  }
}

TEST(QuantizeLinear, BlockedAlongTheFirstAxis) {
  // x [4, 2], axis 0, block_size 3: scale [ceil(4/3) = 2, 2]; rows 0-2 use scale row 0, row 3 row 1.
  Tensor x = make<float>(DataType::kFloat32, {4, 2}, {1, 10, 2, 20, 3, 30, 4, 40});
  Tensor s = make<float>(DataType::kFloat32, {2, 2}, {1.0f, 10.0f, 2.0f, 20.0f});
  OpRun q = run_op(OpKind::kQuantizeLinear, 21, {&x, &s}, {{"axis", i(0)}, {"block_size", i(3)}});
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  // 1, 1, 2, 2, 3, 3, then 4/2 = 2, 40/20 = 2.
  EXPECT_EQ(values<uint8_t>(q.outputs[0]), (std::vector<uint8_t>{1, 1, 2, 2, 3, 3, 2, 2}));
}

TEST(QuantizeLinear, BlockedShapeErrorsNameTheNode) {
  Tensor x = make<float>(DataType::kFloat32, {2, 5}, std::vector<float>(10, 1.0f));
  Tensor s22 = make<float>(DataType::kFloat32, {2, 2}, {1, 1, 1, 1});
  Tensor s3 = make<float>(DataType::kFloat32, {3}, {1, 1, 1});
  Tensor s23 = make<float>(DataType::kFloat32, {2, 3}, {1, 1, 1, 1, 1, 1});
  Tensor z32 = make<int8_t>(DataType::kInt8, {3, 2}, {0, 0, 0, 0, 0, 0});
  const Attrs blocked = {{"axis", i(1)}, {"block_size", i(2)}};
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s22}, blocked), "blocked scale dim 1 is 2, expected 3");
  Tensor xq = make<int8_t>(DataType::kInt8, {2, 5}, std::vector<int8_t>(10, 1));
  expect_error(run_op(OpKind::kDequantizeLinear, 21, {&xq, &s3}, blocked), "must have x's rank 2");
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s23, &z32}, blocked), "zero point shape [3,2]");
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s23}, {{"axis", i(1)}, {"block_size", i(-2)}}), "negative");
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s23}, {{"axis", i(1)}}), "scalar (per tensor) or 1-D");
}

TEST(QuantizeLinear, OutputDtypeSelectsInt4AndUInt4) {
  Tensor x = make<float>(DataType::kFloat32, {5}, {-9.0f, -8.4f, 3.5f, 7.6f, 2.5f});
  Tensor s = make<float>(DataType::kFloat32, {}, {1.0f});
  OpRun q = run_op(OpKind::kQuantizeLinear, 21, {&x, &s}, {{"output_dtype", i(22)}});  // INT4
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  ASSERT_EQ(q.outputs[0].dtype(), DataType::kInt4);
  // -9 -> -8 (saturated), -8.4 -> -8, 3.5 -> 4, 7.6 -> 8 -> 7, 2.5 -> 2: nibbles 8 8 4 7 2,
  // low nibble first: 0x88, 0x74, 0x02.
  EXPECT_EQ(bytes(q.outputs[0]), (std::vector<uint8_t>{0x88, 0x74, 0x02}));
  Tensor xu = make<float>(DataType::kFloat32, {4}, {-1.0f, 15.5f, 16.0f, 7.0f});
  OpRun u = run_op(OpKind::kQuantizeLinear, 21, {&xu, &s}, {{"output_dtype", i(21)}});  // UINT4
  ASSERT_TRUE(u.status.ok()) << u.status.to_string();
  EXPECT_EQ(ints(u.outputs[0]), (std::vector<int64_t>{0, 15, 15, 7}));  // 15.5 -> 16 (even) -> 15
  // output_dtype must agree with the zero point's type.
  Tensor z = make<int8_t>(DataType::kInt8, {}, {0});
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s, &z}, {{"output_dtype", i(22)}}), "differs from the zero point");
}

TEST(QuantizeLinear, Int2AndUInt2) {
  Tensor x = make<float>(DataType::kFloat32, {5}, {-3.0f, -1.5f, 0.5f, 1.5f, 2.0f});
  Tensor s = make<float>(DataType::kFloat32, {}, {1.0f});
  OpRun q = run_op(OpKind::kQuantizeLinear, 25, {&x, &s}, {{"output_dtype", i(26)}});  // INT2
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  ASSERT_EQ(q.outputs[0].dtype(), DataType::kInt2);
  // -3 -> -2, -1.5 -> -2, 0.5 -> 0, 1.5 -> 2 -> 1, 2 -> 1: codes 10 10 00 01 | 01 ->
  // 0b01001010 = 0x4a, 0x01.
  EXPECT_EQ(bytes(q.outputs[0]), (std::vector<uint8_t>{0x4a, 0x01}));
  // uint2 with zero point 1 (one element: code 01 in bits 0-1): -1+1 = 0, 0+1 = 1, 2+1 = 3,
  // 5+1 = 6 -> 3: codes 00 01 11 11 -> 0xf4.
  Tensor xu = make<float>(DataType::kFloat32, {4}, {-1.0f, 0.0f, 1.5f, 5.0f});
  Tensor zu = make<uint8_t>(DataType::kUInt2, {}, {0x01});
  OpRun u = run_op(OpKind::kQuantizeLinear, 25, {&xu, &s, &zu});
  ASSERT_TRUE(u.status.ok()) << u.status.to_string();
  EXPECT_EQ(bytes(u.outputs[0]), (std::vector<uint8_t>{0xf4}));
  // Dequantize int2 [1, -2, -1, 0] (0x39) with scale 0.5 and zero point -1 (code 11):
  // (1+1)*0.5 = 1, (-2+1)*0.5 = -0.5, 0, 0.5.
  Tensor qi = make<uint8_t>(DataType::kInt2, {4}, {0x39});
  Tensor sh = make<float>(DataType::kFloat32, {}, {0.5f});
  Tensor zi = make<uint8_t>(DataType::kInt2, {}, {0x03});
  OpRun dq = run_op(OpKind::kDequantizeLinear, 25, {&qi, &sh, &zi});
  ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
  EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{1.0f, -0.5f, 0.0f, 0.5f}));
}

TEST(QuantizeLinear, AllFourFloat8TypesSaturateOrNot) {
  Tensor x = make<float>(DataType::kFloat32, {3}, {1000.0f, -3.0f, 3.0f});
  Tensor s = make<float>(DataType::kFloat32, {}, {2.0f});
  // x / 2 = 500, -1.5, 1.5.
  struct Case {
    int onnx;
    uint8_t big_sat, big_nosat, minus_1_5, plus_1_5;
  };
  // E4M3FN: 448 = 0.1111.110, NaN 0.1111.111; -1.5 = 1.0111.100 (bias 7).
  // E4M3FNUZ: 240 = 0.1111.111, NaN 0x80; -1.5 = 1.1000.100 (bias 8).
  // E5M2: 500 -> 512 = 0.11000.00 (fits, 57344 max); -1.5 = 1.01111.10 (bias 15).
  // E5M2FNUZ: 512 = 0.11001.00 (bias 16); -1.5 = 1.10000.10.
  const Case cases[] = {{17, 0x7e, 0x7f, 0xbc, 0x3c}, {18, 0x7f, 0x80, 0xc4, 0x44},
                        {19, 0x60, 0x60, 0xbe, 0x3e}, {20, 0x64, 0x64, 0xc2, 0x42}};
  for (const Case& c : cases) {
    for (int sat : {1, 0}) {
      OpRun q = run_op(OpKind::kQuantizeLinear, 21, {&x, &s}, {{"output_dtype", i(c.onnx)}, {"saturate", i(sat)}});
      ASSERT_TRUE(q.status.ok()) << q.status.to_string();
      EXPECT_EQ(values<uint8_t>(q.outputs[0]), (std::vector<uint8_t>{sat ? c.big_sat : c.big_nosat, c.minus_1_5, c.plus_1_5}))
          << "type " << c.onnx << " saturate " << sat;
    }
  }
  // Dequantize E4M3FNUZ [1.0, -1.5] (0x40, 0xc4) with scale 2: 2, -3.
  Tensor q = make<uint8_t>(DataType::kFloat8E4M3FNUZ, {2}, {0x40, 0xc4});
  OpRun dq = run_op(OpKind::kDequantizeLinear, 21, {&q, &s});
  ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
  EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{2.0f, -3.0f}));
  // Float zero points must be zero: 0x40 is 1.0 in E4M3FNUZ.
  Tensor z = make<uint8_t>(DataType::kFloat8E4M3FNUZ, {}, {0x40});
  expect_error(run_op(OpKind::kQuantizeLinear, 21, {&x, &s, &z}), "is not zero");
  expect_error(run_op(OpKind::kDequantizeLinear, 21, {&q, &s, &z}), "is not zero");
}

TEST(QuantizeLinear, Float4E2M1) {
  Tensor x = make<float>(DataType::kFloat32, {4}, {1.25f, 7.0f, -0.75f, 2.5f});
  Tensor s = make<float>(DataType::kFloat32, {}, {1.0f});
  OpRun q = run_op(OpKind::kQuantizeLinear, 23, {&x, &s}, {{"output_dtype", i(23)}});
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  // E2M1 codes: 1.25 ties 1.0 (0010) / 1.5 (0011) -> even 0010; 7 -> 6 (0111, saturated);
  // -0.75 ties 0.5 (0001) / 1.0 (0010) -> 1.0, negative: 1010; 2.5 ties 2 (0100) / 3 -> 0100.
  EXPECT_EQ(bytes(q.outputs[0]), (std::vector<uint8_t>{0x72, 0x4a}));
  OpRun dq = run_op(OpKind::kDequantizeLinear, 23, {&q.outputs[0], &s});
  ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
  EXPECT_EQ(values<float>(dq.outputs[0]), (std::vector<float>{1.0f, 6.0f, -1.0f, 2.0f}));
}

TEST(QuantizeLinear, PrecisionAttributeAndScaleTypeSetTheDivision) {
  // 1000.3 / 0.1 into int16. In float32: 1000.29998779 / 0.100000001 = 10002.9997 -> 10003.
  // In float16 (precision = FLOAT16, opset 23): 1000.3 -> 1000.5 (spacing 0.5), 0.1 ->
  // 1638 * 2^-14 = 0.0999755859375, quotient 10007.44 -> float16 10008 (spacing 8) -> 10008.
  Tensor x = make<float>(DataType::kFloat32, {1}, {1000.3f});
  Tensor s = make<float>(DataType::kFloat32, {}, {0.1f});
  Tensor z = make<int16_t>(DataType::kInt16, {}, {0});
  OpRun f32 = run_op(OpKind::kQuantizeLinear, 23, {&x, &s, &z});
  ASSERT_TRUE(f32.status.ok()) << f32.status.to_string();
  EXPECT_EQ(values<int16_t>(f32.outputs[0]), (std::vector<int16_t>{10003}));
  OpRun f16 = run_op(OpKind::kQuantizeLinear, 23, {&x, &s, &z}, {{"quantize_precision", i(10)}});
  ASSERT_TRUE(f16.status.ok()) << f16.status.to_string();
  EXPECT_EQ(values<int16_t>(f16.outputs[0]), (std::vector<int16_t>{10008}));
  // Without `precision`, a float16 scale makes the division float16 (QuantizeLinear-23 text).
  Tensor sh(DataType::kFloat16, {});
  sh.data<uint16_t>()[0] = float_to_fp16(0.1f);
  OpRun by_scale = run_op(OpKind::kQuantizeLinear, 21, {&x, &sh, &z});
  ASSERT_TRUE(by_scale.status.ok()) << by_scale.status.to_string();
  EXPECT_EQ(values<int16_t>(by_scale.outputs[0]), (std::vector<int16_t>{10008}));
  expect_error(run_op(OpKind::kQuantizeLinear, 23, {&x, &s, &z}, {{"quantize_precision", i(6)}}), "not a float type");
}

TEST(DequantizeLinear, OutputDtypeAndE8M0Scales) {
  Tensor q = make<int8_t>(DataType::kInt8, {2}, {3, -2});
  Tensor s = make<float>(DataType::kFloat32, {}, {0.5f});
  OpRun h = run_op(OpKind::kDequantizeLinear, 23, {&q, &s}, {{"output_dtype", i(10)}});  // FLOAT16
  ASSERT_TRUE(h.status.ok()) << h.status.to_string();
  ASSERT_EQ(h.outputs[0].dtype(), DataType::kFloat16);
  EXPECT_EQ(reals(h.outputs[0]), (std::vector<double>{1.5, -1.0}));
  // An E8M0 scale (opset 24): code 0x7c = 2^(124-127) = 0.125; needs output_dtype.
  Tensor e = make<uint8_t>(DataType::kFloat8E8M0, {}, {0x7c});
  OpRun f = run_op(OpKind::kDequantizeLinear, 24, {&q, &e}, {{"output_dtype", i(1)}});
  ASSERT_TRUE(f.status.ok()) << f.status.to_string();
  EXPECT_EQ(values<float>(f.outputs[0]), (std::vector<float>{0.375f, -0.25f}));
  expect_error(run_op(OpKind::kDequantizeLinear, 24, {&q, &e}), "output_dtype is required");
  expect_error(run_op(OpKind::kDequantizeLinear, 23, {&q, &s}, {{"output_dtype", i(3)}}), "not float, float16 or bfloat16");
  // QuantizeLinear with an E8M0 scale (2^-1, code 126): 1 / 0.5 = 2, 3 / 0.5 = 6.
  Tensor x = make<float>(DataType::kFloat32, {2}, {1.0f, 3.0f});
  Tensor half = make<uint8_t>(DataType::kFloat8E8M0, {}, {126});
  OpRun qe = run_op(OpKind::kQuantizeLinear, 24, {&x, &half});
  ASSERT_TRUE(qe.status.ok()) << qe.status.to_string();
  EXPECT_EQ(values<uint8_t>(qe.outputs[0]), (std::vector<uint8_t>{2, 6}));
  // Before opset 19 the output is float32 whatever the scale.
  OpRun old = run_op(OpKind::kDequantizeLinear, 13, {&q, &s});
  ASSERT_TRUE(old.status.ok());
  EXPECT_EQ(old.outputs[0].dtype(), DataType::kFloat32);
  // int32 input (a bias) with a per-axis scale.
  Tensor b = make<int32_t>(DataType::kInt32, {2}, {1000, -7});
  Tensor sb = make<float>(DataType::kFloat32, {2}, {0.001f, 2.0f});
  OpRun bias = run_op(OpKind::kDequantizeLinear, 13, {&b, &sb}, {{"axis", i(0)}});
  ASSERT_TRUE(bias.status.ok()) << bias.status.to_string();
  EXPECT_EQ(values<float>(bias.outputs[0]), (std::vector<float>{1000 * 0.001f, -14.0f}));
}

TEST(Cast, ToAndFromTheNewTypes) {
  Tensor x = make<float>(DataType::kFloat32, {4}, {0.124f, 1.1f, 1.5f, 0.0f});
  // E8M0 with round_mode up (default): 2^-3 (124), 2^1 (128), 2^1, 0 -> 2^-127 (0, saturate).
  OpRun up = run_op(OpKind::kCast, 25, {&x}, {{"to", i(24)}});
  ASSERT_TRUE(up.status.ok()) << up.status.to_string();
  EXPECT_EQ(values<uint8_t>(up.outputs[0]), (std::vector<uint8_t>{124, 128, 128, 0}));
  OpRun down = run_op(OpKind::kCast, 25, {&x}, {{"to", i(24)}, {"round_mode", ir::Attribute::of_string("down")}});
  ASSERT_TRUE(down.status.ok());
  EXPECT_EQ(values<uint8_t>(down.outputs[0]), (std::vector<uint8_t>{123, 127, 127, 0}));
  OpRun near = run_op(OpKind::kCast, 25, {&x}, {{"to", i(24)}, {"round_mode", ir::Attribute::of_string("nearest")},
                                                {"saturate", i(0)}});
  ASSERT_TRUE(near.status.ok());
  // 0.124 = 1.984 * 2^-4 -> 2^-3; 1.1 -> 2^0; 1.5 ties up -> 2^1; 0 without saturate -> NaN.
  EXPECT_EQ(values<uint8_t>(near.outputs[0]), (std::vector<uint8_t>{124, 127, 128, 0xff}));
  expect_error(run_op(OpKind::kCast, 25, {&x}, {{"to", i(24)}, {"round_mode", ir::Attribute::of_string("odd")}}),
               "round_mode 'odd'");
  // E5M2FNUZ and back: 0.124 -> 0.125 (1.0 * 2^-3: 0.01101.00 = 0x34), 1.1 -> 1.0 (0x40),
  // 1.5 -> 0x42, 0 -> 0.
  OpRun f = run_op(OpKind::kCast, 19, {&x}, {{"to", i(20)}});
  ASSERT_TRUE(f.status.ok()) << f.status.to_string();
  EXPECT_EQ(values<uint8_t>(f.outputs[0]), (std::vector<uint8_t>{0x34, 0x40, 0x42, 0x00}));
  OpRun back = run_op(OpKind::kCast, 19, {&f.outputs[0]}, {{"to", i(1)}});
  ASSERT_TRUE(back.status.ok());
  EXPECT_EQ(values<float>(back.outputs[0]), (std::vector<float>{0.125f, 1.0f, 1.5f, 0.0f}));
  // UINT2 -> UINT8: [3, 0, 2, 1] from 0x63.
  Tensor u = make<uint8_t>(DataType::kUInt2, {4}, {0x63});
  OpRun u8 = run_op(OpKind::kCast, 25, {&u}, {{"to", i(2)}});
  ASSERT_TRUE(u8.status.ok());
  EXPECT_EQ(values<uint8_t>(u8.outputs[0]), (std::vector<uint8_t>{3, 0, 2, 1}));
}

}  // namespace
}  // namespace kiln::cpu
