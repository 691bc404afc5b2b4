// ONNX backend-test-data runner (see runner.h).
#include "conformance/runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "builder/build_from_graph.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/gpu_model.h"
#endif
#include "core/numerics.h"
#include "onnx/importer.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"

namespace fs = std::filesystem;

namespace kiln::conformance {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kSkip: return "skip";
  }
  return "?";
}

std::string compare_tensors(const Tensor& a, const Tensor& e, double rtol, double atol) {
  if (a.dtype() != e.dtype())
    return std::string("dtype ") + dtype_name(a.dtype()) + ", expected " + dtype_name(e.dtype());
  if (a.shape() != e.shape()) return "shape " + shape_str(a.shape()) + ", expected " + shape_str(e.shape());
  const bool exact = !dtype_is_float(e.dtype());
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < e.numel(); ++i) {
    bool ok;
    if (exact) {
      ok = load_as_int64(a.dtype(), a.raw(), i) == load_as_int64(e.dtype(), e.raw(), i);
    } else {
      const double x = load_as_double(a.dtype(), a.raw(), i), y = load_as_double(e.dtype(), e.raw(), i);
      if (std::isnan(y)) ok = std::isnan(x);
      else if (std::isinf(y)) ok = x == y;
      else ok = std::fabs(x - y) <= atol + rtol * std::fabs(y);
      if (!ok) worst = std::max(worst, std::isnan(x) ? INFINITY : std::fabs(x - y));
    }
    if (!ok) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (!bad) return "";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%lld of %lld elements differ; first at %lld: got %g, expected %g; max |diff| %g",
                static_cast<long long>(bad), static_cast<long long>(e.numel()), static_cast<long long>(first),
                load_as_double(a.dtype(), a.raw(), first), load_as_double(e.dtype(), e.raw(), first), worst);
  return buf;
}

namespace {

// Test data for a sequence- or optional-typed graph value is a serialized SequenceProto /
// OptionalProto rather than a TensorProto; the declared type picks the reader.
// ONNX 1.12's test data stores bfloat16 tensors as uint16 bit patterns (numpy has no bfloat16):
// such a file is reinterpreted when the graph declares the value bfloat16.
StatusOr<Tensor> load_case_value(const fs::path& file, const ir::Graph& g, const std::vector<ir::ValueId>& values, size_t k) {
  if (k >= values.size() || g.value(values[k]).kind == ir::ValueKind::kTensor) {
    KILN_ASSIGN_OR_RETURN(Tensor t, onnx_import::load_tensor_pb_file(file.string()));
    if (k < values.size() && g.value(values[k]).dtype == DataType::kBFloat16 && t.dtype() == DataType::kUInt16) {
      Tensor b(DataType::kBFloat16, t.shape());
      std::memcpy(b.raw(), t.raw(), t.nbytes());
      return b;
    }
    return t;
  }
  const ir::Value& v = g.value(values[k]);
  return onnx_import::load_value_pb_file(file.string(), v.kind, v.dtype);
}

// compare_tensors, extended element-wise to sequences and to empty optionals.
std::string compare_values(const Tensor& a, const Tensor& e, double rtol, double atol) {
  auto kind = [](const Tensor& t) { return t.is_sequence() ? "a sequence" : t.is_none() ? "an empty optional" : "a tensor"; };
  if (a.kind() != e.kind()) return std::string("got ") + kind(a) + ", expected " + kind(e);
  if (e.is_none()) return "";
  if (e.is_tensor()) return compare_tensors(a, e, rtol, atol);
  if (a.items().size() != e.items().size())
    return "sequence of " + std::to_string(a.items().size()) + " tensors, expected " + std::to_string(e.items().size());
  for (size_t i = 0; i < e.items().size(); ++i) {
    std::string d = compare_tensors(a.items()[i], e.items()[i], rtol, atol);
    if (!d.empty()) return "sequence element " + std::to_string(i) + ": " + d;
  }
  return "";
}

std::vector<fs::path> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<int, fs::path>> files;
  for (const auto& f : fs::directory_iterator(dir)) {
    const std::string n = f.path().filename().string();
    if (n.rfind(prefix, 0) == 0 && f.path().extension() == ".pb")
      files.emplace_back(std::stoi(n.substr(prefix.size())), f.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<fs::path> r;
  for (auto& [i, p] : files) r.push_back(p);
  return r;
}

// The real deployment path: Builder (the data set's input shapes as the optimization
// profile) -> serialized plan bytes -> Runtime -> ExecutionContext -> execute.
StatusOr<std::vector<Tensor>> run_through_plan(const ir::Graph& graph, const std::vector<Tensor>& inputs, bool gpu) {
  if (inputs.size() != graph.inputs.size())
    return invalid_argument("the data set has " + std::to_string(inputs.size()) + " inputs, the model takes " +
                            std::to_string(graph.inputs.size()));
  BuilderConfig config;
  config.target = gpu ? TargetDevice::kCuda : TargetDevice::kCpu;
  config.tf32 = false;  // FP32 math on the GPU: the data's tolerances are FP32's
  OptimizationProfile profile;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i].shape();
    KILN_RETURN_IF_ERROR(profile.set_dimensions(graph.value(graph.inputs[i]).name, s, s, s));
  }
  config.profiles.push_back(std::move(profile));
  KILN_ASSIGN_OR_RETURN(std::vector<uint8_t> plan, build_from_graph(graph, config));
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Engine> engine, Runtime::deserialize_engine(plan));
  auto ctx = engine->create_execution_context();
  for (size_t i = 0; i < inputs.size(); ++i)
    KILN_RETURN_IF_ERROR(ctx->set_input(graph.value(graph.inputs[i]).name, inputs[i]));
  KILN_RETURN_IF_ERROR(ctx->execute());
  std::vector<Tensor> outs;
  for (ir::ValueId v : graph.outputs) {
    KILN_ASSIGN_OR_RETURN(Tensor t, ctx->output(graph.value(v).name));
    outs.push_back(std::move(t));
  }
  return outs;
}

