// Kiln's kernels around the 8-bit layers (QuantLinear, QuantConv; ops.def; factory_quant_linear.cc,
// factory_quant_conv.cc):
// quantizing activations, the dequantizing epilogue, and a reference GEMM for shapes the
// libraries' 8-bit tensor-core GEMMs do not take. Rounding is ONNX QuantizeLinear's (x / scale in
// float, round half to even, saturate; FP8: the nearest E4M3FN value, saturating), the same as
// the CPU reference kernel's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// q[i] = quantize(x[i] / scale) for `count` elements of x (storage `xt`): int8 with `zero_point`
// (int8 [-128, 127]) when !fp8, else E4M3FN bytes (zero point 0). 8 elements per thread when
// count % 8 == 0 and x is 16-byte aligned.
cudaError_t launch_quantize_8bit(StorageType xt, const void* x, int8_t* q, int64_t count, float scale,
                                 int zero_point, bool fp8, cudaStream_t stream);

// The 8-bit output of the epilogue (QuantConv's y_scale / y_zero_point; docs/decisions/0081): y
// (storage kI8 or kF8E4M3) receives QuantizeLinear(v, y_scale, y_zero_point) of each value v:
// int8 rint(v / y_scale) + y_zero_point saturated to [-128, 127], or the nearest E4M3FN value of
// v / y_scale saturating at +-448 (zero point 0) — the CPU reference's rounding. The residual is
// then read in `res_type` (a float storage).
struct Requant8 {
  float y_scale = 1.f;
  int y_zero_point = 0;
  StorageType res_type = StorageType::kF32;
};

// v[m, n] = act((acc[m, n] - zero_point * wsum[n]) * (x_scale * w_scale[n]) + bias[n] + r[m, n]) for
// the row-major [M, N] accumulator (int32 when acc_int, else float32), each step rounded to float32
// as the CPU reference does it (no fused multiply-add); act = ReLU when `relu`, else identity;
// wsum / bias / residual may be null. y[m, n] = v in float storage `yt` (fp32 / fp16 / bf16; the
// residual r in the same storage), or, when yt is kI8 / kF8E4M3, the 8-bit code of v as *out8 says
// (out8 required then; cudaErrorInvalidValue without it). An NHWC conv output is row-major
// [N*H*W, K]. One pass over the accumulator; 4 outputs per thread when N % 4 == 0 and the pointers
// are aligned (16 bytes for acc, scales and fp32 data, 8 for 16-bit data, 4 for 8-bit y).
cudaError_t launch_dequant_epilogue(const void* acc, bool acc_int, void* y, StorageType yt, int64_t m, int64_t n,
                                    float x_scale, const float* w_scale, const float* wsum, int zero_point,
                                    const float* bias, bool relu, cudaStream_t stream, const void* residual = nullptr,
                                    const Requant8* out8 = nullptr);

// The reference GEMM: acc[m, n] = sum_k q[m, k] * w[n, k] over 8-bit operands (int8 -> int32, or
// E4M3FN -> float32), one thread per output. For shapes no tensor-core GEMM takes.
cudaError_t launch_gemm_8bit_reference(const int8_t* q, const int8_t* w, void* acc, int64_t m, int64_t n, int64_t k,
                                       bool fp8, cudaStream_t stream);

// The reference 8-bit convolution (one thread per output): acc[p, k] = sum_{r,s,c} q[n, ih, iw, c]
// * w[k, r, s, c] over the NHWC quantized input q [N, H, W, C] and the KRSC weight, p = (n, oh, ow)
// row-major, ih = oh * stride_h - pad_h + r * dil_h (likewise iw); taps in the padding contribute
// 0. int8 -> int32, or E4M3FN -> float32 (`fp8`). For shapes and GPUs no library tactic takes.
struct Conv8Geometry {
  int64_t n, c, h, w, k, r, s, oh, ow, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
};
cudaError_t launch_conv_8bit_reference(const int8_t* q, const int8_t* w, void* acc, const Conv8Geometry& g, bool fp8,
                                       cudaStream_t stream);

}  // namespace kiln::cuda
