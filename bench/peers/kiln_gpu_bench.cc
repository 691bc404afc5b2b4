// GPU compute benchmark of Kiln's CUDA path on an ONNX model, in the form the peers are
// measured (data resident on the device, CUDA-graph replay, CUDA-event timing, median of
// repeated runs). Builds exactly as `kiln build` does: import -> passes -> shape inference ->
// tactics timed on the device. Prints one JSON object per line.
//   kiln_gpu_bench MODEL.onnx --batch 1,8,64 --precision fp32,tf32,fp16,bf16 [--iters 200] [--profile 1]
//                  [--timing-cache FILE]   (JSON of measured tactic times, read first, rewritten last)
// Accuracy mode: N real-image inputs (scripts/photo_inputs.py) through the FP32 engine (no TF32,
// the reference) and each other precision, one batch of N; reports top-1 agreement with FP32 and
// the min / mean cosine of the logits per input, as one JSON object (also to --json-out FILE).
//   kiln_gpu_bench MODEL.onnx --agreement photos100.npy --precision fp16,bf16 [--json-out FILE]
// Both modes take --layer-precisions SPEC (as kiln build: PATTERN:PREC[,...]), applied to every
// precision but the FP32 reference.
#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "backends/cuda/gpu_model.h"
#include "builder/tactic_selector.h"
#include "builder/timing_cache.h"
#include "runtime/gpu_engine.h"
#include "io/npy.h"
#include "kiln/builder.h"
#include "ir/shape_inference.h"
#include "onnx/importer.h"
#include "passes/passes.h"
#include "runtime/interpreter.h"

using namespace kiln;

namespace {

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

// Sets the precision flags of `o`; false for a precision this build does not know.
bool set_precision(const std::string& prec, cuda::GpuBuildOptions* o) {
  if (prec != "fp32" && prec != "tf32" && prec != "fp16" && prec != "bf16") return false;
  o->fp16 = prec == "fp16";
  o->bf16 = prec == "bf16";
  o->tf32 = prec == "tf32";
  return true;
}

// Logits of every input (rows of the first output) from a model built for one batch of all inputs.
StatusOr<Tensor> logits(const ir::Graph& g, const Tensor& x, const std::string& prec) {
  cuda::GpuBuildOptions o;
  if (!set_precision(prec, &o)) return unsupported("precision '" + prec + "' is not supported by this build");
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(g, {x.shape()}));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<cuda::GpuModel> m, cuda::GpuModel::create(g, vs, o));
  KILN_ASSIGN_OR_RETURN(auto ctx, m->create_context());
  std::vector<Tensor> out;
  KILN_RETURN_IF_ERROR(ctx->run({x}, &out));
  if (out.empty() || out[0].rank() != 2 || out[0].dim(0) != x.dim(0))
    return invalid_argument("the first output is not [N, classes]");
  return out[0];
}

// Marks `g`'s layers with the --layer-precisions rules; false (the error on stderr) when a rule is bad.
bool constrain(ir::Graph* g, const std::vector<LayerPrecision>& rules) {
  const Status s = passes::apply_layer_precisions(*g, rules);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.to_string().c_str());
  return s.ok();
}