// check_only: the graph a CUDA plan would lower at the data set's input shapes (and, for
// shape-tensor inputs, values), lowered with the FP32 rules and no device (Options::check_only).
Status check_gpu_lowering(const ir::Graph& graph, const std::vector<Tensor>& inputs) {
#ifdef KILN_HAVE_CUDA
  if (inputs.size() != graph.inputs.size())
    return invalid_argument("the data set has " + std::to_string(inputs.size()) + " inputs, the model takes " +
                            std::to_string(graph.inputs.size()));
  BuilderConfig config;
  config.target = TargetDevice::kCuda;
  config.tf32 = false;
  OptimizationProfile profile;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Shape& s = inputs[i].shape();
    shapes.push_back(s);
    KILN_RETURN_IF_ERROR(profile.set_dimensions(graph.value(graph.inputs[i]).name, s, s, s));
  }
  config.profiles.push_back(std::move(profile));
  KILN_ASSIGN_OR_RETURN(ir::Graph laid, cuda_layer_graph(graph, config, nullptr));
  // Shape-tensor inputs (decision 0073): the engine lowers at each call's values with them bound
  // as constants; so does this prediction, at the data set's values.
  if (!cuda::shape_operand_inputs(laid).empty()) {
    KILN_ASSIGN_OR_RETURN(ir::Graph bound, cuda::bind_shape_inputs(laid, inputs));
    KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(bound, shapes, &inputs));
    return cuda::check_gpu_support(bound, vs, /*fp16=*/false);
  }
  KILN_ASSIGN_OR_RETURN(cuda::ValueShapes vs, cuda::infer_value_shapes_by_reference(laid, shapes));
  return cuda::check_gpu_support(laid, vs, /*fp16=*/false);
#else
  (void)graph;
  (void)inputs;
  return unsupported("--check-only lowers for the GPU and needs a build with CUDA");
#endif
}

}  // namespace

