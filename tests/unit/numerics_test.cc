// Exhaustive checks of the element formats in core/numerics against their definitions, with
// expected values computed here from the sign/exponent/mantissa fields, not from the code under
// test:
//   OFP8 E4M3FN / E5M2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0, sec. 5.1-5.3:
//     value = (-1)^s * 2^(e - bias) * (1 + m / 2^M) for e > 0, (-1)^s * 2^(1 - bias) * m / 2^M for
//     e == 0; E4M3FN (bias 7): S.1111.111 is NaN, no infinities, max 448; E5M2 (bias 15): IEEE-like
//     specials (exponent 31: m == 0 inf, else NaN), max 57344.
//   Overflow: ONNX Cast-19 table ("saturate"): saturate=1: +-Inf and [x] > FLT_MAX -> +-FLT_MAX;
//     saturate=0: E4M3FN -> NaN, E5M2 -> +-Inf. [x] is x rounded (RNE) to the target's mantissa.
//   FP4 E2M1: OCP Microscaling Formats (MX) v1.0 sec. 5.3.3: bias 1, no inf/NaN, max 6.
//   NF4: QLoRA (Dettmers et al. 2023) appendix E codebook.
//   INT4/UINT4: ONNX IR spec "4-bit types": two per byte, element 0 in the low nibble.
//   FP16: IEEE 754-2008 binary16; BF16: the upper half of binary32, round to nearest even.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/numerics.h"
#include "core/tensor.h"