int agreement(const ir::Graph& imported, const std::string& npy, const std::vector<std::string>& precisions,
              const std::vector<LayerPrecision>& layer_precisions, const std::string& layer_spec,
              const std::string& json_out) {
  auto x = io::read_npy(npy);
  if (!x.ok() || x->dtype() != DataType::kFloat32 || x->rank() != 4) {
    std::fprintf(stderr, "%s: expected a float32 [N,3,H,W] .npy (%s)\n", npy.c_str(),
                 x.ok() ? "wrong dtype or rank" : x.status().to_string().c_str());
    return 2;
  }
  ir::Graph g = imported;
  std::map<std::string, Shape> concrete = {{g.value(g.inputs[0]).name, x->shape()}};
  if (Status s = ir::infer_shapes(g, &concrete); !s.ok()) { std::fprintf(stderr, "%s\n", s.to_string().c_str()); return 1; }
  if (Status s = passes::run_pipeline(g, passes::PassOptions{}); !s.ok()) { std::fprintf(stderr, "%s\n", s.to_string().c_str()); return 1; }
  g.compact();
  auto ref = logits(g, *x, "fp32");
  ir::Graph gq = g;  // the graph of the other precisions: with the per-layer constraints
  if (!constrain(&gq, layer_precisions)) return 2;
  if (!ref.ok()) { std::fprintf(stderr, "fp32: %s\n", ref.status().to_string().c_str()); return 1; }
  const int64_t n = ref->dim(0), classes = ref->dim(1);
  std::string json = "{\"mode\": \"agreement\", \"inputs\": " + std::to_string(n) + ", \"source\": \"" + npy +
                     "\", \"reference\": \"fp32 (no TF32)\", \"results\": [";
  bool first = true;
  for (const std::string& prec : precisions) {
    if (prec == "fp32") continue;
    std::string row = "{\"precision\": \"" + prec + "\", \"layer_precisions\": \"" + json_escape(layer_spec) + "\"";
    auto q = logits(gq, *x, prec);
    if (!q.ok()) {
      row += ", \"error\": \"" + json_escape(q.status().message()) + "\"}";
    } else {
      int top1 = 0;
      double min_cos = 1, sum_cos = 0, max_err = 0, max_ref = 0;
      for (int64_t r = 0; r < n; ++r) {
        const float* a = ref->data<float>() + r * classes;
        const float* b = q->data<float>() + r * classes;
        top1 += std::max_element(a, a + classes) - a == std::max_element(b, b + classes) - b;
        double dot = 0, na = 0, nb = 0;
        for (int64_t i = 0; i < classes; ++i) {
          dot += static_cast<double>(a[i]) * b[i];
          na += static_cast<double>(a[i]) * a[i];
          nb += static_cast<double>(b[i]) * b[i];
          max_err = std::max(max_err, static_cast<double>(std::fabs(a[i] - b[i])));
          max_ref = std::max(max_ref, static_cast<double>(std::fabs(a[i])));
        }
        const double cos = na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
        min_cos = std::min(min_cos, cos);
        sum_cos += cos;
      }
      row += ", \"top1_agree\": " + std::to_string(top1) + ", \"top1_agreement\": " +
             fmt_num(static_cast<double>(top1) / static_cast<double>(n), "%.4f") + ", \"min_cosine\": " +
             fmt_num(min_cos, "%.7f") + ", \"mean_cosine\": " + fmt_num(sum_cos / static_cast<double>(n), "%.7f") +
             ", \"max_abs_err_rel\": " + fmt_num(max_ref > 0 ? max_err / max_ref : 0, "%.3g") + "}";
    }
    json += (first ? "" : ", ") + row;
    first = false;
  }
  json += "]}";
  std::printf("%s\n", json.c_str());
  if (!json_out.empty()) {
    std::ofstream f(json_out);
    f << json << "\n";
    if (!f) { std::fprintf(stderr, "cannot write %s\n", json_out.c_str()); return 2; }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kiln_gpu_bench MODEL.onnx [--batch 1,8] [--precision fp32,tf32,fp16,bf16] [--iters N] "
                 "[--timing-cache FILE] [--pad-input-channels 0|1] [--tactic-sources SPEC]\n"
                 "       kiln_gpu_bench MODEL.onnx --agreement INPUTS.npy --precision fp16,bf16 [--json-out FILE]\n"
                 "       both: [--layer-precisions PATTERN:PREC[,...]]\n");
    return 2;
  }
  std::vector<std::string> batches = {"1"}, precisions = {"fp16"};
  int iters = 200;
  bool profile = false, pad_input_channels = false;
  std::string sources_spec;
  std::string cache_path, agreement_npy, json_out, layer_spec;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--batch") batches = split(v);
    else if (k == "--precision") precisions = split(v);
    else if (k == "--iters") iters = std::atoi(v.c_str());
    else if (k == "--profile") profile = v == "1";
    else if (k == "--pad-input-channels") pad_input_channels = v == "1";
    else if (k == "--tactic-sources") sources_spec = v;
    else if (k == "--timing-cache") cache_path = v;
    else if (k == "--agreement") agreement_npy = v;
    else if (k == "--json-out") json_out = v;
    else if (k == "--layer-precisions") layer_spec = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  for (const std::string& p : precisions)
    if (p != "fp32" && p != "tf32" && p != "fp16" && p != "bf16") {
      std::fprintf(stderr, "--precision %s: expected fp32, tf32, fp16 or bf16\n", p.c_str());
      return 2;
    }
  TimingCache cache(gpu::timing_cache_header());
  auto log = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  if (!cache_path.empty()) {
    if (Status s = cache.load(cache_path, log); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 2;
    }
  }
  // The builder's tactic selection, with the file's cache (or an in-memory one).
  TacticSelectorConfig select_config;
  if (!sources_spec.empty()) {
    auto parsed = TacticSources::parse(sources_spec);
    if (!parsed.ok()) {
      std::fprintf(stderr, "--tactic-sources: %s\n", parsed.status().to_string().c_str());
      return 2;
    }
    select_config.sources = *parsed;
  }
  TacticSelector selector(&cache, select_config);
  auto imported = onnx_import::import_model_file(argv[1]);
  if (!imported.ok()) {
    std::fprintf(stderr, "%s\n", imported.status().to_string().c_str());
    return 2;
  }
  auto layer_precisions = passes::parse_layer_precisions(layer_spec);
  if (!layer_precisions.ok()) {
    std::fprintf(stderr, "%s\n", layer_precisions.status().to_string().c_str());
    return 2;
  }
  if (!agreement_npy.empty())
    return agreement(*imported, agreement_npy, precisions, *layer_precisions, layer_spec, json_out);
  for (const std::string& b : batches) {
    const int64_t batch = std::atoll(b.c_str());
    ir::Graph g = *imported;
    const std::string in_name = g.value(g.inputs[0]).name;
    std::map<std::string, Shape> concrete = {{in_name, {batch, 3, 224, 224}}};
    if (Status s = ir::infer_shapes(g, &concrete); !s.ok()) { std::fprintf(stderr, "%s\n", s.to_string().c_str()); return 1; }
    if (Status s = passes::run_pipeline(g, passes::PassOptions{}); !s.ok()) { std::fprintf(stderr, "%s\n", s.to_string().c_str()); return 1; }
    g.compact();
    Tensor x(DataType::kFloat32, {batch, 3, 224, 224});
    std::mt19937 rng(7);
    std::normal_distribution<float> nd;
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = nd(rng);
    // FP32 CPU reference for the error columns (skipped above batch 64: minutes on the CPU).
    const bool check = batch <= 64;
    auto ref = check ? interpret(g, {x}) : StatusOr<std::vector<Tensor>>(std::vector<Tensor>{});
    auto shapes = cuda::infer_value_shapes_by_reference(g, {x.shape()});
    if (!ref.ok() || !shapes.ok()) return 1;
    ir::Graph gq = g;  // with the per-layer constraints (not for the fp32 rows)
    if (!constrain(&gq, *layer_precisions)) return 2;
    for (const std::string& prec : precisions) {
      cuda::GpuBuildOptions o;
      o.fp16 = prec == "fp16";
      o.bf16 = prec == "bf16";
      o.tf32 = prec != "fp32";
      o.pad_input_channels = pad_input_channels;
      o.select_tactic = selector.as_function();
      o.sources = select_config.sources;
      const int hits0 = cache.hits(), misses0 = cache.misses();
      const auto t0 = std::chrono::steady_clock::now();
      auto model = cuda::GpuModel::create(prec == "fp32" ? g : gq, *shapes, o);
      const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!model.ok()) {
        std::printf("{\"batch\": %lld, \"precision\": \"%s\", \"error\": \"%s\"}\n", static_cast<long long>(batch),
                    prec.c_str(), model.status().message().c_str());
        continue;
      }
      for (const auto& l : (*model)->layers())
        if (!l.fallback.empty()) std::fprintf(stderr, "# fallback %s: %s\n", l.name.c_str(), l.fallback.c_str());
      auto ctx = (*model)->create_context();
      if (!ctx.ok()) {
        std::printf("{\"batch\": %lld, \"precision\": \"%s\", \"error\": \"%s\"}\n", static_cast<long long>(batch),
                    prec.c_str(), ctx.status().message().c_str());
        continue;
      }
      (*ctx)->use_cuda_graph(true);
      std::vector<Tensor> out;
      if (!(*ctx)->run({x}, &out).ok()) return 1;
      double num = 0, den = 0, dot = 0, na = 0, nb = 0;
      int top1 = 0;
      const int64_t classes = out[0].dim(-1);
      for (int64_t r = 0; check && r < batch; ++r) {
        const float* a = (*ref)[0].data<float>() + r * classes;
        const float* q = out[0].data<float>() + r * classes;
        top1 += std::max_element(a, a + classes) - a == std::max_element(q, q + classes) - q;
        for (int64_t i = 0; i < classes; ++i) {
          num = std::max(num, static_cast<double>(std::fabs(a[i] - q[i])));
          den = std::max(den, static_cast<double>(std::fabs(a[i])));
          dot += a[i] * q[i];
          na += a[i] * a[i];
          nb += q[i] * q[i];
        }
      }
      cudaStream_t s;
      cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      std::vector<Tensor*> outs = {&out[0]};
      std::vector<const Tensor*> ins = {&x};
      (void)(*ctx)->enqueue(ins, outs, s);  // inputs to the device once
      for (int i = 0; i < 20; ++i) (void)(*ctx)->replay(s);
      std::vector<float> ms;
      for (int i = 0; i < iters; ++i) {
        cudaEventRecord(e0, s);
        (void)(*ctx)->replay(s);
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2], p99 = ms[std::min(ms.size() - 1, ms.size() * 99 / 100)];
      std::printf("{\"peer\": \"kiln\", \"batch\": %lld, \"precision\": \"%s\", \"median_ms\": %.4f, \"p99_ms\": %.4f, "
                  "\"throughput_per_s\": %.1f, \"build_s\": %.2f, \"layers\": %zu, \"arena_bytes\": %zu, "
                  "\"activation_bytes_sum\": %zu, \"cache_hits\": %d, \"cache_misses\": %d, \"max_abs_err_rel\": %s, "
                  "\"cosine\": %s, \"top1_agree\": %s, \"layer_precisions\": \"%s\"}\n",
                  static_cast<long long>(batch), prec.c_str(), median, p99, batch * 1000.0 / median, build_s,
                  (*model)->layers().size(), (*model)->arena_bytes(), (*model)->activation_bytes_sum(),
                  cache.hits() - hits0, cache.misses() - misses0,
                  check ? fmt_num(num / den, "%.3g").c_str() : "null",
                  check ? fmt_num(dot / std::sqrt(na * nb), "%.7f").c_str() : "null",
                  check ? std::to_string(top1).c_str() : "null",
                  prec == "fp32" ? "" : json_escape(layer_spec).c_str());
      std::fflush(stdout);
      if (profile) {  // per-layer device times (no graph: one event pair per layer), slowest first
        auto lm = (*ctx)->profile_layers({x}, s);
        if (lm.ok()) {
          const auto& L = (*model)->layers();
          std::vector<size_t> idx(L.size());
          for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
          std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return (*lm)[a] > (*lm)[b]; });
          double total = 0;
          for (double v : *lm) total += v;
          std::printf("# profile batch %lld %s: %zu layers, sum %.3f ms\n", static_cast<long long>(batch), prec.c_str(),
                      L.size(), total);
          for (size_t i = 0; i < idx.size() && i < 12; ++i)
            std::printf("#   %7.3f ms  %-48s %s\n", (*lm)[idx[i]], L[idx[i]].name.c_str(), L[idx[i]].tactic.c_str());
        }
      }
      cudaStreamDestroy(s);
    }
  }
  if (!cache_path.empty()) {
    if (Status s = cache.save(cache_path); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.to_string().c_str());
      return 1;
    }
    std::fprintf(stderr, "timing cache: %d hits, %d misses, %zu entries written to %s\n", cache.hits(), cache.misses(),
                 cache.size(), cache_path.c_str());
  }
  return 0;
}
