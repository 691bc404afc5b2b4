// cuDNN's graph API through its backend descriptors (cuDNN 9 Backend API reference: the cudnn_graph
// library's descriptor types and attributes), shared by the graph-API conv tactics (conv_graph.cc:
// fp16 / bf16 FusedConv; conv8_graph.cc: QuantConv's FP8 conv): owned descriptors, attribute
// setters, NHWC tensors, pointwise ops, an operation graph's engine configurations in heuristic
// order, and execution plans.
#pragma once

#include <cudnn.h>

#include <memory>
#include <vector>

#include "kiln/status.h"

namespace kiln::cuda {

// Owns one backend descriptor.
struct BackendDesc {
  cudnnBackendDescriptor_t d = nullptr;
  BackendDesc() = default;
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  ~BackendDesc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
};
using Desc = std::shared_ptr<BackendDesc>;

StatusOr<Desc> create_desc(cudnnBackendDescriptorType_t type);
Status set_attr(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v);
Status set_desc_attr(const Desc& d, cudnnBackendAttributeName_t a, const Desc& v);

// A finalized 4-D tensor in logical N,C,H,W order with NHWC strides (cuDNN's convention for
// layouts), 16-byte aligned; `is_virtual`: an intermediate that never reaches memory.
StatusOr<Desc> nhwc_tensor(int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w, bool is_virtual);

// A finalized pointwise operation y = mode(x[, b]) computed in float32.
StatusOr<Desc> pointwise_op(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y);

// A finalized 2-D CONVOLUTION_FORWARD operation y = conv(x, w) (cross-correlation, float32
// compute, alpha 1, beta 0), symmetric pads.
StatusOr<Desc> conv_forward_op(const Desc& x, const Desc& w, const Desc& y, const int64_t pad[2], const int64_t stride[2],
                               const int64_t dil[2]);

// The finalized operation graph of `ops` on handle `h`.
StatusOr<Desc> operation_graph(cudnnHandle_t h, const std::vector<Desc>& ops);

// The engine configurations cuDNN's heuristics list for `op_graph`: mode A's, then FALLBACK's;
// empty when cuDNN has no engine for the graph.
StatusOr<std::vector<Desc>> engine_configs(const Desc& op_graph);

// One finalized execution plan with its workspace size and identity.
struct GraphPlan {
  Desc plan;
  int64_t workspace = 0;  // bytes
  int heur_rank = -1;     // position in the heuristic list
  int64_t engine = -1;    // cuDNN's global engine index (for the tactic string)
};

// Finalizes an execution plan for configuration `rank` of `configs`; an error when cuDNN refuses it.
StatusOr<GraphPlan> make_plan(cudnnHandle_t h, const std::vector<Desc>& configs, int rank);

// Runs plan `gp` on handle `h` with the device pointers of the tensors `uids` (same order).
Status execute_plan(cudnnHandle_t h, const GraphPlan& gp, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
                    void* workspace);

// Graphs and plans are built with one handle per device that lives as long as the plans it
// finalized (a tuning context's handle is destroyed after the build); execution uses the calling
// context's handle on the same device.
int current_device();
StatusOr<cudnnHandle_t> build_handle(int device);

}  // namespace kiln::cuda
