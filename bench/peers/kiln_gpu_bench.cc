// GPU compute benchmark of Kiln on an ONNX model through the product path, in the form the peers
// are measured: Builder (import, passes, layouts, tactics timed by the builder) -> plan bytes ->
// Runtime -> ExecutionContext with device buffers bound, its enqueue captured into a CUDA graph
// and replayed (inputs resident on the device, CUDA-event timing, median of repeated runs).
// Prints one JSON object per line.
//   kiln_gpu_bench MODEL.onnx --batch 1,8,64 --precision fp32,tf32,fp16,bf16 [--iters 200] [--profile 1]
//                  [--timing-cache FILE] [--tactic-sources SPEC]
// Accuracy mode: N real-image inputs (scripts/photo_inputs.py) through the FP32 engine (no TF32,
// the reference) and each other precision, one batch of N; reports top-1 agreement with FP32 and
// the min / mean cosine of the logits per input, as one JSON object (also to --json-out FILE).
//   kiln_gpu_bench MODEL.onnx --agreement photos100.npy --precision fp16,bf16 [--json-out FILE]
// Both modes take --layer-precisions SPEC (as kiln build: PATTERN:PREC[,...]), applied to every
// precision but the FP32 reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "builder/build_from_graph.h"
#include "io/npy.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "backends/cpu/interpreter.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "runtime/engine_impl.h"

using namespace kiln;

namespace {

// The pass pipeline's options as the builder sets them: the CPU reference kernels fold constants.
passes::PassOptions reference_pass_options() {
  passes::PassOptions o;
  o.evaluator = &reference_evaluator();
  return o;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) r.push_back(t);
  return r;
}

std::string fmt_num(double v, const char* f) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string json_escape(const std::string& in) {
  std::string r;
  for (char c : in) {
    if (c == '"' || c == '\\') r += '\\';
    r += c == '\n' ? ' ' : c;
  }
  return r;
}

struct Settings {
  std::string cache_path, sources, layer_spec;
};

// Builds `g` for the GPU at one fixed input shape, in `prec`, as `kiln build` does, and loads the
// plan. The timing-cache line of the build goes to *cache_log.
StatusOr<std::shared_ptr<Engine>> build_engine(const ir::Graph& g, const Shape& shape, const std::string& prec,
                                               const Settings& s, double* build_s, std::string* cache_log) {
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = prec == "fp16";
  c.bf16 = prec == "bf16";
  c.tf32 = prec != "fp32";
  c.timing_cache_path = s.cache_path;
  c.tactic_sources = s.sources;
  if (prec != "fp32") {
    KILN_ASSIGN_OR_RETURN(c.layer_precisions, passes::parse_layer_precisions(s.layer_spec));
  }
  OptimizationProfile p;
  KILN_RETURN_IF_ERROR(p.set_dimensions(g.value(g.inputs[0]).name, shape, shape, shape));
  c.profiles = {p};
  c.progress = [cache_log](const BuildProgress& bp) {
    if (bp.step == "timing cache" && bp.detail.find(" hits, ") != std::string::npos) *cache_log = bp.detail;
  };
  const auto t0 = std::chrono::steady_clock::now();
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(g, c));
  *build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Runtime::deserialize_engine(plan);
}

// The first output of one synchronous execute on host tensors.
StatusOr<Tensor> run_host(const Engine& e, const Tensor& x) {
  auto ctx = e.create_execution_context();
  const std::string in = e.io_tensors()[0].desc.name;
  KILN_RETURN_IF_ERROR(ctx->set_input_shape(in, x.shape()));
  KILN_RETURN_IF_ERROR(ctx->set_input(in, x));
  KILN_RETURN_IF_ERROR(ctx->execute());
  for (const IOTensor& io : e.io_tensors())
    if (!io.is_input) return ctx->output(io.desc.name);
  return invalid_argument("the engine has no output");
}

