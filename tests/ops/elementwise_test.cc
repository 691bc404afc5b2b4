// Tests of the elementwise CPU kernels on what the ONNX conformance data covers thinly:
// broadcasting against a naive index computation, legacy (opset < 7) broadcasting, integer
// Div/Mod semantics, Pow with mixed dtypes, per-axis Q/DQ rounding, and clean errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>

#include "backends/cpu/cpu_kernel.h"
#include "backends/cpu/ops_elementwise_broadcast.h"
#include "ops/run_op.h"

namespace kiln::cpu {
namespace {

using testing::make;
using testing::OpRun;
using testing::run_op;

// Random values in [-4, 4) that are never exactly zero.
Tensor random_float(const Shape& shape, uint32_t seed) {
  Tensor t(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = dist(rng);
    t.data<float>()[i] = v == 0.0f ? 0.5f : v;
  }
  return t;
}

// Offset into an input of shape `in` for the output multi-index `idx` (numpy broadcasting).
int64_t broadcast_offset(const Shape& in, const Shape& out, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) off = off * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return off;
}

std::vector<int64_t> unravel(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (int d = static_cast<int>(s.size()) - 1; d >= 0; --d) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

TEST(ElementwiseKernels, BroadcastSubMatchesNaiveIndexing) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 4, 1}, {3, 1, 6}}, {{5}, {2, 3, 5}}, {{2, 1, 3}, {}}, {{}, {2, 2}}, {{4, 1}, {4, 6}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_float(sa, seed++), b = random_float(sb, seed++);
    OpRun r = run_op(ir::OpKind::kSub, 14, {&a, &b});
    ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    const Tensor& y = r.outputs[0];
    Shape expect_shape = *broadcast_shape(sa, sb);
    ASSERT_EQ(y.shape(), expect_shape);
    for (int64_t i = 0; i < y.numel(); ++i) {
      auto idx = unravel(i, y.shape());
      const float e = a.data<float>()[broadcast_offset(sa, y.shape(), idx)] - b.data<float>()[broadcast_offset(sb, y.shape(), idx)];
      ASSERT_EQ(y.data<float>()[i], e) << shape_str(sa) << " - " << shape_str(sb) << " at " << i;
    }
  }
}

TEST(ElementwiseKernels, WhereBroadcastsThreeWays) {
  const Shape sc = {3, 1, 4}, sx = {2, 1, 1, 4}, sy = {5, 1};
  Tensor c(DataType::kBool, sc);
  for (int64_t i = 0; i < c.numel(); ++i) c.data<uint8_t>()[i] = (i * 7 + 3) % 3 == 0;
  Tensor x = random_float(sx, 11), y = random_float(sy, 12);
  OpRun r = run_op(ir::OpKind::kWhere, 16, {&c, &x, &y});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const Tensor& o = r.outputs[0];
  ASSERT_EQ(o.shape(), (Shape{2, 3, 5, 4}));
  for (int64_t i = 0; i < o.numel(); ++i) {
    auto idx = unravel(i, o.shape());
    const bool cond = c.data<uint8_t>()[broadcast_offset(sc, o.shape(), idx)];
    const float e = cond ? x.data<float>()[broadcast_offset(sx, o.shape(), idx)] : y.data<float>()[broadcast_offset(sy, o.shape(), idx)];
    ASSERT_EQ(o.data<float>()[i], e) << i;
  }
}

