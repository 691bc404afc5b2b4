// The CUDA side of aux streams for one execution context (the plan itself is streams.h): the
// aux streams with their own cuDNN / cuBLASLt handles and tactic workspaces, the fork, join and
// cross-stream events, and the enqueue of a layer list across them. Everything is created up
// front, so an enqueue only records events and waits on them: no allocation, no synchronization.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <vector>

#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/streams.h"
#include "kiln/status.h"

namespace kiln::cuda {

class AuxStreams {
 public:
  AuxStreams() = default;
  AuxStreams(const AuxStreams&) = delete;
  AuxStreams& operator=(const AuxStreams&) = delete;
  ~AuxStreams();
  // At least one aux stream per entry of `workspace_bytes` (bytes of tactic scratch each needs),
  // each with at least that workspace, and at least `events` cross-stream events: creates what is
  // missing and grows a workspace that is too small (never shrinks or removes; a context shared
  // by models of several shapes holds the most any of them needs). Returns through `moved`
  // whether a workspace was reallocated (an earlier CUDA-graph capture named the old one; the
  // device is synchronized before the old one is freed). Errors name what failed to be created or
  // allocated.
  Status reserve(const std::vector<size_t>& workspace_bytes, int events, bool* moved = nullptr);
  int count() const { return static_cast<int>(aux_.size()); }
  // Enqueues `layers` as `plan` says: stream 0 is st.stream (st carries its handles and
  // workspace), stream k > 0 the k-th aux stream. The aux streams first wait on an event
  // recorded on st.stream, and st.stream waits on each of them at the end — after an error too,
  // so a capture in progress can still end. Only the plan's aux streams take part (there may be
  // more, made for another model). With fewer aux streams than the plan names (count() == 0
  // included) every layer runs on st.stream in order, which is always a valid order.
  Status enqueue(const std::vector<std::unique_ptr<Layer>>& layers, const StreamPlan& plan, const ExecState& st) const;

 private:
  struct Aux {
    cudaStream_t stream = nullptr;  // non-blocking: no implicit sync with the legacy default stream
    cudnnHandle_t cudnn = nullptr;  // bound to `stream` by cudnnSetStream in each layer's enqueue
    cublasLtHandle_t lt = nullptr;
    void* workspace = nullptr;
    size_t workspace_bytes = 0;
    cudaEvent_t join = nullptr;  // recorded after the stream's last layer; stream 0 waits on it
  };
  std::vector<Aux> aux_;
  cudaEvent_t fork_ = nullptr;       // recorded on stream 0; each aux stream waits on it first
  std::vector<cudaEvent_t> events_;  // the plan's cross-stream events
};

}  // namespace kiln::cuda