#define BENCH_CUDA(call)                                                                    \
  do {                                                                                      \
    const cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) return internal_error(std::string(#call) + ": " + cudaGetErrorString(e_)); \
  } while (0)

// CUDA-event times (ms) of `iters` replays of a CUDA graph of one enqueue, device buffers bound.
StatusOr<std::vector<float>> time_enqueue(const Engine& e, const Tensor& x, int iters) {
  auto ctx = e.create_execution_context();
  std::vector<void*> bufs;
  auto release = [&] {
    for (void* b : bufs) cudaFree(b);
  };
  Status st = Status::Ok();
  for (const IOTensor& io : e.io_tensors()) {
    if (io.is_input) st = ctx->set_input_shape(io.desc.name, x.shape());
    if (!st.ok()) break;
  }
  for (const IOTensor& io : e.io_tensors()) {
    if (!st.ok()) break;
    auto shape = ctx->tensor_shape(io.desc.name);
    if (!shape.ok()) {
      st = shape.status();
      break;
    }
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(shape_numel(*shape), 1)) * sizeof(float);
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      st = Status(StatusCode::kOutOfMemory, "cudaMalloc of " + std::to_string(bytes) + " bytes for " + io.desc.name);
      break;
    }
    bufs.push_back(p);
    if (io.is_input) cudaMemcpy(p, x.raw(), x.nbytes(), cudaMemcpyHostToDevice);
    st = ctx->set_tensor_address(io.desc.name, p);
  }
  if (!st.ok()) {
    release();
    return st;
  }
  cudaStream_t s = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  std::vector<float> ms;
  auto body = [&]() -> Status {
    BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    KILN_RETURN_IF_ERROR(ctx->enqueue(s));  // prepares nothing more: shapes were set above
    BENCH_CUDA(cudaStreamSynchronize(s));
    BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    Status enq = ctx->enqueue(s);
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    KILN_RETURN_IF_ERROR(enq);
    BENCH_CUDA(end);
    BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CUDA(cudaEventCreate(&e0));
    BENCH_CUDA(cudaEventCreate(&e1));
    for (int i = 0; i < 20; ++i) BENCH_CUDA(cudaGraphLaunch(exec, s));
    for (int i = 0; i < iters; ++i) {
      BENCH_CUDA(cudaEventRecord(e0, s));
      BENCH_CUDA(cudaGraphLaunch(exec, s));
      BENCH_CUDA(cudaEventRecord(e1, s));
      BENCH_CUDA(cudaEventSynchronize(e1));
      float t = 0;
      BENCH_CUDA(cudaEventElapsedTime(&t, e0, e1));
      ms.push_back(t);
    }
    return Status::Ok();
  };
  st = body();
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (s) cudaStreamDestroy(s);
  release();
  if (!st.ok()) return st;
  return ms;
}

struct Agreement {
  int top1 = 0;
  double min_cos = 1, sum_cos = 0, max_err = 0, max_ref = 0;
  double dot = 0, na = 0, nb = 0;  // over every element: the cosine of the whole output
  double cosine() const { return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0; }
};
// Row-wise comparison of [N, classes] logits against the reference.
Agreement compare_rows(const Tensor& ref, const Tensor& q) {
  Agreement a;
  const int64_t n = ref.dim(0), classes = ref.dim(-1);
  for (int64_t r = 0; r < n; ++r) {
    const float* x = ref.data<float>() + r * classes;
    const float* y = q.data<float>() + r * classes;
    a.top1 += std::max_element(x, x + classes) - x == std::max_element(y, y + classes) - y;
    double dot = 0, na = 0, nb = 0;
    for (int64_t i = 0; i < classes; ++i) {
      dot += static_cast<double>(x[i]) * y[i];
      na += static_cast<double>(x[i]) * x[i];
      nb += static_cast<double>(y[i]) * y[i];
      a.max_err = std::max(a.max_err, static_cast<double>(std::fabs(x[i] - y[i])));
      a.max_ref = std::max(a.max_ref, static_cast<double>(std::fabs(x[i])));
    }
    const double cos = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
    a.min_cos = std::min(a.min_cos, cos);
    a.sum_cos += cos;
    a.dot += dot;
    a.na += na;
    a.nb += nb;
  }
  return a;
}

