// `kiln`: the command-line tool (build, run, bench, inspect, compare, conformance).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "conformance/runner.h"

namespace {

int cmd_conformance(const std::string& dir, const std::string& json, const std::string& filter, bool verbose) {
  kiln::conformance::Options opts;
  opts.filter = filter;
  opts.progress = [verbose](const kiln::conformance::CaseResult& r, int done, int total) {
    if (verbose || r.verdict == kiln::conformance::Verdict::kFail)
      std::fprintf(stderr, "[%d/%d] %s %s %s\n", done, total, kiln::conformance::verdict_name(r.verdict), r.name.c_str(),
                   r.reason.substr(0, 300).c_str());
    else if (done % 50 == 0 || done == total)
      std::fprintf(stderr, "[%d/%d]\n", done, total);
  };
  auto rep = kiln::conformance::run(dir, opts);
  if (!rep.ok()) {
    std::fprintf(stderr, "kiln conformance: %s\n", rep.status().to_string().c_str());
    return 2;
  }
  if (!json.empty()) {
    std::ofstream f(json);
    f << rep->to_json();
  }
  std::printf("%d passed, %d failed, %d skipped\n", rep->passed, rep->failed, rep->skipped);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln: ONNX -> optimized plan -> run"};
  app.require_subcommand(1);

  auto* conf = app.add_subcommand("conformance", "Run ONNX backend test data (model.onnx + test_data_set_N)");
  std::string conf_dir, conf_json, conf_filter;
  bool conf_verbose = false;
  conf->add_option("dir", conf_dir, "Case, suite or data directory")->required();
  conf->add_option("--json", conf_json, "Write a per-case JSON report here");
  conf->add_option("--filter", conf_filter, "Only cases whose name contains this");
  conf->add_flag("-v,--verbose", conf_verbose, "Print every case");

  CLI11_PARSE(app, argc, argv);
  if (conf->parsed()) return cmd_conformance(conf_dir, conf_json, conf_filter, conf_verbose);
  return 0;
}
