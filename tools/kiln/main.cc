// `kiln`: the command-line tool. Subcommands: build, run, bench, inspect, compare, conformance, quantize
// (one file each, cmd_*.cc; options in options.h). Exit codes: 0 ok, 1 mismatch, 2 usage or
// input error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "tools/kiln/commands.h"

int main(int argc, char** argv) {
  using namespace kiln::cli;
  CLI::App app{"kiln: ONNX -> optimized plan -> run"};
  app.require_subcommand(1);

  BuildOptions build;
  build.add_to(app.add_subcommand("build", "Build a plan from an ONNX model"));
  RunOptions run;
  run.add_to(app.add_subcommand("run", "Run a plan once and print its outputs"));
  BenchOptions bench;
  bench.add_to(app.add_subcommand("bench", "Measure a plan's latency and throughput"));
  InspectOptions inspect;
  inspect.add_to(app.add_subcommand("inspect", "Print a plan's header, io tensors, profiles and layers"));
  CompareOptions compare;
  compare.add_to(app.add_subcommand("compare", "Compare a plan's outputs with the reference on the ONNX model"));
  QuantizeOptions quantize;
  quantize.add_to(app.add_subcommand("quantize", "Calibrate a model and write it as a Q/DQ ONNX (INT8 or FP8)"));
  ConformanceOptions conformance;
  conformance.add_to(app.add_subcommand("conformance", "Run ONNX backend test data (model.onnx + test_data_set_N)"));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);  // prints help or the usage error
    return rc == 0 ? kExitOk : kExitError;
  }
  // The library reports errors as Status; this only keeps a stray exception (bad_alloc, a
  // filesystem error) from ending in a bare "terminate called".
  try {
    if (app.got_subcommand("build")) return cmd_build(build);
    if (app.got_subcommand("run")) return cmd_run(run);
    if (app.got_subcommand("bench")) return cmd_bench(bench);
    if (app.got_subcommand("inspect")) return cmd_inspect(inspect);
    if (app.got_subcommand("compare")) return cmd_compare(compare);
    if (app.got_subcommand("conformance")) return cmd_conformance(conformance);
    if (app.got_subcommand("quantize")) return cmd_quantize(quantize);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
  }
  return kExitError;
}