int agreement(const ir::Graph& g, const std::string& npy, const std::vector<std::string>& precisions,
              const Settings& settings, const std::string& json_out) {
  auto x = io::read_npy(npy);
  if (!x.ok() || x->dtype() != DataType::kFloat32 || x->rank() != 4) {
    std::fprintf(stderr, "%s: expected a float32 [N,3,H,W] .npy (%s)\n", npy.c_str(),
                 x.ok() ? "wrong dtype or rank" : x.status().to_string().c_str());
    return 2;
  }
  double build_s = 0;
  std::string cache_log;
  auto ref_engine = build_engine(g, x->shape(), "fp32", settings, &build_s, &cache_log);
  auto ref = ref_engine.ok() ? run_host(**ref_engine, *x) : StatusOr<Tensor>(ref_engine.status());
  if (!ref.ok() || ref->rank() != 2 || ref->dim(0) != x->dim(0)) {
    std::fprintf(stderr, "fp32: %s\n", ref.ok() ? "the first output is not [N, classes]" : ref.status().to_string().c_str());
    return 1;
  }
  const int64_t n = ref->dim(0);
  std::string json = "{\"mode\": \"agreement\", \"inputs\": " + std::to_string(n) + ", \"source\": \"" + npy +
                     "\", \"reference\": \"fp32 (no TF32)\", \"path\": \"Builder -> plan -> Runtime\", \"results\": [";
  bool first = true;
  for (const std::string& prec : precisions) {
    if (prec == "fp32") continue;
    std::string row = "{\"precision\": \"" + prec + "\", \"layer_precisions\": \"" + json_escape(settings.layer_spec) + "\"";
    auto e = build_engine(g, x->shape(), prec, settings, &build_s, &cache_log);
    auto q = e.ok() ? run_host(**e, *x) : StatusOr<Tensor>(e.status());
    if (!q.ok()) {
      row += ", \"error\": \"" + json_escape(q.status().message()) + "\"}";
    } else {
      const Agreement a = compare_rows(*ref, *q);
      row += ", \"top1_agree\": " + std::to_string(a.top1) + ", \"top1_agreement\": " +
             fmt_num(static_cast<double>(a.top1) / static_cast<double>(n), "%.4f") + ", \"min_cosine\": " +
             fmt_num(a.min_cos, "%.7f") + ", \"mean_cosine\": " + fmt_num(a.sum_cos / static_cast<double>(n), "%.7f") +
             ", \"max_abs_err_rel\": " + fmt_num(a.max_ref > 0 ? a.max_err / a.max_ref : 0, "%.3g") + "}";
    }
    json += (first ? "" : ", ") + row;
    first = false;
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << json << "\n";
    if (!f) {
      std::fprintf(stderr, "cannot write %s\n", json_out.c_str());
      return 2;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kiln_gpu_bench MODEL.onnx --batch 1,8,64 --precision fp32,tf32,fp16,bf16 [--iters 200] "
                 "[--profile 1] [--timing-cache FILE] [--tactic-sources SPEC]\n"
                 "       kiln_gpu_bench MODEL.onnx --agreement INPUTS.npy --precision fp16,bf16 [--json-out FILE]\n"
                 "       both: [--layer-precisions PATTERN:PREC[,...]]\n");
    return 2;
  }
  std::vector<std::string> batches = {"1"}, precisions = {"fp16"};
  int iters = 200;
  bool profile = false;
  Settings settings;
  std::string agreement_npy, json_out;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") batches = split(v);
    else if (k == "--precision") precisions = split(v);
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--profile") profile = v == "1";
    else if (k == "--timing-cache") settings.cache_path = v;
    else if (k == "--tactic-sources") settings.sources = v;
    else if (k == "--agreement") agreement_npy = v;
    else if (k == "--json-out") json_out = v;
    else if (k == "--layer-precisions") settings.layer_spec = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (iters < 1) {
    std::fprintf(stderr, "--iters must be >= 1\n");
    return 2;
  }
  for (const std::string& p : precisions)
    if (p != "fp32" && p != "tf32" && p != "fp16" && p != "bf16") {
      std::fprintf(stderr, "--precision %s: expected fp32, tf32, fp16 or bf16\n", p.c_str());
      return 2;
    }
  auto imported = onnx_import::import_model_file(argv[1]);
  if (!imported.ok()) {
    std::fprintf(stderr, "%s\n", imported.status().to_string().c_str());
    return 2;
  }
  if (auto rules = passes::parse_layer_precisions(settings.layer_spec); !rules.ok()) {
    std::fprintf(stderr, "%s\n", rules.status().to_string().c_str());
    return 2;
  }
  if (!agreement_npy.empty()) return agreement(*imported, agreement_npy, precisions, settings, json_out);
  for (const std::string& b : batches) {
    const int64_t batch = std::atoll(b.c_str());
    const Shape shape = {batch, 3, 224, 224};
    Tensor x(DataType::kFloat32, shape);
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
    // FP32 CPU reference for the error columns (skipped above batch 64: minutes on the CPU).
    const bool check = batch <= 64;
    Tensor ref;
    for (const std::string& prec : precisions) {
      double build_s = 0;
      std::string cache_log;
      auto engine = build_engine(*imported, shape, prec, settings, &build_s, &cache_log);
      if (!engine.ok()) {
        std::printf("{\"batch\": %lld, \"precision\": \"%s\", \"error\": \"%s\"}\n", static_cast<long long>(batch),
                    prec.c_str(), json_escape(engine.status().message()).c_str());
        continue;
      }
      const Engine& e = **engine;
      if (check && !ref.defined()) {  // the CPU reference interpreter on the plan's layer graph
        auto r = interpret(engine_impl(e).graph, {x});
        if (!r.ok() || r->empty()) {
          std::fprintf(stderr, "CPU reference: %s\n", r.ok() ? "no output" : r.status().to_string().c_str());
          return 1;
        }
        ref = (*r)[0];
      }
      for (const auto& l : e.device_layers())
        if (!l.fallback.empty()) std::fprintf(stderr, "# fallback %s: %s\n", l.name.c_str(), l.fallback.c_str());
      auto out = run_host(e, x);
      auto ms = out.ok() ? time_enqueue(e, x, iters) : StatusOr<std::vector<float>>(out.status());
      if (!ms.ok()) {
        std::printf("{\"batch\": %lld, \"precision\": \"%s\", \"error\": \"%s\"}\n", static_cast<long long>(batch),
                    prec.c_str(), json_escape(ms.status().message()).c_str());
        continue;
      }
      std::sort(ms->begin(), ms->end());
      const double median = (*ms)[ms->size() / 2], p99 = (*ms)[std::min(ms->size() - 1, ms->size() * 99 / 100)];
      Agreement a;
      if (check) a = compare_rows(ref, *out);
      const DeviceMemoryInfo mem = e.device_memory();
      std::printf("{\"peer\": \"kiln\", \"path\": \"Builder -> plan -> Runtime -> enqueue (CUDA graph)\", \"batch\": %lld, "
                  "\"precision\": \"%s\", \"median_ms\": %.4f, \"p99_ms\": %.4f, \"throughput_per_s\": %.1f, "
                  "\"build_s\": %.2f, \"layers\": %zu, \"arena_bytes\": %zu, \"activation_bytes_sum\": %zu, "
                  "\"timing_cache\": \"%s\", \"max_abs_err_rel\": %s, \"cosine\": %s, \"top1_agree\": %s, "
                  "\"layer_precisions\": \"%s\"}\n",
                  static_cast<long long>(batch), prec.c_str(), median, p99, batch * 1000.0 / median, build_s,
                  e.device_layers().size(), mem.arena_bytes, mem.activation_bytes_sum, json_escape(cache_log).c_str(),
                  check ? fmt_num(a.max_ref > 0 ? a.max_err / a.max_ref : 0, "%.3g").c_str() : "null",
                  check ? fmt_num(a.cosine(), "%.7f").c_str() : "null", check ? std::to_string(a.top1).c_str() : "null",
                  prec == "fp32" ? "" : json_escape(settings.layer_spec).c_str());
      std::fflush(stdout);
      if (profile) {  // per-layer device times (no graph: one event pair per layer), slowest first
        auto ctx = e.create_execution_context();
        ctx->set_profiling(true);
        const std::string in = e.io_tensors()[0].desc.name;
        if (ctx->set_input_shape(in, shape).ok() && ctx->set_input(in, x).ok() && ctx->execute().ok()) {
          std::vector<LayerTiming> t = ctx->layer_timings();
          std::sort(t.begin(), t.end(), [](const LayerTiming& p, const LayerTiming& q) { return p.ms > q.ms; });
          double total = 0;
          for (const auto& l : t) total += l.ms;
          std::printf("# profile batch %lld %s: %zu layers, sum %.3f ms\n", static_cast<long long>(batch), prec.c_str(),
                      t.size(), total);
          for (size_t i = 0; i < t.size() && i < 12; ++i)
            std::printf("#   %7.3f ms  %-48s %s\n", t[i].ms, t[i].name.c_str(), t[i].tactic.c_str());
        }
      }
    }
  }
  return 0;
}