namespace kiln {
namespace {

uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float float_of(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// Value of a minifloat code from its fields (no specials), in double.
double field_value(uint32_t code, int ebits, int mbits, int bias) {
  const uint32_t s = code >> (ebits + mbits);
  const uint32_t e = (code >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = code & ((1u << mbits) - 1);
  const double frac = static_cast<double>(m) / static_cast<double>(1u << mbits);
  const double v = e == 0 ? std::pow(2.0, 1 - bias) * frac : std::pow(2.0, static_cast<int>(e) - bias) * (1.0 + frac);
  return s ? -v : v;
}

bool is_e4m3_nan(uint32_t c) { return (c & 0x7f) == 0x7f; }
bool is_e5m2_special(uint32_t c) { return ((c >> 2) & 0x1f) == 0x1f; }

// Same bits, or both NaN; distinguishes -0 from +0.
void expect_same_float(float got, double want, const std::string& what) {
  if (std::isnan(want)) { EXPECT_TRUE(std::isnan(got)) << what; return; }
  EXPECT_EQ(got, static_cast<float>(want)) << what;
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << what;
}

struct Fp8 {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*encode)(float, bool);
  int ebits, mbits, bias;
  bool (*special)(uint32_t);
};

const Fp8 kE4M3{"e4m3fn", fp8e4m3fn_to_float, float_to_fp8e4m3fn, 4, 3, 7, is_e4m3_nan};
const Fp8 kE5M2{"e5m2", fp8e5m2_to_float, float_to_fp8e5m2, 5, 2, 15, is_e5m2_special};

TEST(NumericsFp8, E4M3FNEveryCodeDecodesPerSpec) {
  for (uint32_t c = 0; c < 256; ++c) {
    const double want = is_e4m3_nan(c) ? NAN : field_value(c, 4, 3, 7);
    expect_same_float(fp8e4m3fn_to_float(static_cast<uint8_t>(c)), want, "code " + std::to_string(c));
  }
  EXPECT_EQ(fp8e4m3fn_to_float(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3fn_to_float(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8e4m3fn_to_float(0x08), std::ldexp(1.0f, -6));  // smallest normal
}

TEST(NumericsFp8, E5M2EveryCodeDecodesPerSpec) {
  for (uint32_t c = 0; c < 256; ++c) {
    double want;
    if (is_e5m2_special(c)) want = (c & 3) ? NAN : ((c & 0x80) ? -INFINITY : INFINITY);
    else want = field_value(c, 5, 2, 15);
    expect_same_float(fp8e5m2_to_float(static_cast<uint8_t>(c)), want, "code " + std::to_string(c));
  }
  EXPECT_EQ(fp8e5m2_to_float(0x7b), 57344.0f);
  EXPECT_EQ(fp8e5m2_to_float(0x01), std::ldexp(1.0f, -16));
}

void check_roundtrip(const Fp8& f) {
  for (uint32_t c = 0; c < 256; ++c) {
    const float v = f.decode(static_cast<uint8_t>(c));
    if (std::isnan(v)) continue;
    if (std::isinf(v)) {  // E5M2 only: infinities survive only without saturation
      EXPECT_EQ(f.encode(v, false), c) << f.name << " code " << c;
      continue;
    }
    EXPECT_EQ(f.encode(v, true), c) << f.name << " code " << c;
    EXPECT_EQ(f.encode(v, false), c) << f.name << " code " << c;
  }
}

TEST(NumericsFp8, EncodeOfDecodeIsIdentityForEveryNonNaNCode) {
  check_roundtrip(kE4M3);
  check_roundtrip(kE5M2);
}

// Positive finite codes sorted by value (code order is value order for positive codes).
std::vector<uint32_t> positive_finite_codes(const Fp8& f) {
  std::vector<uint32_t> r;
  for (uint32_t c = 0; c < 128; ++c)
    if (!f.special(c)) r.push_back(c);
  return r;
}

void check_midpoints(const Fp8& f) {
  const auto codes = positive_finite_codes(f);
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    const double a = field_value(codes[i], f.ebits, f.mbits, f.bias);
    const double b = field_value(codes[i + 1], f.ebits, f.mbits, f.bias);
    const float mid = static_cast<float>((a + b) / 2);  // exact: 1 more bit than the format
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const uint32_t even = (codes[i] % 2 == 0) ? codes[i] : codes[i + 1];
    for (bool sat : {true, false}) {
      EXPECT_EQ(f.encode(mid, sat), even) << f.name << " midpoint " << mid;
      EXPECT_EQ(f.encode(-mid, sat), even | 0x80) << f.name << " midpoint " << -mid;
      EXPECT_EQ(f.encode(std::nextafter(mid, 0.0f), sat), codes[i]) << f.name << " below " << mid;
      EXPECT_EQ(f.encode(std::nextafter(mid, INFINITY), sat), codes[i + 1]) << f.name << " above " << mid;
    }
  }
}

TEST(NumericsFp8, RoundsToNearestEvenAtEveryMidpoint) {
  check_midpoints(kE4M3);
  check_midpoints(kE5M2);
}

TEST(NumericsFp8, CastOverflowTableSaturate) {
  const float big[] = {INFINITY, 1e10f, std::numeric_limits<float>::max()};
  for (float x : big) {
    EXPECT_EQ(float_to_fp8e4m3fn(x, true), 0x7e) << x;
    EXPECT_EQ(float_to_fp8e4m3fn(-x, true), 0xfe) << x;
    EXPECT_EQ(float_to_fp8e5m2(x, true), 0x7b) << x;
    EXPECT_EQ(float_to_fp8e5m2(-x, true), 0xfb) << x;
  }
  // [x] is rounded first: E4M3FN's 464 ties to 448 (even), just above rounds to 480 > max.
  EXPECT_EQ(float_to_fp8e4m3fn(464.0f, false), 0x7e);
  EXPECT_EQ(float_to_fp8e4m3fn(std::nextafter(464.0f, INFINITY), true), 0x7e);
  EXPECT_EQ(float_to_fp8e5m2(std::nextafter(61440.0f, 0.0f), false), 0x7b);
  EXPECT_EQ(float_to_fp8e5m2(61440.0f, true), 0x7b);
}

TEST(NumericsFp8, CastOverflowTableNoSaturate) {
  const float big[] = {1e10f, std::numeric_limits<float>::max(), 480.0f};
  for (float x : big) {
    EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(x, false)))) << x;
    EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(-x, false)))) << x;
  }
  EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(INFINITY, false))));
  EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(-INFINITY, false))));
  EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(std::nextafter(464.0f, INFINITY), false))));
  // E5M2: overflow (61440 ties up to 65536, even) and infinities give signed infinity.
  for (float x : {INFINITY, 1e10f, 61440.0f, 65536.0f}) {
    EXPECT_EQ(float_to_fp8e5m2(x, false), 0x7c) << x;
    EXPECT_EQ(float_to_fp8e5m2(-x, false), 0xfc) << x;
  }
}