TEST(ElementwiseKernels, LegacyBroadcastAlignsBAtAxis) {
  Tensor a = random_float({2, 3, 4, 5}, 21), b = random_float({3, 4}, 22);
  OpRun r = run_op(ir::OpKind::kMul, 6, {&a, &b}, {{"broadcast", ir::Attribute::of_int(1)}, {"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  const Tensor& y = r.outputs[0];
  ASSERT_EQ(y.shape(), a.shape());
  for (int64_t i = 0; i < y.numel(); ++i) {
    auto idx = unravel(i, y.shape());
    ASSERT_EQ(y.data<float>()[i], a.data<float>()[i] * b.data<float>()[idx[1] * 4 + idx[2]]);
  }
  // Without broadcast=1, differing shapes are an error.
  OpRun bad = run_op(ir::OpKind::kMul, 6, {&a, &b});
  EXPECT_FALSE(bad.status.ok());
}

TEST(ElementwiseKernels, IntegerDivTruncatesAndModFollowsSignRules) {
  Tensor a = make<int32_t>(DataType::kInt32, {6}, {7, -7, 7, -7, INT32_MIN, 5});
  Tensor b = make<int32_t>(DataType::kInt32, {6}, {2, 2, -2, -2, -1, 5});
  OpRun div = run_op(ir::OpKind::kDiv, 14, {&a, &b});
  ASSERT_TRUE(div.status.ok());
  EXPECT_EQ(std::vector<int32_t>(div.outputs[0].data<int32_t>(), div.outputs[0].data<int32_t>() + 6),
            (std::vector<int32_t>{3, -3, -3, 3, INT32_MIN, 1}));
  OpRun py_mod = run_op(ir::OpKind::kMod, 13, {&a, &b});
  ASSERT_TRUE(py_mod.status.ok());
  EXPECT_EQ(std::vector<int32_t>(py_mod.outputs[0].data<int32_t>(), py_mod.outputs[0].data<int32_t>() + 6),
            (std::vector<int32_t>{1, 1, -1, -1, 0, 0}));
  OpRun c_mod = run_op(ir::OpKind::kMod, 13, {&a, &b}, {{"fmod", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(c_mod.status.ok());
  EXPECT_EQ(std::vector<int32_t>(c_mod.outputs[0].data<int32_t>(), c_mod.outputs[0].data<int32_t>() + 6),
            (std::vector<int32_t>{1, -1, 1, -1, 0, 0}));
}

TEST(ElementwiseKernels, PowWithMixedDtypesAndBitShift) {
  Tensor base = make<int32_t>(DataType::kInt32, {4}, {2, -3, 5, 7});
  Tensor e = make<float>(DataType::kFloat32, {4}, {10.0f, 3.0f, 0.5f, -1.0f});
  OpRun r = run_op(ir::OpKind::kPow, 15, {&base, &e});
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  ASSERT_EQ(r.outputs[0].dtype(), DataType::kInt32);
  EXPECT_EQ(std::vector<int32_t>(r.outputs[0].data<int32_t>(), r.outputs[0].data<int32_t>() + 4),
            (std::vector<int32_t>{1024, -27, 2, 0}));  // sqrt(5) and 1/7 truncate
  Tensor x = make<uint8_t>(DataType::kUInt8, {3}, {1, 200, 16});
  Tensor s = make<uint8_t>(DataType::kUInt8, {3}, {3, 1, 9});
  OpRun left = run_op(ir::OpKind::kBitShift, 11, {&x, &s}, {{"direction", ir::Attribute::of_string("LEFT")}});
  ASSERT_TRUE(left.status.ok());
  EXPECT_EQ(std::vector<uint8_t>(left.outputs[0].data<uint8_t>(), left.outputs[0].data<uint8_t>() + 3),
            (std::vector<uint8_t>{8, 144, 0}));
}

TEST(ElementwiseKernels, QuantizePerAxisRoundsHalfToEvenAndSaturates) {
  // x [2, 3] quantized along axis 1 with per-column scales and int8 zero points.
  Tensor x = make<float>(DataType::kFloat32, {2, 3}, {2.5f, 3.0f, -1000.0f, -2.5f, 1.5f, 1000.0f});
  Tensor scale = make<float>(DataType::kFloat32, {3}, {1.0f, 2.0f, 0.5f});
  Tensor zp = make<int8_t>(DataType::kInt8, {3}, {0, 10, -3});
  OpRun q = run_op(ir::OpKind::kQuantizeLinear, 13, {&x, &scale, &zp}, {{"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  ASSERT_EQ(q.outputs[0].dtype(), DataType::kInt8);
  // 2.5 -> 2; 3/2 = 1.5 -> 2, +10; -2000 saturates; -2.5 -> -2; 0.75 -> 1, +10; 2000 saturates.
  EXPECT_EQ(std::vector<int8_t>(q.outputs[0].data<int8_t>(), q.outputs[0].data<int8_t>() + 6),
            (std::vector<int8_t>{2, 12, -128, -2, 11, 127}));
  OpRun dq = run_op(ir::OpKind::kDequantizeLinear, 13, {&q.outputs[0], &scale, &zp}, {{"axis", ir::Attribute::of_int(1)}});
  ASSERT_TRUE(dq.status.ok()) << dq.status.to_string();
  EXPECT_EQ(std::vector<float>(dq.outputs[0].data<float>(), dq.outputs[0].data<float>() + 6),
            (std::vector<float>{2.0f, 4.0f, -62.5f, -2.0f, 2.0f, 65.0f}));
}

TEST(ElementwiseKernels, Fp8CastAndQuantizeHonourSaturate) {
  Tensor x = make<float>(DataType::kFloat32, {3}, {1000.0f, -1.25f, 3.0f});
  ir::Attribute to = ir::Attribute::of_int(17);  // FLOAT8E4M3FN
  OpRun sat = run_op(ir::OpKind::kCast, 19, {&x}, {{"to", to}});
  ASSERT_TRUE(sat.status.ok()) << sat.status.to_string();
  ASSERT_EQ(sat.outputs[0].dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(fp8e4m3fn_to_float(sat.outputs[0].data<uint8_t>()[0]), 448.0f);
  EXPECT_EQ(fp8e4m3fn_to_float(sat.outputs[0].data<uint8_t>()[1]), -1.25f);
  OpRun nosat = run_op(ir::OpKind::kCast, 19, {&x}, {{"to", to}, {"saturate", ir::Attribute::of_int(0)}});
  ASSERT_TRUE(nosat.status.ok());
  EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(nosat.outputs[0].data<uint8_t>()[0])));
  // QuantizeLinear to fp8 does not round to an integer: 3 / 2 = 1.5 is representable.
  Tensor scale = make<float>(DataType::kFloat32, {}, {2.0f});
  Tensor zp(DataType::kFloat8E4M3FN, {});
  OpRun q = run_op(ir::OpKind::kQuantizeLinear, 19, {&x, &scale, &zp});
  ASSERT_TRUE(q.status.ok()) << q.status.to_string();
  EXPECT_EQ(fp8e4m3fn_to_float(q.outputs[0].data<uint8_t>()[0]), 448.0f);
  EXPECT_EQ(fp8e4m3fn_to_float(q.outputs[0].data<uint8_t>()[2]), 1.5f);
}

TEST(ElementwiseKernels, Float16AddComputesInFloat) {
  Tensor a(DataType::kFloat16, {3}), b(DataType::kFloat16, {1});
  const float av[3] = {1.5f, -2.25f, 1024.0f};
  for (int i = 0; i < 3; ++i) a.data<Float16>()[i] = Float16{float_to_fp16(av[i])};
  b.data<Float16>()[0] = Float16{float_to_fp16(0.5f)};
  OpRun r = run_op(ir::OpKind::kAdd, 14, {&a, &b});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(fp16_to_float(r.outputs[0].data<Float16>()[0].bits), 2.0f);
  EXPECT_EQ(fp16_to_float(r.outputs[0].data<Float16>()[1].bits), -1.75f);
  EXPECT_EQ(fp16_to_float(r.outputs[0].data<Float16>()[2].bits), 1024.0f);  // 1024.5 ties to even
}

TEST(ElementwiseKernels, BadInputsGiveCleanErrors) {
  Tensor a = random_float({2, 3}, 31), b = random_float({4}, 32);
  OpRun r = run_op(ir::OpKind::kAdd, 14, {&a, &b});
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("[2,3]"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("[4]"), std::string::npos) << r.status.message();
  EXPECT_NE(r.status.message().find("test_node"), std::string::npos) << r.status.message();

  Tensor i = make<int64_t>(DataType::kInt64, {2}, {4, 5}), z = make<int64_t>(DataType::kInt64, {2}, {1, 0});
  EXPECT_EQ(run_op(ir::OpKind::kDiv, 14, {&i, &z}).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run_op(ir::OpKind::kMod, 13, {&i, &z}).status.code(), StatusCode::kInvalidArgument);

  Tensor f = random_float({2}, 33);
  EXPECT_FALSE(run_op(ir::OpKind::kAdd, 14, {&f, &i}).status.ok());          // dtype mismatch
  EXPECT_EQ(run_op(ir::OpKind::kSqrt, 13, {&i}).status.code(), StatusCode::kUnsupported);
  EXPECT_FALSE(run_op(ir::OpKind::kClip, 13, {&f, &f}).status.ok());         // non-scalar min
  Tensor scale = make<float>(DataType::kFloat32, {3}, {1, 1, 1});
  EXPECT_FALSE(run_op(ir::OpKind::kQuantizeLinear, 13, {&a, &scale}, {{"axis", ir::Attribute::of_int(5)}}).status.ok());
  EXPECT_FALSE(run_op(ir::OpKind::kQuantizeLinear, 13, {&a, &scale}, {{"axis", ir::Attribute::of_int(0)}}).status.ok());
  ir::Attribute to = ir::Attribute::of_int(8);  // STRING
  EXPECT_EQ(run_op(ir::OpKind::kCast, 13, {&f}, {{"to", to}}).status.code(), StatusCode::kUnsupported);
  EXPECT_FALSE(run_op(ir::OpKind::kPRelu, 9, {&a, &b}).status.ok());
}

// ResNet-sized Add + Relu; a smoke check that the loops stay on their fast paths.
TEST(ElementwiseKernels, ResNetSizedAddReluIsFast) {
  Tensor a = random_float({1, 256, 56, 56}, 41), b = random_float({1, 256, 56, 56}, 42);
  Tensor bias = random_float({256, 1, 1}, 43);
  // The best of several runs, so a loaded machine does not make the number meaningless.
  double ms = 1e30;
  for (int k = 0; k < 10; ++k) {
    auto t0 = std::chrono::steady_clock::now();
    OpRun s = run_op(ir::OpKind::kAdd, 14, {&a, &b});
    OpRun c = run_op(ir::OpKind::kAdd, 14, {&s.outputs[0], &bias});
    OpRun r = run_op(ir::OpKind::kRelu, 14, {&c.outputs[0]});
    ASSERT_TRUE(r.status.ok());
    ms = std::min(ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("Add + Add(bias) + Relu on 1x256x56x56: %.3f ms (best of 10)\n", ms);
  EXPECT_LT(ms, 200.0);
}

}  // namespace
}  // namespace kiln::cpu
