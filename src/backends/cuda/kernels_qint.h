// Launchers of Kiln's kernels for narrow integer values computed wide (docs/decisions/0076):
// uint8 / int8 / uint16 / int16 values stored as int32 (uint32 as int64) that are *canonical*
// (equal to the native value). Each kernel computes the ONNX op of the declared narrow type and
// writes canonical values, written as the CPU reference kernels compute them (the file named at
// each launcher), so results equal the CPU's bit for bit. Tensors are row-major. Every launcher
// enqueues on `stream`, never allocates and never synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"
#include "kiln/types.h"

namespace kiln::cuda {

// A narrow integer type: its width and signedness; lo / hi its range.
struct NarrowType {
  int bits = 8;
  bool is_signed = false;
  __host__ __device__ int64_t lo() const { return is_signed ? -(int64_t{1} << (bits - 1)) : 0; }
  __host__ __device__ int64_t hi() const { return is_signed ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1; }
};

// The NarrowType of uint8 / int8 / uint16 / int16 / uint32 (into *q); false for any other dtype.
inline bool narrow_type_of(DataType dt, NarrowType* q) {
  switch (dt) {
    case DataType::kUInt8: *q = {8, false}; return true;
    case DataType::kInt8: *q = {8, true}; return true;
    case DataType::kUInt16: *q = {16, false}; return true;
    case DataType::kInt16: *q = {16, true}; return true;
    case DataType::kUInt32: *q = {32, false}; return true;
    default: return false;
  }
}

// The scale / zero-point index of element i of x viewed as [outer, dim, inner]: (i / inner) %
// dim when per_axis, else 0.
struct QuantAxis {
  int64_t count = 0;  // elements of x
  int64_t dim = 1, inner = 1;
  bool per_axis = false;
};

// ONNX QuantizeLinear, float32 x and scale (cpu/ops_elementwise_quantize.cc):
// y = clamp(rint(x / scale) + zp, q.lo(), q.hi()) with the division in float32, rint half to
// even, the sum in double, NaN -> 0. zp (int32, canonical) may be null (0). y is int32.
cudaError_t launch_quantize_linear(const float* x, const float* scale, const int32_t* zp, int32_t* y, NarrowType q,
                                   const QuantAxis& a, cudaStream_t stream);
// ONNX DequantizeLinear to float32: y = (float(x) - float(zp)) * scale, in float32 without
// contraction. x, zp: int32 (canonical narrow or int32 values); zp may be null.
cudaError_t launch_dequantize_linear(const int32_t* x, const float* scale, const int32_t* zp, float* y,
                                     const QuantAxis& a, cudaStream_t stream);
// ONNX DynamicQuantizeLinear (uint8) over `count` float32 values, one block: x_min = min(0, x),
// x_max = max(0, x) (NaN skipped, as std::min / std::max keep the first operand), scale =
// (x_max - x_min) / 255; when scale > 0 and finite, zp = clamp(rint(-x_min / scale), 0, 255)
// and y = clamp(rint(x / scale) + zp, 0, 255) (NaN -> 0), else zp = 0 and y = 0. y, y_zp: int32.
cudaError_t launch_dynamic_quantize_linear(const float* x, int64_t count, int32_t* y, float* y_scale, int32_t* y_zp,
                                           cudaStream_t stream);

// ONNX Cast to a narrow integer type (core/numerics.cc's double_to_int64, then the C++
// conversion to the narrow type): a float source (kF32 / kF16 / kBF16) truncates toward zero,
// NaN and |x| >= 2^63 giving INT64_MIN; an integer source (kI32 / kI64) is taken as is; the low
// q.bits bits are kept, sign- or zero-extended into y (kI32 or kI64): canonical values.
cudaError_t launch_cast_to_narrow(const void* x, StorageType xt, void* y, StorageType yt, NarrowType q, int64_t count,
                                  cudaStream_t stream);

// ONNX Clip on integers (cpu/ops_elementwise_activation.cc): y = min(max(x, lo), hi), lo / hi
// device scalars of type t (kI32 / kI64) or null (no bound).
cudaError_t launch_int_clip(const void* x, const void* lo, const void* hi, void* y, StorageType t, int64_t count,
                            cudaStream_t stream);

// ONNX BitShift on unsigned narrow values (cpu/ops_elementwise_binary.cc): y = a << b (left) or
// a >> b, shifting by >= q.bits giving 0, the result kept to q.bits bits. a, b, y of type t
// (kI32 / kI64), broadcast by d.
cudaError_t launch_bit_shift(const void* a, const void* b, void* y, StorageType t, NarrowType q, bool left,
                             const BroadcastDesc& d, cudaStream_t stream);

// Integer matmul of MatMulInteger / QLinearMatMul (cpu/ops_nn_gemm.cc): acc[b, i, j] =
// sum_k (a[., i, k] - za) * (b[., k, j] - zb), int32 wrapping. a, b: int32 holding 8-bit values;
// za per tensor or per row (za_per_row), zb per tensor or per column; null = 0. Output batch
// entry o reads A matrix (o's batch index . a_bstrides) and B matrix likewise (strides in
// matrices, 0 on broadcast batch dims; batch dims right-aligned in batch_dims[kMaxRank]).
struct IntMatMulDesc {
  int64_t m = 0, n = 0, k = 0;
  int batch_rank = 0;
  int64_t batch_dims[kMaxRank] = {};
  int64_t a_bstrides[kMaxRank] = {};
  int64_t b_bstrides[kMaxRank] = {};
  bool za_per_row = false, zb_per_col = false;
};
cudaError_t launch_int_matmul(const int32_t* a, const int32_t* za, const int32_t* b, const int32_t* zb, int32_t* acc,
                              const IntMatMulDesc& d, cudaStream_t stream);

// Integer convolution of ConvInteger / QLinearConv (cpu/ops_nn_conv_int.cc): x [n, c, in...],
// w [m, c / group, kernel...], acc [n, m, out...] int32 (wrapping); x - zx and w - zw[m]
// (zx a scalar, zw per tensor or per output channel; null = 0); padding contributes 0. Spatial
// dims right-aligned in 3 (leading ones 1), as WindowGeom.
struct IntConvDesc {
  int64_t n = 1, c = 1, m = 1, group = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1},
          dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};
  bool zw_per_channel = false;
};
cudaError_t launch_int_conv(const int32_t* x, const int32_t* zx, const int32_t* w, const int32_t* zw, int32_t* acc,
                            const IntConvDesc& d, cudaStream_t stream);

// The requantization of QLinearMatMul / QLinearConv (cpu/ops_nn_gemm.cc, ops_nn_conv_int.cc):
// v = acc[i] + bias[ch] (int32 wrapping; bias null = 0), scale = s1[c1] * s2[c2] / sy[0] in
// float32, y[i] = clamp(rint(float(v) * scale) + zy[0], q.lo(), q.hi()) (the sum in double).
// c1 = (i / s1_div) % s1_mod when s1_per, else 0; ch = (i / s2_div) % s2_mod, c2 = ch when
// s2_per, else 0.
struct RequantDesc {
  int64_t count = 0;
  bool s1_per = false, s2_per = false;
  int64_t s1_div = 1, s1_mod = 1, s2_div = 1, s2_mod = 1;
  NarrowType q;
};
cudaError_t launch_requantize(const int32_t* acc, const int32_t* bias, const float* s1, const float* s2, const float* sy,
                              const int32_t* zy, int32_t* y, const RequantDesc& d, cudaStream_t stream);

}  // namespace kiln::cuda
