// The internals of GpuModel and GpuContext (gpu_model.h), shared by the lowering and model
// setup (gpu_model.cc) and the execution context (gpu_context.cc). Private to the CUDA backend.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/aux_streams.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/streams.h"

namespace kiln::cuda {

struct GpuModel::Impl {
  std::vector<GVal> vals;
  std::vector<std::unique_ptr<Layer>> layers;
  std::vector<GpuLayerInfo> infos;
  std::vector<int> input_vals, output_vals;  // staging values (row-major; float32, or int32/int64/bool as the graph has them)
  std::vector<std::string> eliminated;       // Concat layers whose inputs all write in place
  std::vector<void*> weight_allocs;
  size_t arena = 0, act_sum = 0, weights = 0, workspace = 0;
  StreamPlan streams;                 // stream per layer and cross-stream events (streams.h)
  std::vector<size_t> aux_workspace;  // per aux stream: bytes its layers' tactics need
  GpuBuildOptions opts;
  GpuModel::SetupTimes times;
  std::map<std::string, std::vector<uint8_t>> packed;      // record_packed: weights as uploaded
  std::set<std::string> packed_conflicts;                  // keys recorded twice with other bytes
  std::set<std::pair<std::string, int>> packed_uses;       // (layer, constant value) uploaded packed
  int packed_hits = 0;                                     // weights taken from the plan's bytes
  ~Impl() {
    for (void* p : weight_allocs) cudaFree(p);
  }
};

struct GpuResources::Impl {
  void* arena = nullptr;
  size_t arena_bytes = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  AuxStreams aux;  // aux streams with their handles, workspaces and events (grown per model)
  uint64_t generation = 0;
  ~Impl() {
    if (cudnn) cudnnDestroy(cudnn);
    if (lt) cublasLtDestroy(lt);
    cudaFree(arena);
    cudaFree(workspace);
  }
};

struct GpuContext::Impl {
  const GpuModel::Impl* m = nullptr;
  std::shared_ptr<const GpuModel> keep;
  std::shared_ptr<GpuResources> res;  // arena, workspace, handles, aux streams (maybe shared)
  bool graph_on = false;
  cudaGraphExec_t graph = nullptr;
  uint64_t graph_generation = 0;      // res's generation when `graph` was captured
  cudaStream_t own_stream = nullptr;  // the stream of run()
  ~Impl() {
    if (own_stream) cudaStreamDestroy(own_stream);
    if (graph) cudaGraphExecDestroy(graph);
  }
  ExecState state(cudaStream_t s) const {
    const GpuResources::Impl& r = res->impl();
    ExecState st;
    st.arena = static_cast<char*>(r.arena);
    st.workspace = r.workspace;
    st.workspace_bytes = m->workspace;
    st.cudnn = r.cudnn;
    st.lt = r.lt;
    st.stream = s;
    st.vals = &m->vals;
    return st;
  }
};

}  // namespace kiln::cuda
