// `kiln bench` on a CUDA plan (trtexec's multi-stream mode). Each of --streams N lanes owns an
// execution context, a non-blocking stream, device buffers bound with set_tensor_address and
// pinned host buffers; one host thread per lane. Two phases:
//  1. device-resident: inputs stay on the device; each iteration records an event, enqueues (or
//     launches the CUDA graph captured from one enqueue, --cuda-graph), records an event and
//     waits. GPU compute time = event to event; enqueue-to-sync = host wall clock; throughput =
//     inferences of all lanes / wall time of the phase.
//  2. host-to-host: the same with an H2D copy from pinned memory before and a D2H copy after,
//     wall clock from before the H2D to the end of the D2H.
#include "tools/kiln/bench_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <latch>
#include <thread>

#include "tools/kiln/commands.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/cuda_check.h"
#endif

namespace kiln::cli {

double percentile(const std::vector<double>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

nlohmann::json latency_stats(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  return {{"min", ms.front()},          {"median", percentile(ms, 50)}, {"mean", sum / static_cast<double>(ms.size())},
          {"p90", percentile(ms, 90)},  {"p95", percentile(ms, 95)},    {"p99", percentile(ms, 99)},
          {"max", ms.back()}};
}

void print_latency(const char* label, const nlohmann::json& s) {
  std::printf("%s:\n    min = %.4f ms, median = %.4f ms, mean = %.4f ms, p90 = %.4f ms, p99 = %.4f ms, max = %.4f ms\n",
              label, s["min"].get<double>(), s["median"].get<double>(), s["mean"].get<double>(), s["p90"].get<double>(),
              s["p99"].get<double>(), s["max"].get<double>());
}

#ifdef KILN_HAVE_CUDA
namespace {

struct Lane {
  std::unique_ptr<ExecutionContext> ctx;
  cudaStream_t stream = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaGraphExec_t graph = nullptr;
  std::vector<void*> dev, host;  // per io tensor (engine order): device buffer, pinned host buffer
  std::vector<size_t> bytes;     // per io tensor
  std::vector<bool> is_input;
  std::vector<double> compute_ms, wall_ms;
  Status status;
  Lane() = default;
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;
  ~Lane() {
    if (stream) cudaStreamSynchronize(stream);
    if (graph) cudaGraphExecDestroy(graph);
    for (void* p : dev) cudaFree(p);
    for (void* p : host) cudaFreeHost(p);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (stream) cudaStreamDestroy(stream);
  }

  Status setup(const Engine& e, const std::vector<std::pair<std::string, Tensor>>& inputs, bool cuda_graph) {
    ctx = e.create_execution_context();
    for (const auto& [name, t] : inputs) {
      // Every input goes in as its declared dtype (docs/decisions/0069).
      if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat16 && t.dtype() != DataType::kBFloat16 &&
          t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64 && t.dtype() != DataType::kBool)
        return unsupported("input '" + name + "' is " + dtype_name(t.dtype()) +
                           "; CUDA engines take float32, float16, bfloat16, int32, int64 or bool inputs");
      KILN_RETURN_IF_ERROR(ctx->set_input_shape(name, t.shape()));
    }
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    KILN_CUDA_CHECK(cudaEventCreate(&e0));
    KILN_CUDA_CHECK(cudaEventCreate(&e1));
    for (const IOTensor& io : e.io_tensors()) {
      KILN_ASSIGN_OR_RETURN(Shape s, ctx->tensor_shape(io.desc.name));
      // Inputs and outputs keep their declared dtype (docs/decisions/0069).
      DataType dt = io.desc.dtype == DataType::kUndefined ? DataType::kFloat32 : io.desc.dtype;
      for (const auto& [name, t] : inputs)
        if (io.is_input && name == io.desc.name) dt = t.dtype();
      const size_t n = dtype_storage_bytes(dt, shape_numel(s));
      void* d = nullptr;
      void* h = nullptr;
      KILN_CUDA_CHECK(cudaMalloc(&d, std::max<size_t>(n, 16)));
      dev.push_back(d);
      KILN_CUDA_CHECK(cudaMallocHost(&h, std::max<size_t>(n, 16)));
      host.push_back(h);
      bytes.push_back(n);
      is_input.push_back(io.is_input);
      if (io.is_input) {
        for (const auto& [name, t] : inputs)
          if (name == io.desc.name) std::memcpy(h, t.raw(), n);
        KILN_CUDA_CHECK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
      }
      KILN_RETURN_IF_ERROR(ctx->set_tensor_address(io.desc.name, d));
    }
    if (cuda_graph) {  // trtexec --useCudaGraph: capture one enqueue, replay it
      cudaGraph_t g = nullptr;
      KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      Status s = ctx->enqueue(stream);
      cudaError_t err = cudaStreamEndCapture(stream, &g);
      KILN_RETURN_IF_ERROR(s.with_context("capturing enqueue into a CUDA graph"));
      KILN_CUDA_CHECK(err);
      err = cudaGraphInstantiate(&graph, g, 0);
      cudaGraphDestroy(g);
      KILN_CUDA_CHECK(err);
    }
    return Status::Ok();
  }

  Status launch() {
    if (graph) {
      KILN_CUDA_CHECK(cudaGraphLaunch(graph, stream));
      return Status::Ok();
    }
    return ctx->enqueue(stream);
  }

  // One timed inference; `transfers` adds the H2D / D2H copies from / to pinned host memory.
  Status step(bool transfers) {
    const auto t0 = std::chrono::steady_clock::now();
    if (transfers)
      for (size_t i = 0; i < dev.size(); ++i)
        if (is_input[i]) KILN_CUDA_CHECK(cudaMemcpyAsync(dev[i], host[i], bytes[i], cudaMemcpyHostToDevice, stream));
    KILN_CUDA_CHECK(cudaEventRecord(e0, stream));
    KILN_RETURN_IF_ERROR(launch());
    KILN_CUDA_CHECK(cudaEventRecord(e1, stream));
    if (transfers)
      for (size_t i = 0; i < dev.size(); ++i)
        if (!is_input[i]) KILN_CUDA_CHECK(cudaMemcpyAsync(host[i], dev[i], bytes[i], cudaMemcpyDeviceToHost, stream));
    KILN_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto t1 = std::chrono::steady_clock::now();
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    compute_ms.push_back(ms);
    wall_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    return Status::Ok();
  }
};

struct PhaseResult {
  std::vector<double> compute_ms, wall_ms;
  double seconds = 0;
  size_t inferences = 0;
  Status status;
};

// Every lane runs `per_lane` steps (and for at least `duration_s`), all lanes at once.
PhaseResult run_phase(std::vector<std::unique_ptr<Lane>>& lanes, int per_lane, double duration_s, bool transfers) {
  std::latch start(static_cast<std::ptrdiff_t>(lanes.size()) + 1);
  std::vector<std::thread> threads;
  for (auto& lane : lanes) {
    Lane* l = lane.get();
    l->compute_ms.clear();
    l->wall_ms.clear();
    threads.emplace_back([l, per_lane, duration_s, transfers, &start] {
      start.arrive_and_wait();
      const auto begin = std::chrono::steady_clock::now();
      for (int n = 1;; ++n) {
        l->status = l->step(transfers);
        if (!l->status.ok()) return;
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        if (n >= per_lane && s >= duration_s) return;
      }
    });
  }
  start.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& t : threads) t.join();
  PhaseResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (auto& lane : lanes) {
    if (!lane->status.ok() && r.status.ok()) r.status = lane->status;
    r.compute_ms.insert(r.compute_ms.end(), lane->compute_ms.begin(), lane->compute_ms.end());
    r.wall_ms.insert(r.wall_ms.end(), lane->wall_ms.begin(), lane->wall_ms.end());
  }
  r.inferences = r.wall_ms.size();
  return r;
}

}  // namespace

