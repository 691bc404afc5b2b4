// The execution context of a GpuModel: its activation arena, workspace and library handles,
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
  return c.aux.enqueue(c.m->layers, c.m->streams, st);
}

}  // namespace

StatusOr<std::unique_ptr<GpuContext>> GpuModel::create_context() const {
  auto ctx = std::unique_ptr<GpuContext>(new GpuContext());
  ctx->impl_ = std::make_unique<GpuContext::Impl>();
  auto* c = ctx->impl_.get();
  c->m = impl_.get();
  KILN_RETURN_IF_ERROR(device_alloc(&c->arena, std::max<size_t>(impl_->arena, 256), "the activation arena"));
  KILN_RETURN_IF_ERROR(
      device_alloc(&c->workspace, std::max<size_t>(impl_->workspace, 256), "the tactic workspace"));
  KILN_CUDNN_CHECK(cudnnCreate(&c->cudnn));
  KILN_CUBLAS_CHECK(cublasLtCreate(&c->lt));
  // Aux streams with their handles, workspaces and events: made here so enqueue never allocates.
  // The build's own context (before tuning has sized the aux workspaces) gets none: it runs every
  // layer on one stream, which is always safe.
  if (impl_->aux_workspace.size() == static_cast<size_t>(impl_->streams.aux_streams))
    KILN_RETURN_IF_ERROR(c->aux.create(impl_->aux_workspace, impl_->streams.events));
  return ctx;
}

void GpuContext::use_cuda_graph(bool on) { impl_->graph_on = on; }

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
    if (!impl_->graph) {
      cudaGraph_t graph;
      KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      Status s = enqueue_layers(*impl_, st);
      cudaError_t e = cudaStreamEndCapture(stream, &graph);
      KILN_RETURN_IF_ERROR(s);
      KILN_CUDA_CHECK(e);
      KILN_CUDA_CHECK(cudaGraphInstantiate(&impl_->graph, graph, 0));
      cudaGraphDestroy(graph);
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

StatusOr<std::vector<double>> GpuContext::profile_layers(const std::vector<Tensor>& inputs, cudaStream_t stream) {
  const auto* m = impl_->m;
  ExecState st = impl_->state(stream);
  for (size_t i = 0; i < inputs.size() && i < m->input_vals.size(); ++i)
    KILN_CUDA_CHECK(cudaMemcpyAsync(st.ptr(m->input_vals[i]), inputs[i].raw(), m->vals[m->input_vals[i]].bytes(),
                                    cudaMemcpyHostToDevice, stream));
  std::vector<cudaEvent_t> ev(m->layers.size() + 1);
  for (auto& e : ev) KILN_CUDA_CHECK(cudaEventCreate(&e));
  KILN_CUDA_CHECK(cudaEventRecord(ev[0], stream));
  for (size_t i = 0; i < m->layers.size(); ++i) {
    KILN_RETURN_IF_ERROR(m->layers[i]->enqueue(st));
    KILN_CUDA_CHECK(cudaEventRecord(ev[i + 1], stream));
  }
  KILN_CUDA_CHECK(cudaEventSynchronize(ev.back()));
  std::vector<double> ms(m->layers.size());
  for (size_t i = 0; i < m->layers.size(); ++i) {
    float t = 0;
    cudaEventElapsedTime(&t, ev[i], ev[i + 1]);
    ms[i] = t;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  return ms;
}

}  // namespace kiln::cuda
