// `kiln conformance DIR`: ONNX backend test data through build -> plan -> runtime, one forked
// process per case (src/conformance/runner.cc). Exit 0 with a summary line; the floor check
// (tests/conformance/check_floor.sh) reads that line.
#include <cstdio>
#include <fstream>

#include "conformance/runner.h"
#include "tools/kiln/commands.h"

namespace kiln::cli {

int cmd_conformance(const ConformanceOptions& o) {
  conformance::Options opts;
  opts.filter = o.filter;
  opts.gpu = o.device != "cpu";
  opts.jobs = o.jobs;
  opts.check_only = o.check_only;
  if (o.check_only && !opts.gpu)
    return report_error("conformance", invalid_argument("--check-only predicts GPU lowering: use it with --device gpu"));
  const bool verbose = o.verbose;
  opts.progress = [verbose](const conformance::CaseResult& r, int done, int total) {
    if (verbose || r.verdict == conformance::Verdict::kFail)
      std::fprintf(stderr, "[%d/%d] %s %s %s\n", done, total, conformance::verdict_name(r.verdict), r.name.c_str(),
                   r.reason.substr(0, 300).c_str());
    else if (done % 50 == 0 || done == total)
      std::fprintf(stderr, "[%d/%d]\n", done, total);
  };
  auto rep = conformance::run(o.dir, opts);
  if (!rep.ok()) return report_error("conformance", rep.status());
  if (!o.json.empty()) {
    std::ofstream f(o.json);
    f << rep->to_json();
    if (!f) return report_error("conformance", not_found("cannot write '" + o.json + "'"));
  }
  if (o.check_only) {
    std::printf("%d lower on the GPU (predicted: not run, outputs not compared), %d failed before lowering, %d would be "
                "skipped\n",
                rep->passed, rep->failed, rep->skipped);
    return kExitOk;
  }
  std::printf("%d passed, %d failed, %d skipped\n", rep->passed, rep->failed, rep->skipped);
  return kExitOk;
}

}  // namespace kiln::cli
