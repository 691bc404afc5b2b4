// Element format conversions (see numerics.h for the format sources).
#include "core/numerics.h"

#include "kiln/status.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kiln {
namespace {

uint32_t f2u(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
float u2f(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

// A small binary float format: 1 sign bit, `ebits` exponent bits, `mbits` mantissa bits.
struct MiniFloat {
  int ebits, mbits, bias;
  double max_finite;
};

// Decodes a minifloat code whose all-ones exponent is handled by the caller.
double decode_minifloat(const MiniFloat& f, uint32_t code) {
  const uint32_t sign = code >> (f.ebits + f.mbits);
  const uint32_t exp = (code >> f.mbits) & ((1u << f.ebits) - 1);
  const uint32_t man = code & ((1u << f.mbits) - 1);
  double v = exp == 0 ? std::ldexp(static_cast<double>(man), 1 - f.bias - f.mbits)
                      : std::ldexp(1.0 + man / static_cast<double>(1u << f.mbits), static_cast<int>(exp) - f.bias);
  return sign ? -v : v;
}

// Rounds |a| (finite, > 0) to the format's grid with ties to even, ignoring the upper range limit.
// Returns the magnitude code (exponent|mantissa) and the rounded value.
uint32_t encode_magnitude(const MiniFloat& f, double a, double* rounded) {
  const int emin = 1 - f.bias;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  e -= 1;             // a in [2^e, 2^(e+1))
  if (e < emin) e = emin;
  const double q = std::ldexp(1.0, e - f.mbits);
  const double r = std::nearbyint(a / q) * q;  // default rounding mode: ties to even
  *rounded = r;
  if (r == 0) return 0;
  int er;
  std::frexp(r, &er);
  er -= 1;
  if (er < emin) {  // subnormal
    return static_cast<uint32_t>(std::ldexp(r, f.mbits - emin));
  }
  const uint32_t man = static_cast<uint32_t>(std::ldexp(r, f.mbits - er)) - (1u << f.mbits);
  return (static_cast<uint32_t>(er + f.bias) << f.mbits) | man;
}

constexpr MiniFloat kE4M3{4, 3, 7, 448.0};
constexpr MiniFloat kE5M2{5, 2, 15, 57344.0};
// FNUZ: every exponent code is a number (0x80 is the one NaN), so the largest is S.1111.111 /
// S.11111.11: 1.875 * 2^(15-8) = 240 and 1.75 * 2^(31-16) = 57344.
constexpr MiniFloat kE4M3FNUZ{4, 3, 8, 240.0};
constexpr MiniFloat kE5M2FNUZ{5, 2, 16, 57344.0};
constexpr MiniFloat kE2M1{2, 1, 1, 6.0};

constexpr float kNF4Codebook[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};

}  // namespace

namespace {

// Exact on the bits (IEEE 754 binary16 -> binary32), written as selects so loops of it vectorize:
// normals re-bias the exponent (15 -> 127), subnormals are man * 2^-24 (exact in float), inf
// keeps its sign, every NaN becomes the quiet NaN (with the sign).
inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  const uint32_t normal = (em << 13) + (112u << 23);
  const uint32_t sub = f2u(static_cast<float>(em) * 5.9604644775390625e-8f);  // 2^-24; used for em < 0x400
  const uint32_t special = em > 0x7c00u ? 0x7fc00000u : 0x7f800000u;
  const uint32_t r = em >= 0x7c00u ? special : em < 0x400u ? sub : normal;
  return u2f(r | sign);
}

}  // namespace

float fp16_to_float(uint16_t h) { return half_bits_to_float(h); }

void fp16_to_float_n(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

void bf16_to_float_n(const uint16_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = u2f(static_cast<uint32_t>(src[i]) << 16);
}

// The encoders take double so that float64 sources are rounded once, straight to the narrow
// format; going through float first would round twice (wrong at near-midpoints).
uint16_t double_to_fp16(double f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7e00;
  if (std::isinf(f)) return sign | 0x7c00;
  const double a = std::fabs(f);
  if (a == 0) return sign;
  constexpr MiniFloat kHalf{5, 10, 15, 65504.0};
  double r;
  const uint32_t code = encode_magnitude(kHalf, a, &r);
  if (r > kHalf.max_finite) return sign | 0x7c00;  // IEEE: overflow rounds to infinity
  return sign | static_cast<uint16_t>(code);
}

// Round to nearest even on the bits (IEEE 754-2008 binary16: 5-bit exponent, bias 15, 10-bit
// mantissa), equal to double_to_fp16 for every float (a float -> half conversion rounds once),
// and fast enough for weight conversion (ResNet-101: 44.5M weights per FP16 load).
uint16_t float_to_fp16(float f) {
  const uint32_t u = f2u(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN (quiet), inf
  if (a >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds past 65504, the largest half
  if (a >= 0x38800000u) {                      // a normal half (>= 2^-14)
    uint32_t r = a - 0x38000000u;              // exponent bias 127 -> 15
    r += 0x0fffu + ((r >> 13) & 1u);           // ties to even on the 13 dropped bits
    return sign | static_cast<uint16_t>(r >> 13);
  }
  // Subnormal half (unit 2^-24) or zero: adding 0.5 (whose float ULP is 2^-24) lets the FPU
  // round to that unit (nearest even); the sum's low bits count the units. 1024 units is the
  // smallest normal half, encoded by the same bits.
  const float t = u2f(a) + 0.5f;
  return sign | static_cast<uint16_t>(f2u(t) - 0x3f000000u);
}

float bf16_to_float(uint16_t b) { return u2f(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t u = f2u(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet; never truncates to inf
  const uint32_t lsb = (u >> 16) & 1;
  u += 0x7fff + lsb;  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(u >> 16);
}

uint16_t double_to_bf16(double f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f)) return sign | 0x7fc0;
  if (std::isinf(f)) return sign | 0x7f80;
  const double a = std::fabs(f);
  if (a == 0) return sign;
  constexpr MiniFloat kBF16{8, 7, 127, 3.3895313892515355e38};
  double r;
  const uint32_t code = encode_magnitude(kBF16, a, &r);
  if (r > kBF16.max_finite) return sign | 0x7f80;
  return sign | static_cast<uint16_t>(code);
}

float fp8e4m3fn_to_float(uint8_t v) {
  if ((v & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(decode_minifloat(kE4M3, v));
}

uint8_t double_to_fp8e4m3fn(double f, bool saturate) {
  // On the bits of the double (the weight quantizer runs this billions of times): the same
  // round-to-nearest-even as encode_magnitude, checked over every code's neighbourhood by
  // tests/unit/numerics_test.cc.
  uint64_t b;
  std::memcpy(&b, &f, 8);
  const uint8_t sign = (b >> 63) ? 0x80 : 0;
  b &= ~(uint64_t{1} << 63);
  const int e = static_cast<int>(b >> 52) - 1023;  // a in [2^e, 2^(e+1)) for normal doubles
  if (e == 1024) return (b & ((uint64_t{1} << 52) - 1)) ? (0x7f | sign) : saturate ? (sign | 0x7e) : (sign | 0x7f);
  if (e < -6) {
    // E4M3's subnormals (steps of 2^-9; 8 * 2^-9 is the smallest normal, code 8): exact scaling.
    double a;
    std::memcpy(&a, &b, 8);
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.0));
  }
  uint64_t keep = (b >> 49) & 7;  // the 3 mantissa bits kept
  const uint64_t rest = b & ((uint64_t{1} << 49) - 1), half = uint64_t{1} << 48;
  if (rest > half || (rest == half && (keep & 1))) ++keep;
  int ee = e + 7;
  if (keep == 8) {
    keep = 0;
    ++ee;
  }
  if (ee > 15 || (ee == 15 && keep == 7)) return saturate ? (sign | 0x7e) : (sign | 0x7f);  // past 448
  return sign | static_cast<uint8_t>((ee << 3) | static_cast<int>(keep));
}

uint8_t float_to_fp8e4m3fn(float f, bool saturate) { return double_to_fp8e4m3fn(f, saturate); }

float fp8e5m2_to_float(uint8_t v) {
  if ((v & 0x7c) == 0x7c) {
    if (v & 0x3) return std::numeric_limits<float>::quiet_NaN();
    return (v & 0x80) ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  }
  return static_cast<float>(decode_minifloat(kE5M2, v));
}

uint8_t double_to_fp8e5m2(double f, bool saturate) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return 0x7f | sign;
  if (std::isinf(f)) return saturate ? (sign | 0x7b) : (sign | 0x7c);
  const double a = std::fabs(f);
  if (a == 0) return sign;
  double r;
  const uint32_t code = encode_magnitude(kE5M2, a, &r);
  if (r > kE5M2.max_finite) return saturate ? (sign | 0x7b) : (sign | 0x7c);
  return sign | static_cast<uint8_t>(code);
}

uint8_t float_to_fp8e5m2(float f, bool saturate) { return double_to_fp8e5m2(f, saturate); }

namespace {

// The FNUZ encoders: like the FN ones, but -0 and negative underflow give 0x00, and NaN, +-inf
// (without saturate) and overflow (without saturate) give the single NaN 0x80.
uint8_t double_to_fnuz(const MiniFloat& fmt, double f, bool saturate) {
  const uint8_t kNaN = 0x80, max_code = 0x7f;
  if (std::isnan(f)) return kNaN;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isinf(f)) return saturate ? (sign | max_code) : kNaN;
  const double a = std::fabs(f);
  if (a == 0) return 0;
  double r;
  const uint32_t code = encode_magnitude(fmt, a, &r);
  if (r > fmt.max_finite) return saturate ? (sign | max_code) : kNaN;
  if (code == 0) return 0;  // rounded to zero: FNUZ has no -0
  return sign | static_cast<uint8_t>(code);
}

}  // namespace

float fp8e4m3fnuz_to_float(uint8_t v) {
  if (v == 0x80) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(decode_minifloat(kE4M3FNUZ, v));
}
uint8_t double_to_fp8e4m3fnuz(double f, bool saturate) { return double_to_fnuz(kE4M3FNUZ, f, saturate); }

float fp8e5m2fnuz_to_float(uint8_t v) {
  if (v == 0x80) return std::numeric_limits<float>::quiet_NaN();
  return static_cast<float>(decode_minifloat(kE5M2FNUZ, v));
}
uint8_t double_to_fp8e5m2fnuz(double f, bool saturate) { return double_to_fnuz(kE5M2FNUZ, f, saturate); }

float fp8e8m0_to_float(uint8_t v) {
  if (v == 0xff) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(v) - 127);
}

bool e8m0_rounding_from_name(const std::string& name, E8M0Rounding* out) {
  if (name == "up") *out = E8M0Rounding::kUp;
  else if (name == "down") *out = E8M0Rounding::kDown;
  else if (name == "nearest") *out = E8M0Rounding::kNearest;
  else return false;
  return true;
}

uint8_t double_to_fp8e8m0(double f, bool saturate, E8M0Rounding mode) {
  constexpr uint8_t kNaN = 0xff, kMin = 0x00, kMax = 0xfe;
  if (std::isnan(f)) return kNaN;
  const double a = std::fabs(f);
  if (std::isinf(a)) return saturate ? kMax : kNaN;
  if (a == 0) return saturate ? kMin : kNaN;
  int ex;
  const double fr = std::frexp(a, &ex);  // a = fr * 2^ex, fr in [0.5, 1)
  const double m = 2 * fr;                // a = m * 2^(ex - 1), m in [1, 2)
  int e = ex - 1;
  switch (mode) {
    case E8M0Rounding::kUp: e += m > 1.0 ? 1 : 0; break;
    case E8M0Rounding::kDown: break;
    case E8M0Rounding::kNearest: e += m >= 1.5 ? 1 : 0; break;
  }
  if (e < -127) return saturate ? kMin : kNaN;
  if (e > 127) return saturate ? kMax : kNaN;
  return static_cast<uint8_t>(e + 127);
}

float fp4e2m1_to_float(uint8_t code) { return static_cast<float>(decode_minifloat(kE2M1, code & 0xf)); }

uint8_t double_to_fp4e2m1(double f) {
  const uint8_t sign = std::signbit(f) ? 0x8 : 0;
  if (std::isnan(f)) return 0x7;
  const double a = std::fabs(f);
  if (a == 0) return sign;
  if (std::isinf(f)) return sign | 0x7;
  double r;
  const uint32_t code = encode_magnitude(kE2M1, a, &r);
  if (r > kE2M1.max_finite) return sign | 0x7;
  return sign | static_cast<uint8_t>(code);
}

uint8_t float_to_fp4e2m1(float f) { return double_to_fp4e2m1(f); }

float nf4_to_float(uint8_t code) { return kNF4Codebook[code & 0xf]; }

uint8_t float_to_nf4(float f) {
  if (std::isnan(f)) return 7;  // the 0.0 code: NF4 has no NaN
  uint8_t best = 0;
  float best_d = std::numeric_limits<float>::infinity();
  for (uint8_t c = 0; c < 16; ++c) {
    const float d = std::fabs(f - kNF4Codebook[c]);
    if (d < best_d) { best_d = d; best = c; }
  }
  return best;
}

int int4_from_code(uint8_t code) { return (code & 0x8) ? static_cast<int>(code & 0xf) - 16 : code & 0xf; }
int int2_from_code(uint8_t code) { return (code & 0x2) ? static_cast<int>(code & 0x3) - 4 : code & 0x3; }

namespace {

uint8_t get_nibble(const void* data, int64_t i) {
  const uint8_t b = static_cast<const uint8_t*>(data)[i / 2];
  return (i & 1) ? (b >> 4) : (b & 0xf);
}

void set_nibble(void* data, int64_t i, uint8_t v) {
  uint8_t& b = static_cast<uint8_t*>(data)[i / 2];
  b = (i & 1) ? static_cast<uint8_t>((b & 0x0f) | (v << 4)) : static_cast<uint8_t>((b & 0xf0) | (v & 0xf));
}

// 2-bit elements: four per byte, element i in bits 2*(i%4) .. 2*(i%4)+1.
uint8_t get_crumb(const void* data, int64_t i) {
  const uint8_t b = static_cast<const uint8_t*>(data)[i / 4];
  return (b >> (2 * (i & 3))) & 0x3;
}

void set_crumb(void* data, int64_t i, uint8_t v) {
  uint8_t& b = static_cast<uint8_t*>(data)[i / 4];
  const int shift = 2 * static_cast<int>(i & 3);
  b = static_cast<uint8_t>((b & ~(0x3 << shift)) | ((v & 0x3) << shift));
}

template <typename T>
T at(const void* d, int64_t i) { return static_cast<const T*>(d)[i]; }
template <typename T>
void put(void* d, int64_t i, T v) { static_cast<T*>(d)[i] = v; }

// Float -> integer as C++ would for in-range values; out-of-range and NaN follow x86's
// cvttsd2si convention for int64 and wrap through int64 for narrower types.
int64_t double_to_int64(double v) {
  if (std::isnan(v) || v >= 9.2233720368547758e18 || v < -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

}  // namespace

double load_as_double(DataType t, const void* d, int64_t i) {
  switch (t) {
    case DataType::kFloat32: return at<float>(d, i);
    case DataType::kFloat64: return at<double>(d, i);
    case DataType::kFloat16: return fp16_to_float(at<uint16_t>(d, i));
    case DataType::kBFloat16: return bf16_to_float(at<uint16_t>(d, i));
    case DataType::kFloat8E4M3FN: return fp8e4m3fn_to_float(at<uint8_t>(d, i));
    case DataType::kFloat8E5M2: return fp8e5m2_to_float(at<uint8_t>(d, i));
    case DataType::kInt8: return at<int8_t>(d, i);
    case DataType::kInt16: return at<int16_t>(d, i);
    case DataType::kInt32: return at<int32_t>(d, i);
    case DataType::kInt64: return static_cast<double>(at<int64_t>(d, i));
    case DataType::kUInt8: return at<uint8_t>(d, i);
    case DataType::kUInt16: return at<uint16_t>(d, i);
    case DataType::kUInt32: return at<uint32_t>(d, i);
    case DataType::kUInt64: return static_cast<double>(at<uint64_t>(d, i));
    case DataType::kBool: return at<uint8_t>(d, i) ? 1.0 : 0.0;
    case DataType::kInt4: return int4_from_code(get_nibble(d, i));
    case DataType::kUInt4: return get_nibble(d, i);
    case DataType::kFloat4E2M1: return fp4e2m1_to_float(get_nibble(d, i));
    case DataType::kNF4: return nf4_to_float(get_nibble(d, i));
    case DataType::kFloat8E4M3FNUZ: return fp8e4m3fnuz_to_float(at<uint8_t>(d, i));
    case DataType::kFloat8E5M2FNUZ: return fp8e5m2fnuz_to_float(at<uint8_t>(d, i));
    case DataType::kFloat8E8M0: return fp8e8m0_to_float(at<uint8_t>(d, i));
    case DataType::kInt2: return int2_from_code(get_crumb(d, i));
    case DataType::kUInt2: return get_crumb(d, i);
    case DataType::kString: case DataType::kUndefined: case DataType::kCount: break;
  }
  KILN_CHECK(false && "load_as_double: unsupported dtype");
  return 0;
}

int64_t load_as_int64(DataType t, const void* d, int64_t i) {
  switch (t) {
    case DataType::kInt8: return at<int8_t>(d, i);
    case DataType::kInt16: return at<int16_t>(d, i);
    case DataType::kInt32: return at<int32_t>(d, i);
    case DataType::kInt64: return at<int64_t>(d, i);
    case DataType::kUInt8: return at<uint8_t>(d, i);
    case DataType::kUInt16: return at<uint16_t>(d, i);
    case DataType::kUInt32: return at<uint32_t>(d, i);
    case DataType::kUInt64: return static_cast<int64_t>(at<uint64_t>(d, i));
    case DataType::kBool: return at<uint8_t>(d, i) ? 1 : 0;
    case DataType::kInt4: return int4_from_code(get_nibble(d, i));
    case DataType::kUInt4: return get_nibble(d, i);
    case DataType::kInt2: return int2_from_code(get_crumb(d, i));
    case DataType::kUInt2: return get_crumb(d, i);
    default: return double_to_int64(load_as_double(t, d, i));
  }
}

void store_from_int64(DataType t, void* d, int64_t i, int64_t v) {
  switch (t) {
    case DataType::kInt8: put<int8_t>(d, i, static_cast<int8_t>(v)); return;
    case DataType::kInt16: put<int16_t>(d, i, static_cast<int16_t>(v)); return;
    case DataType::kInt32: put<int32_t>(d, i, static_cast<int32_t>(v)); return;
    case DataType::kInt64: put<int64_t>(d, i, v); return;
    case DataType::kUInt8: put<uint8_t>(d, i, static_cast<uint8_t>(v)); return;
    case DataType::kUInt16: put<uint16_t>(d, i, static_cast<uint16_t>(v)); return;
    case DataType::kUInt32: put<uint32_t>(d, i, static_cast<uint32_t>(v)); return;
    case DataType::kUInt64: put<uint64_t>(d, i, static_cast<uint64_t>(v)); return;
    case DataType::kBool: put<uint8_t>(d, i, v != 0); return;
    case DataType::kInt4: set_nibble(d, i, static_cast<uint8_t>(v < -8 ? -8 : v > 7 ? 7 : v) & 0xf); return;
    case DataType::kUInt4: set_nibble(d, i, static_cast<uint8_t>(v < 0 ? 0 : v > 15 ? 15 : v)); return;
    case DataType::kInt2: set_crumb(d, i, static_cast<uint8_t>(v < -2 ? -2 : v > 1 ? 1 : v) & 0x3); return;
    case DataType::kUInt2: set_crumb(d, i, static_cast<uint8_t>(v < 0 ? 0 : v > 3 ? 3 : v)); return;
    default: store_from_double(t, d, i, static_cast<double>(v)); return;
  }
}

void store_from_double(DataType t, void* d, int64_t i, double v, bool saturate) {
  switch (t) {
    case DataType::kFloat32: put<float>(d, i, static_cast<float>(v)); return;
    case DataType::kFloat64: put<double>(d, i, v); return;
    case DataType::kFloat16: put<uint16_t>(d, i, double_to_fp16(v)); return;
    case DataType::kBFloat16: put<uint16_t>(d, i, double_to_bf16(v)); return;
    case DataType::kFloat8E4M3FN: put<uint8_t>(d, i, double_to_fp8e4m3fn(v, saturate)); return;
    case DataType::kFloat8E5M2: put<uint8_t>(d, i, double_to_fp8e5m2(v, saturate)); return;
    case DataType::kBool: put<uint8_t>(d, i, v != 0); return;
    case DataType::kFloat4E2M1: set_nibble(d, i, double_to_fp4e2m1(v)); return;
    case DataType::kNF4: set_nibble(d, i, float_to_nf4(static_cast<float>(v))); return;
    case DataType::kFloat8E4M3FNUZ: put<uint8_t>(d, i, double_to_fp8e4m3fnuz(v, saturate)); return;
    case DataType::kFloat8E5M2FNUZ: put<uint8_t>(d, i, double_to_fp8e5m2fnuz(v, saturate)); return;
    case DataType::kFloat8E8M0: put<uint8_t>(d, i, double_to_fp8e8m0(v, saturate)); return;
    case DataType::kInt4: case DataType::kUInt4: case DataType::kInt2: case DataType::kUInt2: {
      // Round to nearest even, then clamp; clamping before the conversion keeps huge values
      // (and infinities) out of the undefined float->int64 range. NaN stores 0.
      const double r = std::isnan(v) ? 0.0 : std::clamp(std::nearbyint(v), -16.0, 16.0);
      store_from_int64(t, d, i, static_cast<int64_t>(r));
      return;
    }
    case DataType::kString: case DataType::kUndefined: case DataType::kCount:
      KILN_CHECK(false && "store_from_double: unsupported dtype");
      return;
    default: store_from_int64(t, d, i, double_to_int64(v)); return;
  }
}

}  // namespace kiln