TEST(NumericsFp8, NaNAndSignedZero) {
  for (bool sat : {true, false}) {
    EXPECT_TRUE(std::isnan(fp8e4m3fn_to_float(float_to_fp8e4m3fn(NAN, sat))));
    EXPECT_TRUE(std::isnan(fp8e5m2_to_float(float_to_fp8e5m2(NAN, sat))));
    EXPECT_TRUE(std::isnan(fp8e5m2_to_float(float_to_fp8e5m2(-NAN, sat))));
    EXPECT_EQ(float_to_fp8e4m3fn(-0.0f, sat), 0x80);
    EXPECT_EQ(float_to_fp8e5m2(-0.0f, sat), 0x80);
    EXPECT_EQ(float_to_fp8e4m3fn(0.0f, sat), 0x00);
    // Below half the smallest subnormal: signed zero.
    EXPECT_EQ(float_to_fp8e4m3fn(-std::ldexp(1.0f, -11), sat), 0x80);
    EXPECT_EQ(float_to_fp8e5m2(std::ldexp(1.0f, -18), sat), 0x00);
  }
  EXPECT_TRUE(std::signbit(fp8e4m3fn_to_float(0x80)));
  EXPECT_TRUE(std::signbit(fp8e5m2_to_float(0x80)));
}

TEST(NumericsFp8, StoreFromDoubleHonoursSaturate) {
  uint8_t b = 0;
  store_from_double(DataType::kFloat8E4M3FN, &b, 0, 1e6, true);
  EXPECT_EQ(b, 0x7e);
  store_from_double(DataType::kFloat8E4M3FN, &b, 0, 1e6, false);
  EXPECT_EQ(b, 0x7f);
  store_from_double(DataType::kFloat8E5M2, &b, 0, -1e6, false);
  EXPECT_EQ(b, 0xfc);
  // A double just above an E4M3 midpoint (1 + 2^-4) must not be rounded to the midpoint first.
  store_from_double(DataType::kFloat8E4M3FN, &b, 0, 1.0 + std::ldexp(1.0, -4) + std::ldexp(1.0, -40));
  EXPECT_EQ(fp8e4m3fn_to_float(b), 1.125f);
}

TEST(NumericsFp4, EveryE2M1CodeAndMidpoint) {
  const float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint32_t c = 0; c < 16; ++c) {
    const double want = field_value(c, 2, 1, 1);
    expect_same_float(fp4e2m1_to_float(static_cast<uint8_t>(c)), want, "code " + std::to_string(c));
    EXPECT_EQ(std::fabs(want), kValues[c & 7]);
    EXPECT_EQ(float_to_fp4e2m1(static_cast<float>(want)), c);
  }
  for (uint32_t c = 0; c + 1 < 8; ++c) {
    const float mid = (kValues[c] + kValues[c + 1]) / 2;
    const uint32_t even = c % 2 == 0 ? c : c + 1;
    EXPECT_EQ(float_to_fp4e2m1(mid), even) << mid;
    EXPECT_EQ(float_to_fp4e2m1(-mid), even | 8) << -mid;
    EXPECT_EQ(float_to_fp4e2m1(std::nextafter(mid, 0.0f)), c) << mid;
    EXPECT_EQ(float_to_fp4e2m1(std::nextafter(mid, INFINITY)), c + 1) << mid;
  }
  // No inf/NaN codes: saturate to +-6; NaN -> +6 (documented choice).
  EXPECT_EQ(float_to_fp4e2m1(7.0f), 0x7);
  EXPECT_EQ(float_to_fp4e2m1(-INFINITY), 0xf);
  EXPECT_EQ(float_to_fp4e2m1(NAN), 0x7);
  EXPECT_EQ(float_to_fp4e2m1(-0.0f), 0x8);
}

TEST(NumericsNf4, CodebookAndNearestCode) {
  // QLoRA appendix E, in code order.
  const double kBook[16] = {-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                            -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                            0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                            0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0};
  for (uint32_t c = 0; c < 16; ++c) {
    EXPECT_EQ(nf4_to_float(static_cast<uint8_t>(c)), static_cast<float>(kBook[c]));
    EXPECT_EQ(float_to_nf4(static_cast<float>(kBook[c])), c);
  }
  for (uint32_t c = 0; c + 1 < 16; ++c) {
    const float mid = static_cast<float>((kBook[c] + kBook[c + 1]) / 2);
    EXPECT_EQ(float_to_nf4(std::nextafter(mid, -2.0f)), c) << mid;
    EXPECT_EQ(float_to_nf4(std::nextafter(mid, 2.0f)), c + 1) << mid;
  }
  EXPECT_EQ(float_to_nf4(3.0f), 15);
  EXPECT_EQ(float_to_nf4(-3.0f), 0);
  EXPECT_EQ(float_to_nf4(NAN), 7);
}