CaseResult run_case(const std::string& case_dir, const std::string& name, const Options& opts) {
  CaseResult r;
  r.name = name;
  auto graph = onnx_import::import_model_file(case_dir + "/model.onnx");
  if (!graph.ok()) {
    r.verdict = graph.status().code() == StatusCode::kUnsupported ? Verdict::kSkip : Verdict::kFail;
    r.reason = graph.status().to_string();
    return r;
  }
  std::vector<fs::path> sets;
  for (const auto& d : fs::directory_iterator(case_dir))
    if (d.is_directory() && d.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(d.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    r.reason = "no test_data_set_N directories";
    return r;
  }
  for (const auto& set : sets) {
    std::vector<Tensor> inputs;
    for (const auto& f : sorted_files(set, "input_")) {
      auto t = load_case_value(f, *graph, graph->inputs, inputs.size());
      if (!t.ok()) {
        r.verdict = t.status().code() == StatusCode::kUnsupported ? Verdict::kSkip : Verdict::kFail;
        r.reason = t.status().to_string();
        return r;
      }
      inputs.push_back(std::move(t).value());
    }
    if (opts.gpu && opts.check_only) {
      Status lowered = check_gpu_lowering(*graph, inputs);
      if (!lowered.ok()) {
        r.verdict = lowered.code() == StatusCode::kUnsupported ? Verdict::kSkip : Verdict::kFail;
        r.reason = lowered.to_string();
        return r;
      }
      continue;
    }
    auto outs = run_through_plan(*graph, inputs, opts.gpu);
    if (!outs.ok()) {
      r.verdict = outs.status().code() == StatusCode::kUnsupported ? Verdict::kSkip : Verdict::kFail;
      r.reason = outs.status().to_string();
      return r;
    }
    auto expected_files = sorted_files(set, "output_");
    for (size_t k = 0; k < expected_files.size(); ++k) {
      auto e = load_case_value(expected_files[k], *graph, graph->outputs, k);
      if (!e.ok()) {
        r.verdict = e.status().code() == StatusCode::kUnsupported ? Verdict::kSkip : Verdict::kFail;
        r.reason = e.status().to_string();
        return r;
      }
      if (k >= outs->size()) {
        r.reason = "model produced " + std::to_string(outs->size()) + " outputs, expected more";
        return r;
      }
      std::string diff = compare_values((*outs)[k], *e, opts.rtol, opts.atol);
      if (!diff.empty()) {
        r.reason = set.filename().string() + " output " + std::to_string(k) + ": " + diff;
        return r;
      }
    }
  }
  r.verdict = Verdict::kPass;
  if (opts.gpu && opts.check_only) r.reason = "lowers (predicted; not run, outputs not compared)";
  return r;
}

namespace {

// Runs run_case in a child process; the verdict comes back through a pipe.
CaseResult run_case_isolated(const std::string& dir, const std::string& name, const Options& opts) {
  int fds[2];
  if (pipe(fds) != 0) return run_case(dir, name, opts);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    CaseResult r = run_case(dir, name, opts);
    std::string msg = std::to_string(static_cast<int>(r.verdict)) + "\n" + r.reason;
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  CaseResult r;
  r.name = name;
  auto start = std::chrono::steady_clock::now();
  std::string buf;
  char chunk[4096];
  bool killed = false;
  // Read until the child closes the pipe; kill it if it runs past the timeout.
  for (;;) {
    const double left = opts.timeout_s - std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      killed = true;
      break;
    }
    pollfd pfd{fds[0], POLLIN, 0};
    int pr = poll(&pfd, 1, static_cast<int>(std::min(left, 1.0) * 1000) + 1);
    if (pr <= 0) continue;
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buf.append(chunk, static_cast<size_t>(n));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  if (killed) {
    r.reason = "timed out after " + std::to_string(static_cast<int>(opts.timeout_s)) + " s";
  } else if (WIFSIGNALED(status)) {
    r.reason = std::string("crashed with signal ") + strsignal(WTERMSIG(status));
  } else if (buf.empty()) {
    r.reason = "the case's process exited without a verdict";
  } else {
    auto nl = buf.find('\n');
    r.verdict = static_cast<Verdict>(std::stoi(buf.substr(0, nl)));
    r.reason = nl == std::string::npos ? "" : buf.substr(nl + 1);
  }
  return r;
}

}  // namespace

StatusOr<Report> run(const std::string& root, const Options& opts) {
  if (!fs::is_directory(root)) return not_found("conformance directory '" + root + "' not found");
  std::vector<std::pair<std::string, std::string>> cases;  // name, dir
  auto add_suite = [&](const fs::path& suite, const std::string& prefix) {
    for (const auto& c : fs::directory_iterator(suite))
      if (fs::exists(c.path() / "model.onnx")) cases.emplace_back(prefix + c.path().filename().string(), c.path().string());
  };
  if (fs::exists(fs::path(root) / "model.onnx")) {
    cases.emplace_back(fs::path(root).filename().string(), root);
  } else {
    bool nested = false;
    for (const auto& s : fs::directory_iterator(root)) {
      if (!s.is_directory()) continue;
      if (fs::exists(s.path() / "model.onnx")) continue;
      nested = true;
      add_suite(s.path(), s.path().filename().string() + "/");
    }
    if (!nested) add_suite(root, fs::path(root).filename().string() + "/");
  }
  std::sort(cases.begin(), cases.end());
  if (!opts.filter.empty())
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const auto& c) { return c.first.find(opts.filter) == std::string::npos; }),
                cases.end());
  Report rep;
  rep.cases.resize(cases.size());
  std::mutex mu;
  int done = 0;
  std::atomic<size_t> next{0};
  // Each worker forks one case at a time; the parent's threads only wait on pipes.
  auto work = [&] {
    for (size_t i = next++; i < cases.size(); i = next++) {
      auto t0 = std::chrono::steady_clock::now();
      CaseResult r = run_case_isolated(cases[i].second, cases[i].first, opts);
      r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      if (r.verdict == Verdict::kPass) ++rep.passed;
      else if (r.verdict == Verdict::kFail) ++rep.failed;
      else ++rep.skipped;
      rep.cases[i] = r;
      if (opts.progress) opts.progress(r, ++done, static_cast<int>(cases.size()));
    }
  };
  const int jobs = std::max(1, std::min(opts.jobs, 64));
  if (jobs == 1) {
    work();
  } else {
    std::vector<std::thread> workers;
    for (int j = 0; j < jobs; ++j) workers.emplace_back(work);
    for (auto& t : workers) t.join();
  }
  return rep;
}

std::string Report::to_json() const {
  nlohmann::json j;
  j["passed"] = passed;
  j["failed"] = failed;
  j["skipped"] = skipped;
  j["cases"] = nlohmann::json::array();
  for (const auto& c : cases)
    j["cases"].push_back({{"name", c.name}, {"verdict", verdict_name(c.verdict)}, {"reason", c.reason}, {"ms", c.ms}});
  return j.dump(1);
}

}  // namespace kiln::conformance
