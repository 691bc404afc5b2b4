// Runs ONNX's backend test cases (onnx/backend/test/data layout: CASE/model.onnx +
// CASE/test_data_set_N/{input_K,output_K}.pb): for every data set, builds a plan (Builder with the
// data set's input shapes as the profile -> plan bytes -> Runtime -> ExecutionContext), runs it
// and compares with the expected outputs, |actual - expected| <= atol + rtol * |expected|
// (numpy.testing.assert_allclose, as ONNX's backend test runner uses; NaN matches NaN).
// Each case runs in a forked child so a crash or a hang fails that case, not the run.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln::conformance {

enum class Verdict { kPass, kFail, kSkip };
const char* verdict_name(Verdict v);

struct CaseResult {
  std::string name;   // "node/test_abs"
  Verdict verdict = Verdict::kFail;
  std::string reason; // why it failed or was skipped (unsupported ops named)
  double ms = 0;      // wall time of the case
};

struct Options {
  double rtol = 1e-3;
  double atol = 1e-7;
  double timeout_s = 120;            // per case
  std::string filter;                // substring a case name must contain ("" = all)
  // Build and run on the CUDA target (FP32 without TF32) instead of the CPU reference. A case the
  // GPU cannot run yet is skipped with the reason (the unsupported layers, named).
  bool gpu = false;
  // With `gpu`: only lower each data set's graph for the GPU (cuda_layer_graph, then
  // cuda::check_gpu_support, FP32 rules), without a device and without running anything. A case
  // that lowers is "pass" with the reason "lowers (predicted; not run, outputs not compared)"; one
  // that does not is "skip" naming why. A prediction of coverage, not of results: a case that
  // lowers may still fail on the GPU (wrong values, input staging). Needs a CUDA build.
  bool check_only = false;
  int jobs = 1;                      // cases run at once (each in its own process)
  std::function<void(const CaseResult&, int done, int total)> progress;
};

struct Report {
  std::vector<CaseResult> cases;
  int passed = 0, failed = 0, skipped = 0;
  std::string to_json() const;
};

// `root` is either a suite directory holding case directories (…/data/node) or a directory of
// suites (…/data), in which case names are "suite/case".
StatusOr<Report> run(const std::string& root, const Options& opts);

// Runs one case in-process (no fork). Returns the verdict and reason.
CaseResult run_case(const std::string& case_dir, const std::string& name, const Options& opts);

// Compares one output; returns "" when it matches, else a short description of the mismatch.
std::string compare_tensors(const Tensor& actual, const Tensor& expected, double rtol, double atol);

}  // namespace kiln::conformance