TEST(NumericsInt4, PackingTwoPerByteLowNibbleFirstAndClamping) {
  uint8_t buf[3] = {0xAA, 0xAA, 0xAA};
  const int64_t vals[5] = {-8, 7, -1, 3, 0};
  for (int i = 0; i < 5; ++i) store_from_int64(DataType::kInt4, buf, i, vals[i]);
  EXPECT_EQ(buf[0], 0x78);  // element 0 (-8 = 0x8) low, element 1 (7) high
  EXPECT_EQ(buf[1], 0x3F);
  EXPECT_EQ(buf[2], 0xA0);  // element 4 low; the high nibble is untouched
  for (int i = 0; i < 5; ++i) EXPECT_EQ(load_as_int64(DataType::kInt4, buf, i), vals[i]);
  store_from_int64(DataType::kInt4, buf, 0, 100);
  EXPECT_EQ(load_as_int64(DataType::kInt4, buf, 0), 7);
  store_from_int64(DataType::kInt4, buf, 1, -100);
  EXPECT_EQ(load_as_int64(DataType::kInt4, buf, 1), -8);
  store_from_int64(DataType::kUInt4, buf, 2, 16);
  EXPECT_EQ(load_as_int64(DataType::kUInt4, buf, 2), 15);
  store_from_int64(DataType::kUInt4, buf, 3, -3);
  EXPECT_EQ(load_as_int64(DataType::kUInt4, buf, 3), 0);
  EXPECT_EQ(buf[2], 0xA0);  // elements 2 and 3 live in buf[1]: buf[2] is untouched
  for (uint32_t c = 0; c < 16; ++c) EXPECT_EQ(int4_from_code(static_cast<uint8_t>(c)), c < 8 ? static_cast<int>(c) : static_cast<int>(c) - 16);
  // From double: round half to even, then clamp; huge values and infinities clamp; NaN -> 0.
  const double in[] = {2.5, -2.5, 3.5, 1e300, -INFINITY, NAN, 6.7};
  const int64_t want4[] = {2, -2, 4, 7, -8, 0, 7};
  const int64_t wantu4[] = {2, 0, 4, 15, 0, 0, 7};
  for (int i = 0; i < 7; ++i) {
    store_from_double(DataType::kInt4, buf, 0, in[i]);
    EXPECT_EQ(load_as_int64(DataType::kInt4, buf, 0), want4[i]) << in[i];
    store_from_double(DataType::kUInt4, buf, 1, in[i]);
    EXPECT_EQ(load_as_int64(DataType::kUInt4, buf, 1), wantu4[i]) << in[i];
  }
}

double fp16_field_value(uint32_t h) { return field_value(h, 5, 10, 15); }

TEST(NumericsFp16, EveryCodeDecodesAndRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double want;
    if (e == 0x1f) want = m ? NAN : ((h & 0x8000) ? -INFINITY : INFINITY);
    else want = fp16_field_value(h);
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    expect_same_float(f, want, "fp16 code " + std::to_string(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(f), h) << "fp16 code " << h;
  }
}

// The bulk conversions (checkpoint weights) agree bit for bit with the scalar decoders, for
// every code, and cast_tensor's multi-threaded F16/BF16 -> float32 path with both.
TEST(NumericsFp16, BulkDecodeAndCastEqualScalarForEveryCode) {
  std::vector<uint16_t> codes(65536 * 3);
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint16_t>(i * 7919u);
  std::vector<float> h(codes.size()), b(codes.size());
  fp16_to_float_n(codes.data(), h.data(), static_cast<int64_t>(codes.size()));
  bf16_to_float_n(codes.data(), b.data(), static_cast<int64_t>(codes.size()));
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16}) {
    Tensor t(dt, {static_cast<int64_t>(codes.size())});
    std::memcpy(t.raw(), codes.data(), codes.size() * 2);
    StatusOr<Tensor> f = cast_tensor(t, DataType::kFloat32);
    ASSERT_TRUE(f.ok()) << f.status().message();
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want = dt == DataType::kFloat16 ? fp16_to_float(codes[i]) : bf16_to_float(codes[i]);
      uint32_t wb, hb, cb;
      std::memcpy(&wb, &want, 4);
      std::memcpy(&hb, dt == DataType::kFloat16 ? &h[i] : &b[i], 4);
      std::memcpy(&cb, &f->data<float>()[i], 4);
      ASSERT_EQ(hb, wb) << dtype_name(dt) << " code " << codes[i];
      ASSERT_EQ(cb, wb) << dtype_name(dt) << " code " << codes[i] << " (cast_tensor)";
    }
  }
}

