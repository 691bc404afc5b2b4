// `kiln`: the command-line tool. Subcommands: build, run, bench, inspect, compare, conformance, quantize,
// build-llm (one file each, cmd_*.cc; options in options.h); generate and bench-llm run
// kiln_llm_generate (next to `kiln`: it may link SentencePiece, which cannot share a process with
// the protobuf `kiln` links; docs/decisions/0060). Exit codes: 0 ok, 1 mismatch, 2 usage or input error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "tools/kiln/commands.h"

int main(int argc, char** argv) {
  using namespace kiln::cli;
  if (argc >= 2 && (std::string(argv[1]) == "generate" || std::string(argv[1]) == "bench-llm")) return exec_llm_tool(argc, argv);
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
  BuildLlmOptions build_llm;
  build_llm.add_to(app.add_subcommand("build-llm", "Build an LLM engine directory from a Hugging Face checkpoint"));
  // Handled above (they run kiln_llm_generate); listed here for --help.
  app.add_subcommand("generate", "Generate text from an LLM engine directory (kiln_llm_generate; --help there)");
  app.add_subcommand("bench-llm", "Measure an LLM engine: TTFT, TPOT, tokens/s (kiln_llm_generate bench-llm; --help there)");
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
    if (app.got_subcommand("build-llm")) return cmd_build_llm(build_llm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
  }
  return kExitError;
}
