// The accuracy budget (accuracy_budget.h, docs/decisions/0062). Cost: one calibration, then one
// quantize-from-cache + CPU reference run of the held-out samples per candidate: 1 (all
// quantized) + L (leave one out, L targets) + at most L - 1 (growing the float set).
#include "quant/accuracy_budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "backends/cpu/interpreter.h"
#include "io/npy.h"
#include "ir/shape_inference.h"
#include "onnx/importer.h"

namespace kiln::quant {

namespace {

namespace fs = std::filesystem;

// Rows [begin, begin + rows) of every input.
std::vector<Tensor> rows_of(const std::vector<Tensor>& samples, int64_t begin, int64_t rows) {
  std::vector<Tensor> out;
  for (const Tensor& s : samples) {
    Shape sh = s.shape();
    sh[0] = rows;
    const size_t per = s.nbytes() / static_cast<size_t>(s.dim(0));
    out.push_back(s.view(per * static_cast<size_t>(begin), s.dtype(), sh));
  }
  return out;
}

// A temporary directory removed when this goes out of scope.
struct TempDir {
  fs::path path;
  TempDir() {
    std::random_device rd;
    path = fs::temp_directory_path() / ("kiln_budget_" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Per output: sum a.b, |a|^2, |b|^2 over every held-out batch (double), then 1 - cosine.
struct CosineAcc {
  std::vector<double> dot, na, nb;
  void add(const std::vector<Tensor>& got, const std::vector<Tensor>& ref) {
    dot.resize(ref.size());
    na.resize(ref.size());
    nb.resize(ref.size());
    for (size_t o = 0; o < ref.size(); ++o) {
      if (got[o].dtype() != DataType::kFloat32 || ref[o].dtype() != DataType::kFloat32 ||
          got[o].numel() != ref[o].numel()) {
        dot[o] = std::nan("");
        continue;
      }
      const float* a = got[o].data<float>();
      const float* b = ref[o].data<float>();
      for (int64_t i = 0; i < ref[o].numel(); ++i) {
        dot[o] += static_cast<double>(a[i]) * b[i];
        na[o] += static_cast<double>(a[i]) * a[i];
        nb[o] += static_cast<double>(b[i]) * b[i];
      }
    }
  }
  // max over outputs of 1 - cos; two all-zero tensors agree (0), one all-zero does not (1); NaN: 1.
  double error() const {
    double worst = 0;
    for (size_t o = 0; o < dot.size(); ++o) {
      double e;
      if (na[o] == 0 && nb[o] == 0) e = 0;
      else if (na[o] == 0 || nb[o] == 0) e = 1;
      else e = 1 - dot[o] / std::sqrt(na[o] * nb[o]);
      if (!std::isfinite(e)) e = 1;
      worst = std::max(worst, e);
    }
    return worst;
  }
};

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

}  // namespace

StatusOr<std::string> quantize_within_budget(const std::string& onnx_path, const QuantizeConfig& config,
                                             QuantizeReport* report) {
  const double e = config.max_error;
  if (!(e > 0 && e < 1))
    return invalid_argument("max error " + fmt(e) + ": the budget is 1 - cosine similarity, give a value in (0, 1)");
  if (config.data.empty())
    return invalid_argument("a max error needs calibration data (--calib DATA): the error is measured on its "
                            "held-out part (a calibration cache alone holds no samples)");
  if (!(config.calib_split > 0 && config.calib_split < 1))
    return invalid_argument("calibration split " + fmt(config.calib_split) +
                            ": give the calibrating share of the samples in (0, 1), e.g. 0.8");

  KILN_ASSIGN_OR_RETURN(ir::Graph g, onnx_import::import_model_file(onnx_path));
  KILN_RETURN_IF_ERROR(ir::infer_shapes(g));
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> samples, load_calibration_samples(config.data, g));
  const int64_t count = samples.front().dim(0);
  int64_t batch = config.batch_size > 0 ? config.batch_size : 8;
  bool fixed = false;
  for (ir::ValueId id : g.inputs) {
    const ir::Value& v = g.value(id);
    if (v.shape && !v.shape->empty() && (*v.shape)[0].is_known()) {
      batch = std::max<int64_t>((*v.shape)[0].value, 1);
      fixed = true;
    }
  }
  const int64_t n_cal = static_cast<int64_t>(std::floor(static_cast<double>(count) * config.calib_split));
  const int64_t n_held = count - n_cal;
  const int64_t need = fixed ? batch : 1;
  if (n_cal < need || n_held < need)
    return invalid_argument("calibration data '" + config.data + "': " + std::to_string(count) + " samples split " +
                            fmt(config.calib_split) + " give " + std::to_string(n_cal) + " to calibrate and " +
                            std::to_string(n_held) + " held out; each part needs at least " + std::to_string(need) +
                            (fixed ? " (the model's fixed batch)" : "") + " sample(s): add samples or change the split");

  // The calibrating part as a directory of <input>.npy for quantize_onnx; a cache so that every
  // candidate after the first reuses its scales instead of recalibrating.
  TempDir tmp;
  const fs::path cal_dir = tmp.path / "calib";
  fs::create_directories(cal_dir);
  const std::vector<Tensor> cal = rows_of(samples, 0, n_cal);
  for (size_t k = 0; k < cal.size(); ++k)
    KILN_RETURN_IF_ERROR(io::write_npy((cal_dir / (g.value(g.inputs[k]).name + ".npy")).string(), cal[k]));
  QuantizeConfig base = config;
  base.max_error = 0;
  base.data = cal_dir.string();
  if (base.cache.empty()) base.cache = (tmp.path / "budget.calib").string();

  // Held-out batches and their FP32 outputs.
  std::vector<std::vector<Tensor>> held;
  for (int64_t b = n_cal; b + (fixed ? batch : 1) <= count; b += batch)
    held.push_back(rows_of(samples, b, std::min(batch, count - b)));
  std::vector<std::vector<Tensor>> ref;
  for (const auto& in : held) {
    auto r = interpret(g, in);
    if (!r.ok()) return r.status().with_context("the FP32 model on the held-out samples");
    ref.push_back(std::move(*r));
  }

  const std::string base_dir = fs::path(onnx_path).parent_path().string();
  QuantizeReport first;
  // Quantizes with `extra` left float and measures the error; fills *rep.
  auto evaluate = [&](const std::vector<std::string>& extra, QuantizeReport* rep, std::string* bytes,
                      bool quiet) -> StatusOr<double> {
    QuantizeConfig c = base;
    c.exclude.insert(c.exclude.end(), extra.begin(), extra.end());
    if (quiet) {
      c.progress = nullptr;
      c.logger = nullptr;
    }
    KILN_ASSIGN_OR_RETURN(std::string q, quantize_onnx(onnx_path, c, rep));
    KILN_ASSIGN_OR_RETURN(ir::Graph qg, onnx_import::import_model_bytes(q, base_dir));
    CosineAcc acc;
    for (size_t b = 0; b < held.size(); ++b) {
      auto r = interpret(qg, held[b]);
      if (!r.ok()) return r.status().with_context("the quantized model on the held-out samples");
      acc.add(*r, ref[b]);
    }
    if (bytes) *bytes = std::move(q);
    return acc.error();
  };

  std::string best;
  KILN_ASSIGN_OR_RETURN(const double all, evaluate({}, &first, &best, false));
  QuantizeReport out = first;
  out.error_all_quantized = all;
  out.error = all;
  int held_samples = 0;
  for (const auto& in : held) held_samples += static_cast<int>(in.front().dim(0));
  out.held_out_samples = held_samples;
  for (const std::string& n : first.quantized) out.layers.push_back(LayerChoice{n, true, 0});
  if (all > e) {
    // Leave one out: each target's sensitivity.
    std::vector<double> without(out.layers.size());
    for (size_t i = 0; i < out.layers.size(); ++i) {
      KILN_ASSIGN_OR_RETURN(without[i], evaluate({out.layers[i].node}, nullptr, nullptr, true));
      out.layers[i].sensitivity = all - without[i];
    }
    std::vector<size_t> order(out.layers.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return out.layers[a].sensitivity > out.layers[b].sensitivity; });
    std::vector<std::string> kept;
    bool met = false;
    for (size_t k = 0; k + 1 < order.size() && !met; ++k) {  // at least one layer stays quantized
      kept.push_back(out.layers[order[k]].node);
      QuantizeReport r;
      std::string q;
      KILN_ASSIGN_OR_RETURN(const double err, evaluate(kept, &r, &q, true));
      if (err <= e) {
        met = true;
        out.error = err;
        best = std::move(q);
        out.activation_scales = r.activation_scales;
        out.quantized = r.quantized;
        out.skipped = r.skipped;
      }
    }
    if (!met)
      return invalid_argument(
          "max error " + fmt(e) + " cannot be met with any layer quantized: " +
          (order.empty() ? std::string("the model has no quantized layer")
                         : "with only '" + out.layers[order.back()].node + "' quantized") +
          " the error (1 - cosine vs FP32 on " + std::to_string(held_samples) +
          " held-out samples) is still above it (every layer quantized: " + fmt(all) +
          "); build without --int8/--fp8, or raise the budget");
    for (LayerChoice& l : out.layers)
      l.quantized = std::find(kept.begin(), kept.end(), l.node) == kept.end();
  }
  if (report) *report = std::move(out);
  return best;
}

}  // namespace kiln::quant

namespace kiln {

std::vector<std::string> describe_budget(const QuantizeReport& r, const QuantizeConfig& config) {
  std::vector<std::string> lines;
  if (r.error_all_quantized < 0) return lines;
  const std::string fmt8 = config.format == QuantFormat::kFp8E4M3 ? "fp8" : "int8";
  char b[256];
  std::snprintf(b, sizeof b,
                "max-error %.3g (1 - cosine vs FP32, worst output, %d held-out samples): every layer %s %.3g, chosen "
                "plan %.3g%s",
                config.max_error, r.held_out_samples, fmt8.c_str(), r.error_all_quantized, r.error,
                r.error <= config.max_error ? "" : " (over budget)");
  lines.push_back(b);
  std::string per, kept;
  for (const LayerChoice& l : r.layers) {
    per += (per.empty() ? "" : ", ") + l.node + " " + (l.quantized ? fmt8 : "float");
    if (!l.quantized) {
      std::snprintf(b, sizeof b, "%s (sensitivity %.3g)", l.node.c_str(), l.sensitivity);
      kept += (kept.empty() ? "" : ", ") + std::string(b);
    }
  }
  lines.push_back("kept float: " + (kept.empty() ? std::string("none (every layer quantized meets the budget)") : kept));
  lines.push_back("layer precisions: " + per);
  return lines;
}

}  // namespace kiln