TEST(NumericsFp16, RoundsToNearestEvenAtEveryMidpointIncludingSubnormals) {
  for (uint32_t h = 0; h < 0x7bff; ++h) {  // pairs (h, h+1) of positive finite values
    const double a = fp16_field_value(h), b = fp16_field_value(h + 1);
    const float mid = static_cast<float>((a + b) / 2);
    ASSERT_EQ(static_cast<double>(mid), (a + b) / 2);
    const uint32_t even = h % 2 == 0 ? h : h + 1;
    ASSERT_EQ(float_to_fp16(mid), even) << mid;
    ASSERT_EQ(float_to_fp16(-mid), even | 0x8000) << -mid;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, 0.0f)), h) << mid;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, INFINITY)), h + 1) << mid;
  }
  // Below half the smallest subnormal (2^-25): zero; at it: ties to even (0).
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0);
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 1);
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -26)), 0x8000);
}

// The fast bit-level float -> half equals the one-rounding double path on a dense sample of
// every float bit pattern (both signs, every exponent, NaN payloads included).
TEST(NumericsFp16, FloatPathMatchesDoublePathAcrossAllFloats) {
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) {
    float f;
    const uint32_t bits = static_cast<uint32_t>(u);
    std::memcpy(&f, &bits, 4);
    const uint16_t got = float_to_fp16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(fp16_to_float(got))) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(got, double_to_fp16(f)) << std::hex << bits;
  }
}

TEST(NumericsFp16, OverflowGoesToInfinity) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);  // midpoint to the next binade: ties to even (inf)
  EXPECT_EQ(float_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_fp16(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_fp16(-0.0f), 0x8000);
  // From double, one rounding: 1 + 2^-11 + 2^-40 is above the midpoint of 1 and 1 + 2^-10.
  uint16_t h = 0;
  store_from_double(DataType::kFloat16, &h, 0, 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));
  EXPECT_EQ(h, 0x3c01);
  EXPECT_EQ(double_to_fp16(65519.99999), 0x7bff);
}

// Reference bf16 rounding on the bit pattern: keep the upper half, add one if the dropped half
// is above 0x8000, or exactly 0x8000 with an odd kept half.
uint16_t reference_bf16(uint32_t u) {
  const uint32_t hi = u >> 16, lo = u & 0xffff;
  return static_cast<uint16_t>(hi + ((lo > 0x8000 || (lo == 0x8000 && (hi & 1))) ? 1 : 0));
}

TEST(NumericsBf16, RoundToNearestEvenAndNaN) {
  const uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xffff};
  for (uint32_t hi = 0; hi < 65536; ++hi) {
    const bool nan_or_inf = ((hi >> 7) & 0xff) == 0xff;
    for (uint32_t lo : lows) {
      const uint32_t u = (hi << 16) | lo;
      const float f = float_of(u);
      const uint16_t got = float_to_bf16(f);
      if (std::isnan(f)) {
        ASSERT_TRUE(std::isnan(bf16_to_float(got))) << std::hex << u;  // never rounds to inf
        ASSERT_EQ(got >> 15, u >> 31);
        continue;
      }
      if (nan_or_inf) { ASSERT_EQ(got, hi) << std::hex << u; continue; }
      ASSERT_EQ(got, reference_bf16(u)) << std::hex << u;
      // The double path agrees with the float path for float inputs.
      ASSERT_EQ(double_to_bf16(f), got) << std::hex << u;
    }
    if (!nan_or_inf) {
      ASSERT_EQ(bits_of(bf16_to_float(static_cast<uint16_t>(hi))), hi << 16);
    }
  }
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

}  // namespace
}  // namespace kiln
