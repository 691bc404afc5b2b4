// Aux streams of one execution context: creation and the fork/join enqueue (see aux_streams.h).
#include "backends/cuda/aux_streams.h"

#include <algorithm>
#include <string>

#include <nvtx3/nvToolsExt.h>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {

AuxStreams::~AuxStreams() {
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (fork_) cudaEventDestroy(fork_);
  for (Aux& a : aux_) {
    if (a.join) cudaEventDestroy(a.join);
    if (a.cudnn) cudnnDestroy(a.cudnn);
    if (a.lt) cublasLtDestroy(a.lt);
    cudaFree(a.workspace);
    if (a.stream) cudaStreamDestroy(a.stream);
  }
}

Status AuxStreams::reserve(const std::vector<size_t>& workspace_bytes, int events, bool* moved) {
  if (moved) *moved = false;
  if (workspace_bytes.empty() && events <= 0) return Status::Ok();
  if (aux_.size() < workspace_bytes.size()) aux_.resize(workspace_bytes.size());
  for (size_t k = 0; k < aux_.size(); ++k) {
    Aux& a = aux_[k];
    if (!a.stream) {
      KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&a.stream, cudaStreamNonBlocking));
      KILN_CUDNN_CHECK(cudnnCreate(&a.cudnn));
      KILN_CUBLAS_CHECK(cublasLtCreate(&a.lt));
      // Events without timing: cheaper to record and wait on.
      KILN_CUDA_CHECK(cudaEventCreateWithFlags(&a.join, cudaEventDisableTiming));
    }
    const size_t want = std::max<size_t>(k < workspace_bytes.size() ? workspace_bytes[k] : 0, 256);
    if (a.workspace && a.workspace_bytes >= want) continue;
    if (a.workspace) {
      KILN_CUDA_CHECK(cudaDeviceSynchronize());  // work enqueued before may still use it
      cudaFree(a.workspace);
      a.workspace = nullptr;
      if (moved) *moved = true;
    }
    a.workspace_bytes = 0;
    const cudaError_t e = cudaMalloc(&a.workspace, want);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear it so later calls do not report it again
      a.workspace = nullptr;
      return Status(e == cudaErrorMemoryAllocation ? StatusCode::kOutOfMemory : StatusCode::kInternal,
                    "cudaMalloc of " + std::to_string(want) + " bytes for the tactic workspace of aux stream " +
                        std::to_string(k + 1) + " failed: " + cudaGetErrorString(e));
    }
    a.workspace_bytes = want;
  }
  if (!fork_) KILN_CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  while (events_.size() < static_cast<size_t>(std::max(events, 0))) {
    cudaEvent_t e = nullptr;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    events_.push_back(e);
  }
  return Status::Ok();
}

Status AuxStreams::enqueue(const std::vector<std::unique_ptr<Layer>>& layers, const StreamPlan& plan,
                           const ExecState& st) const {
  const int naux = std::min(count(), plan.aux_streams);  // the plan's streams; more may exist for another model
  const bool split = naux > 0 && plan.stream.size() == layers.size() && plan.aux_streams == naux &&
                     plan.events <= static_cast<int>(events_.size());
  // Per-stream states on the stack: nothing is allocated per enqueue.
  ExecState states[kMaxAuxStreams + 1];
  states[0] = st;
  for (int k = 0; k < naux && split; ++k) {
    const Aux& a = aux_[static_cast<size_t>(k)];
    states[k + 1] = st;
    states[k + 1].stream = a.stream;
    states[k + 1].cudnn = a.cudnn;
    states[k + 1].lt = a.lt;
    states[k + 1].workspace = a.workspace;
    states[k + 1].workspace_bytes = a.workspace_bytes;
  }
  if (split) KILN_CUDA_CHECK(cudaEventRecord(fork_, st.stream));
  Status result = Status::Ok();
  for (size_t k = 0; split && k < static_cast<size_t>(naux) && result.ok(); ++k)
    result = cuda_status(cudaStreamWaitEvent(aux_[k].stream, fork_, 0), "cudaStreamWaitEvent", __FILE__, __LINE__);
  for (size_t i = 0; i < layers.size() && result.ok(); ++i) {
    const Layer& layer = *layers[i];
    ExecState& s = states[split ? plan.stream[i] : 0];
    for (size_t w = 0; split && w < plan.waits[i].size() && result.ok(); ++w)
      result = cuda_status(cudaStreamWaitEvent(s.stream, events_[static_cast<size_t>(plan.waits[i][w])], 0),
                           "cudaStreamWaitEvent", __FILE__, __LINE__);
    if (!result.ok()) break;
    nvtxRangePushA(layer.name.c_str());  // one NVTX range per layer, as on the single-stream path
    result = layers[i]->enqueue(s);
    nvtxRangePop();
    if (!result.ok()) result = result.with_context("layer '" + layer.name + "'");
    if (result.ok() && split && plan.record[i] >= 0)
      result = cuda_status(cudaEventRecord(events_[static_cast<size_t>(plan.record[i])], s.stream), "cudaEventRecord",
                           __FILE__, __LINE__);
  }
  // The join, after an error too: a capture in progress cannot end while a forked stream has
  // not been joined back.
  for (size_t k = 0; split && k < static_cast<size_t>(naux); ++k) {
    Status j = cuda_status(cudaEventRecord(aux_[k].join, aux_[k].stream), "cudaEventRecord", __FILE__, __LINE__);
    if (j.ok()) j = cuda_status(cudaStreamWaitEvent(st.stream, aux_[k].join, 0), "cudaStreamWaitEvent", __FILE__, __LINE__);
    if (result.ok()) result = j;
  }
  return result;
}

}  // namespace kiln::cuda
