// The execution context of a GpuModel: its device state (GpuResources: activation arena,
// workspace, library handles, aux streams; maybe shared by the contexts of other shapes),
// enqueue on the caller's stream (host or device addresses), CUDA-graph capture and replay, and
// per-layer profiling. The model's internals are in gpu_model_impl.h.
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/gpu_model_impl.h"
#include "backends/cuda/gpu_ops.h"

namespace kiln::cuda {

namespace {

// NVTX ranges (header-only NVTX3): one per enqueue and one per layer, visible in Nsight Systems.
// Always on: without a tool attached each push/pop is a call through a null-checked function
// pointer (nanoseconds against microseconds per kernel launch).
struct NvtxRange {
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Every layer of the model, on st.stream (the caller's) and the context's aux streams as the
// model's stream plan says, forked from and joined back into st.stream.
Status enqueue_layers(const GpuContext::Impl& c, const ExecState& st) {
  return c.res->impl().aux.enqueue(c.m->layers, c.m->streams, st);
}

// cudaMalloc of `bytes` into *p after freeing the old buffer (the device synchronized first, as
// work enqueued before may still use it); `what` names it in errors.
Status regrow(void** p, size_t* have, size_t bytes, const std::string& what) {
  if (*p) {
    KILN_CUDA_CHECK(cudaDeviceSynchronize());
    cudaFree(*p);
    *p = nullptr;
  }
  *have = 0;
  KILN_RETURN_IF_ERROR(device_alloc(p, bytes, what));
  *have = bytes;
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<GpuResources>> GpuResources::create() {
  auto r = std::shared_ptr<GpuResources>(new GpuResources());
  r->impl_ = std::make_unique<Impl>();
  KILN_CUDNN_CHECK(cudnnCreate(&r->impl_->cudnn));
  KILN_CUBLAS_CHECK(cublasLtCreate(&r->impl_->lt));
  return r;
}

GpuResources::~GpuResources() = default;

Status GpuResources::reserve(size_t arena_bytes, size_t workspace_bytes) {
  Impl& r = *impl_;
  arena_bytes = std::max<size_t>(arena_bytes, 256);
  workspace_bytes = std::max<size_t>(workspace_bytes, 256);
  if (r.arena_bytes < arena_bytes) {
    ++r.generation;
    KILN_RETURN_IF_ERROR(regrow(&r.arena, &r.arena_bytes, arena_bytes, "the activation arena"));
  }
  if (r.workspace_bytes < workspace_bytes) {
    ++r.generation;
    KILN_RETURN_IF_ERROR(regrow(&r.workspace, &r.workspace_bytes, workspace_bytes, "the tactic workspace"));
  }
  return Status::Ok();
}

Status GpuResources::reserve_for(const GpuModel& model) {
  const GpuModel::Impl& m = model.impl();
  KILN_RETURN_IF_ERROR(reserve(m.arena, m.workspace));
  // Aux streams are made only for a model whose aux workspaces are sized (after tuning): the
  // build's own set-up context runs every layer on one stream, which is always safe.
  if (m.aux_workspace.size() != static_cast<size_t>(m.streams.aux_streams) || m.streams.aux_streams == 0)
    return Status::Ok();
  bool moved = false;
  KILN_RETURN_IF_ERROR(impl_->aux.reserve(m.aux_workspace, m.streams.events, &moved));
  if (moved) ++impl_->generation;
  return Status::Ok();
}

void GpuResources::release_memory() {
  Impl& r = *impl_;
  if (!r.arena && !r.workspace) return;
  cudaDeviceSynchronize();
  cudaFree(r.arena);
  cudaFree(r.workspace);
  r.arena = r.workspace = nullptr;
  r.arena_bytes = r.workspace_bytes = 0;
  ++r.generation;
}

uint64_t GpuResources::generation() const { return impl_->generation; }
size_t GpuResources::arena_bytes() const { return impl_->arena_bytes; }
size_t GpuResources::workspace_bytes() const { return impl_->workspace_bytes; }

StatusOr<std::unique_ptr<GpuContext>> GpuModel::create_context(std::shared_ptr<GpuResources> shared) const {
  auto ctx = std::unique_ptr<GpuContext>(new GpuContext());
  ctx->impl_ = std::make_unique<GpuContext::Impl>();
  auto* c = ctx->impl_.get();
  c->m = impl_.get();
  if (!shared) {
    KILN_ASSIGN_OR_RETURN(shared, GpuResources::create());
  }
  // Arena, workspace and aux streams (with their handles, workspaces and events) are made here,
  // so enqueue never allocates.
  KILN_RETURN_IF_ERROR(shared->reserve_for(*this));
  c->res = std::move(shared);
  return ctx;
}

void GpuContext::use_cuda_graph(bool on) { impl_->graph_on = on; }

void GpuContext::drop_stale_graph() {
  if (impl_->graph && impl_->graph_generation != impl_->res->generation()) {
    cudaGraphExecDestroy(impl_->graph);
    impl_->graph = nullptr;
  }
}

Status GpuContext::enqueue(const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs, cudaStream_t stream) {
  NvtxRange range("kiln.enqueue");
  const auto* m = impl_->m;
  if (inputs.size() != m->input_vals.size()) return invalid_argument("wrong number of inputs");
  ExecState st = impl_->state(stream);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GVal& v = m->vals[m->input_vals[i]];
    const DataType want = storage_host_dtype(v.type);
    if (inputs[i]->dtype() != want || inputs[i]->shape() != v.shape)
      return invalid_argument("input '" + v.name + "': expected " + dtype_name(want) + " " + shape_str(v.shape) + ", got " +
                              dtype_name(inputs[i]->dtype()) + " " + shape_str(inputs[i]->shape()));
    KILN_CUDA_CHECK(cudaMemcpyAsync(st.ptr(m->input_vals[i]), inputs[i]->raw(), v.bytes(), cudaMemcpyHostToDevice, stream));
  }
  if (impl_->graph_on) {
    drop_stale_graph();
    if (!impl_->graph) {
      cudaGraph_t graph;
      KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      Status s = enqueue_layers(*impl_, st);
      cudaError_t e = cudaStreamEndCapture(stream, &graph);
      KILN_RETURN_IF_ERROR(s);
      KILN_CUDA_CHECK(e);
      KILN_CUDA_CHECK(cudaGraphInstantiate(&impl_->graph, graph, 0));
      cudaGraphDestroy(graph);
      impl_->graph_generation = impl_->res->generation();
    }
    KILN_CUDA_CHECK(cudaGraphLaunch(impl_->graph, stream));
  } else {
    KILN_RETURN_IF_ERROR(enqueue_layers(*impl_, st));
  }
  for (size_t i = 0; i < outputs.size() && i < m->output_vals.size(); ++i) {
    const GVal& v = m->vals[m->output_vals[i]];
    const DataType dt = storage_host_dtype(v.type);  // float32, or an int32 / int64 / bool output as stored
    if (outputs[i]->shape() != v.shape || outputs[i]->dtype() != dt) *outputs[i] = Tensor(dt, v.shape);
    KILN_CUDA_CHECK(cudaMemcpyAsync(outputs[i]->raw(), st.ptr(m->output_vals[i]), v.bytes(), cudaMemcpyDeviceToHost, stream));
  }
  return Status::Ok();
}

Status GpuContext::enqueue_device(const std::vector<const void*>& inputs, const std::vector<void*>& outputs,
                                  cudaStream_t stream) {
  NvtxRange range("kiln.enqueue");
  const auto* m = impl_->m;
  if (inputs.size() != m->input_vals.size() || outputs.size() != m->output_vals.size())
    return invalid_argument("enqueue: " + std::to_string(inputs.size()) + " input and " + std::to_string(outputs.size()) +
                            " output addresses, the model has " + std::to_string(m->input_vals.size()) + " and " +
                            std::to_string(m->output_vals.size()));
  ExecState st = impl_->state(stream);
  // cudaMemcpyDefault: the addresses may be device memory or pinned host memory (unified addressing).
  for (size_t i = 0; i < inputs.size(); ++i) {
    const GVal& v = m->vals[m->input_vals[i]];
    if (!inputs[i]) return invalid_argument("input '" + v.name + "': no address");
    KILN_CUDA_CHECK(cudaMemcpyAsync(st.ptr(m->input_vals[i]), inputs[i], v.bytes(), cudaMemcpyDefault, stream));
  }
  KILN_RETURN_IF_ERROR(enqueue_layers(*impl_, st));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const GVal& v = m->vals[m->output_vals[i]];
    if (!outputs[i]) return invalid_argument("output '" + v.name + "': no address");
    KILN_CUDA_CHECK(cudaMemcpyAsync(outputs[i], st.ptr(m->output_vals[i]), v.bytes(), cudaMemcpyDefault, stream));
  }
  return Status::Ok();
}

Status GpuContext::replay(cudaStream_t stream) {
  drop_stale_graph();
  if (impl_->graph_on && impl_->graph) {
    KILN_CUDA_CHECK(cudaGraphLaunch(impl_->graph, stream));
    return Status::Ok();
  }
  return enqueue_layers(*impl_, impl_->state(stream));
}

Status GpuContext::run(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  if (!impl_->own_stream) KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->own_stream, cudaStreamNonBlocking));
  cudaStream_t s = impl_->own_stream;
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  outputs->resize(impl_->m->output_vals.size());
  std::vector<Tensor*> out;
  for (auto& t : *outputs) out.push_back(&t);
  Status st = enqueue(in, out, s);
  cudaError_t e = cudaStreamSynchronize(s);
  KILN_RETURN_IF_ERROR(st);
  KILN_CUDA_CHECK(e);
  return Status::Ok();
}

StatusOr<std::vector<double>> GpuContext::profile_layers(const std::vector<Tensor>* inputs, cudaStream_t stream) {
  const auto* m = impl_->m;
  ExecState st = impl_->state(stream);
  if (inputs)
    for (size_t i = 0; i < inputs->size() && i < m->input_vals.size(); ++i)
      KILN_CUDA_CHECK(cudaMemcpyAsync(st.ptr(m->input_vals[i]), (*inputs)[i].raw(), m->vals[m->input_vals[i]].bytes(),
                                      cudaMemcpyHostToDevice, stream));
  const size_t n = m->layers.size();
  std::vector<cudaEvent_t> ev(n + 1, nullptr);
  auto destroy = [&ev] {
    for (auto& e : ev)
      if (e) cudaEventDestroy(e);
  };
  std::vector<double> ms(n, 0.0);
  Status status = Status::Ok();
  for (auto& e : ev) {
    if (cudaEventCreate(&e) != cudaSuccess) {
      e = nullptr;
      destroy();
      return internal_error("profile: cannot create CUDA events");
    }
  }
  // Each chunk: the stream held by a spin long enough for the host to enqueue the chunk's layers
  // (a few microseconds each), then the layers back to back, each followed by its event.
  for (size_t begin = 0; begin < n && status.ok(); begin += kProfileChunk) {
    const size_t end = std::min(n, begin + kProfileChunk);
    cudaError_t e = launch_spin(static_cast<unsigned long long>(end - begin) * 20000ull + 1000000ull, stream);
    if (e == cudaSuccess) e = cudaEventRecord(ev[begin], stream);
    for (size_t i = begin; i < end && e == cudaSuccess && status.ok(); ++i) {
      status = m->layers[i]->enqueue(st);
      if (status.ok()) e = cudaEventRecord(ev[i + 1], stream);
    }
    if (e == cudaSuccess) e = cudaEventSynchronize(ev[end]);
    if (status.ok() && e != cudaSuccess) status = internal_error(std::string("profile: ") + cudaGetErrorString(e));
    for (size_t i = begin; i < end && status.ok(); ++i) {
      float t = 0;
      if (cudaEventElapsedTime(&t, ev[i], ev[i + 1]) == cudaSuccess) ms[i] = t;
    }
  }
  destroy();
  if (!status.ok()) return status;
  return ms;
}

}  // namespace kiln::cuda
