// QuantConv's FP8 convolution as one cuDNN operation graph (graph API, backend descriptors;
// cudnn_backend.h), the whole epilogue fused into the conv kernel:
//   Y = act(conv(Xq, Wq) * S + B (+ Z))
// Xq: FP8 E4M3 NHWC [N, C, H, W] (QuantConv's quantized input); Wq: FP8 E4M3 KRSC [K, C, R, S];
// S = x_scale * w_scale[k] and B (the bias): float32 [K] (as [1, K, 1, 1]); Z (the residual) and Y:
// NHWC in `io` (half, bfloat16 or float); act = ReLU or identity; the conv accumulates in float32,
// intermediates are virtual float32. cuDNN lists FP8 convolution engines on Hopper (sm_90) with
// cuDNN >= 8.6 (cudnn-frontend samples/cpp/convolution/fp8_fprop.cpp); elsewhere it lists none and
// the tactic is simply absent. Graphs and plans are shared by the layers of one signature on a
// device (a ResNet repeats its blocks).
#pragma once

#include <cudnn.h>

#include <string>

#include "backends/cuda/cudnn_backend.h"
#include "backends/cuda/kernels_quant.h"

namespace kiln::cuda {

struct Conv8GraphParams {
  Conv8Geometry g{};
  cudnnDataType_t io = CUDNN_DATA_HALF;  // Y and Z
  bool residual = false, relu = false;
  std::string signature() const;  // everything the graph depends on
};

// The number of engine configurations cuDNN lists for the graph on the current device (0: none,
// also when cuDNN refuses to build the graph). Builds the graph once per signature and device.
int conv8_graph_configs(const Conv8GraphParams& p);

// The finalized plan of configuration `rank` (shared per signature, device and rank).
StatusOr<GraphPlan> conv8_graph_plan(const Conv8GraphParams& p, int rank);

// Runs `gp` on `h` (whose stream is set): Y = act(conv(xq, w) * scale + bias (+ z)).
Status conv8_graph_run(cudnnHandle_t h, const GraphPlan& gp, const void* xq, const void* w, const float* scale,
                       const float* bias, const void* z, void* y, void* workspace);

}  // namespace kiln::cuda
