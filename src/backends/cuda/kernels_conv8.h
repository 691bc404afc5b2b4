// Kiln's 8-bit implicit-GEMM convolution (QuantConv's "kiln.conv8_igemm" tactic; factory_quant_conv.cc,
// docs/decisions/0080): tensor-core mma.sync over INT8 (int32 accumulation, sm_80+) or FP8 E4M3
// (float32 accumulation, sm_89+) operands, NHWC, with QuantConv's whole epilogue fused — per-channel
// scale, zero-point correction, bias, residual, ReLU, and the store either in the plan's float storage
// or requantized to the next layer's 8-bit input (ONNX QuantizeLinear rounding).
//
// The convolution is the GEMM  Y[M, K] = X'[M, R*S*C] W[K, R*S*C]^T  with M = N*OH*OW output pixels
// (row-major, p = (n, oh, ow)), X' the im2col view of the NHWC input (never materialized: each
// 16-byte chunk of 16 channels is loaded from its tap, zeros in the padding) and W the KRSC weight.
// Requires C % 16 == 0 (a chunk never straddles two taps) and K % 8 == 0; any N, H, W, R, S, pads,
// strides, dilations.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kernels_quant.h"

namespace kiln::cuda {

// What happens to each accumulator value a[m, k] (int32 for INT8, float32 for FP8):
//   v = (a - zero_point * wsum[k]) * scale[k] + bias[k] + residual[m, k];  v = max(v, 0) if relu
// then y[m, k] = v in storage y_type (kF32 / kF16 / kBF16), or, when y_8bit, the 8-bit code of
// QuantizeLinear(v, y_scale, y_zero_point): round-half-even(v / y_scale) + y_zero_point saturated to
// int8 (y_fp8 false), or the nearest E4M3FN value of v / y_scale, saturating (y_fp8 true).
// scale[k] = x_scale * w_scale[k] (float32, computed on the host as QuantConv's epilogue does);
// wsum, bias, residual may be null (zero_point is then ignored / 0 added); the residual is NHWC
// [M, K] in storage res_type (float storage only).
struct Conv8Epilogue {
  const float* scale = nullptr;
  const float* wsum = nullptr;
  int zero_point = 0;
  const float* bias = nullptr;
  const void* residual = nullptr;
  StorageType res_type = StorageType::kF32;
  bool relu = false;
  void* y = nullptr;
  StorageType y_type = StorageType::kF32;
  bool y_8bit = false;
  bool y_fp8 = false;
  float y_scale = 1.f;
  int y_zero_point = 0;
};

// How many tile configurations ("variants", the tactic's variant ids 0..n-1) launch_conv8_igemm has
// for this geometry on this device: 0 when it cannot run it (C % 16 != 0, K % 8 != 0, FP8 below
// sm_89, INT8 below sm_80). Variants 0-2 are the mma.sync kernel (128x128, 128x64, 64x64 tiles); on
// compute capability 9.0, when Kiln was built for sm_90 (the sm_90a wgmma kernels,
// backends/cuda/sm90a/conv8_wgmma.cu, KILN_HAVE_SM90A), variants 3-4 are the wgmma kernel with
// 128x128 and 128x256 tiles.
int conv8_igemm_variants(const Conv8Geometry& g, bool fp8, int sm_version);

// Runs variant `variant` (< conv8_igemm_variants) of the convolution: x the quantized input NHWC
// [N, H, W, C] (int8 codes, or E4M3FN bytes when fp8), w the KRSC weight [K, R, S, C] in the same
// format; the epilogue as above. x, w, y and the residual must be 16-byte aligned. No workspace.
// Errors: cudaErrorInvalidValue for an unsupported geometry or variant; launch errors as returned
// by cudaGetLastError.
cudaError_t launch_conv8_igemm(const int8_t* x, const int8_t* w, const Conv8Geometry& g, bool fp8,
                               const Conv8Epilogue& e, int variant, cudaStream_t stream);

// The sm_90a wgmma kernel behind variants 3.. (its own variant ids 0..n-1 here): n = 0 unless
// sm_version == 90 and the geometry fits (C % 16 == 0, K % 8 == 0). Same arguments and errors as
// launch_conv8_igemm. Defined only in builds with KILN_HAVE_SM90A.
int conv8_wgmma_variants(const Conv8Geometry& g, bool fp8, int sm_version);
cudaError_t launch_conv8_wgmma(const int8_t* x, const int8_t* w, const Conv8Geometry& g, bool fp8,
                               const Conv8Epilogue& e, int variant, cudaStream_t stream);

}  // namespace kiln::cuda
