// The patchify convolution as a GEMM (docs/decisions/0083): which convs are one (kernel == stride,
// no padding, dilation 1, one group) and the strided copies that gather their input windows into
// the GEMM's rows and, for NCHW, move the GEMM's [N*OH*OW, K] output into NCHW. Host code: the
// op table checks these descriptors against the CPU reference conv without a GPU.
#include "backends/cuda/gpu_layers.h"

namespace kiln::cuda {

bool conv_is_patchify(const ConvParams& p) {
  return p.r == p.stride_h && p.sk == p.stride_w && p.r * p.sk > 1 && p.pad_h == 0 && p.pad_w == 0 && p.dil_h == 1 &&
         p.dil_w == 1 && p.groups == 1 && p.oh * p.r <= p.h && p.ow * p.sk <= p.w;
}

ConvPatches plan_conv_patches(const ConvParams& p, bool nhwc) {
  ConvPatches c;
  c.on = true;
  c.nchw = !nhwc;
  const int64_t R = p.r, S = p.sk, C = p.c, H = p.h, W = p.w;
  StridedDesc& g = c.gather;
  if (nhwc) {
    // x [N, H, W, C] -> P [N, OH, OW, R, S*C]: a window row (s, c) is S*C contiguous elements.
    g.rank = 5;
    const int64_t dims[5] = {p.n, p.oh, p.ow, R, S * C};
    const int64_t strides[5] = {H * W * C, R * W * C, S * C, W * C, 1};
    for (int k = 0; k < 5; ++k) {
      g.out_dims[k] = dims[k];
      g.src_strides[k] = strides[k];
    }
    return c;
  }
  // x [N, C, H, W] -> P [N, OH, OW, C, R, S].
  g.rank = 6;
  const int64_t dims[6] = {p.n, p.oh, p.ow, C, R, S};
  const int64_t strides[6] = {C * H * W, R * W, S, H * W, W, 1};
  for (int k = 0; k < 6; ++k) {
    g.out_dims[k] = dims[k];
    g.src_strides[k] = strides[k];
  }
  // The GEMM's output [N, OH*OW, K] -> Y [N, K, OH*OW].
  const int64_t P = p.oh * p.ow;
  StridedDesc& t = c.scatter;
  t.rank = 3;
  t.out_dims[0] = p.n;
  t.out_dims[1] = p.k;
  t.out_dims[2] = P;
  t.src_strides[0] = P * p.k;
  t.src_strides[1] = 1;
  t.src_strides[2] = p.k;
  return c;
}

}  // namespace kiln::cuda