int bench_cuda(const BenchOptions& o, const Engine& engine, const std::vector<std::pair<std::string, Tensor>>& inputs,
               nlohmann::json* j) {
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int i = 0; i < o.streams; ++i) {
    lanes.push_back(std::make_unique<Lane>());
    Status s = lanes.back()->setup(engine, inputs, o.cuda_graph);
    if (!s.ok()) return report_error("bench", s.with_context("stream " + std::to_string(i)));
  }
  for (auto& l : lanes)
    for (int i = 0; i < o.warmup; ++i) {
      Status s = l->launch();
      if (!s.ok()) return report_error("bench", s.with_context("warm-up"));
    }
  for (auto& l : lanes)
    if (cudaError_t e = cudaStreamSynchronize(l->stream); e != cudaSuccess)
      return report_error("bench", internal_error(std::string("warm-up: ") + cudaGetErrorString(e)));

  const int per_lane = (o.iterations + o.streams - 1) / o.streams;
  PhaseResult dev = run_phase(lanes, per_lane, o.duration_s, false);
  if (!dev.status.ok()) return report_error("bench", dev.status);
  PhaseResult h2h = run_phase(lanes, per_lane, 0, true);
  if (!h2h.status.ok()) return report_error("bench", h2h.status.with_context("host-to-host phase"));
  // Same inputs everywhere: every lane's outputs (now in its pinned buffers) should agree.
  bool identical = true;
  for (size_t l = 1; l < lanes.size(); ++l)
    for (size_t i = 0; i < lanes[0]->host.size(); ++i)
      if (!lanes[0]->is_input[i] && std::memcmp(lanes[0]->host[i], lanes[l]->host[i], lanes[0]->bytes[i]) != 0)
        identical = false;

  int64_t batch = 1;
  if (!inputs.empty() && inputs.front().second.rank() >= 1) batch = inputs.front().second.dim(0);
  const double ips = dev.seconds > 0 ? static_cast<double>(dev.inferences) / dev.seconds : 0;
  (*j)["streams"] = o.streams;
  (*j)["cuda_graph"] = o.cuda_graph;
  (*j)["iterations"] = dev.inferences;
  (*j)["total_s"] = dev.seconds;
  (*j)["gpu_compute_ms"] = latency_stats(dev.compute_ms);
  (*j)["latency_ms"] = latency_stats(dev.wall_ms);
  (*j)["host_to_host_ms"] = latency_stats(h2h.wall_ms);
  (*j)["throughput"] = {{"inferences_per_s", ips}, {"items_per_s", ips * static_cast<double>(batch)}, {"batch", batch}};
  (*j)["outputs_identical_across_streams"] = identical;

  std::printf("=== Performance summary (CUDA: %d stream(s), one execution context each, inputs resident on the device, "
              "CUDA graph %s; %zu inferences in %.2f s) ===\n",
              o.streams, o.cuda_graph ? "on" : "off", dev.inferences, dev.seconds);
  for (const auto& [name, t] : inputs)
    std::printf("input %s %s %s\n", name.c_str(), dtype_name(t.dtype()), shape_str(t.shape()).c_str());
  std::printf("Throughput (all streams): %.2f inferences/s, %.2f items/s (batch %lld)\n", ips,
              ips * static_cast<double>(batch), static_cast<long long>(batch));
  print_latency("GPU compute time (device: CUDA events around each enqueue; overlapping streams share the GPU)",
                (*j)["gpu_compute_ms"]);
  print_latency("Latency, enqueue to stream sync (host wall clock, data on the device)", (*j)["latency_ms"]);
  print_latency("Host-to-host latency (host wall clock: H2D from pinned memory + compute + D2H to pinned memory)",
                (*j)["host_to_host_ms"]);
  if (o.streams > 1)
    std::printf("Outputs identical across streams: %s\n", identical ? "yes" : "NO (nondeterministic kernels?)");
  return kExitOk;
}

#else  // no CUDA backend

int bench_cuda(const BenchOptions&, const Engine&, const std::vector<std::pair<std::string, Tensor>>&, nlohmann::json*) {
  return report_error("bench", unsupported("this Kiln build has no CUDA backend"));
}

#endif

}  // namespace kiln::cli
