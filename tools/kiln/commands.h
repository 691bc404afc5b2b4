// The `kiln` subcommands, one file each (cmd_*.cc), and what they share: exit codes and the
// error printer. Exit codes: 0 ok, 1 mismatch / verification failure, 2 usage or input error.
#pragma once

#include <string>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "tools/kiln/options.h"

namespace kiln::cli {

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;

// Prints "kiln <command>: <Code>: <message>" to stderr; returns kExitError.
int report_error(const char* command, const Status& s);
// Runtime::load_engine for a plan file the user named; a file that is an ONNX model instead is
// an error that says so (the runtime itself links no ONNX parser).
StatusOr<std::shared_ptr<Engine>> load_plan(const std::string& path, const Logger& logger);
// "[1,3,224,224]" or "[1,3,224,224]..[8,3,224,224] (opt [4,3,224,224])".
std::string range_string(const ShapeRange& r);

int cmd_build(const BuildOptions& o);
int cmd_run(const RunOptions& o);
int cmd_bench(const BenchOptions& o);
int cmd_inspect(const InspectOptions& o);
int cmd_compare(const CompareOptions& o);
int cmd_conformance(const ConformanceOptions& o);

}  // namespace kiln::cli
