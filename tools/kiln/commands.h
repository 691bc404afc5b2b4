// The `kiln` subcommands, one file each (cmd_*.cc), and what they share: exit codes and the
// error printer. Exit codes: 0 ok, 1 mismatch / verification failure, 2 usage or input error.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "kiln/status.h"
#include "tools/kiln/options.h"

namespace kiln::ir {
class Graph;
}

namespace kiln::cli {

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;

// Prints "kiln <command>: <Code>: <message>" to stderr; returns kExitError.
int report_error(const char* command, const Status& s);
// Runtime::load_engine for a plan file the user named; a file that is an ONNX model instead is
// an error that says so (the runtime itself links no ONNX parser).
StatusOr<std::shared_ptr<Engine>> load_plan(const std::string& path, const Logger& logger);
// The last Status report_error printed on this thread (OK before any): lets callers that get
// only an exit code (the Python bindings' kiln.bench) raise the same message.
const Status& last_reported_error();
// "[1,3,224,224]" or "[1,3,224,224]..[8,3,224,224] (opt [4,3,224,224])".
std::string range_string(const ShapeRange& r);

// A quantized plan's one-line precision summary (docs/decisions/0062): "2 layers INT8, 0 FP8, 3
// FP32 (reasons: 1 K or N not a multiple of 16; 2 no Q/DQ at the layer's inputs)". Counts the
// 8-bit layers (QuantLinear, QuantConv) by weight type, and the float Conv/Gemm/MatMul-family layers
// with the rule that kept each float (LayerInfo::unfused_qdq, or no Q/DQ at its inputs). "" for a
// plan with no 8-bit layer and no unfused Q/DQ.
std::string quant_precision_summary(const Engine& e);
// Whether a plan layer's op is one of the linear layers quantization targets (Conv, FusedConv,
// ConvTranspose, Gemm, MatMul, MatMulBias, QuantLinear, QuantConv).
bool is_linear_layer_op(const std::string& op);

// `kiln inspect --json`'s object for a loaded engine (without "load_ms").
nlohmann::json engine_json(const Engine& e);
// `kiln compare`'s measurement: runs `engine` (inputs bound as `shapes` say) and the CPU
// reference interpreter on `reference` with the same `inputs` (engine order); returns
// {"atol", "rtol", "outputs": [{name, ok, dtype, shape, max_abs_error, ...} or {name, ok,
// mismatch}], "ok"}, the --json object without "plan" and "model".
StatusOr<nlohmann::json> compare_engine(const Engine& engine, const ir::Graph& reference,
                                        const std::vector<std::pair<std::string, Tensor>>& inputs,
                                        const std::map<std::string, Shape>& shapes, int top_k, double atol, double rtol);
// `kiln compare --per-layer`'s measurement (docs/decisions/0062): runs the CPU plan's layer graph on
// the reference kernels and `reference` (the FP32 ONNX model) with the same inputs, and compares
// every layer output that has a same-named tensor in the model. Returns {"tolerance": {metric,
// bound}, "layers": [{index, layer, op, tensor, origin, cosine, normalized_error, max_rel_error,
// max_abs_error, ok}], "first_failing": a layer or null, "ok"}. A layer passes when cosine >= bound
// (`cosine`) or max|a - r| / max|r| <= bound. Unsupported for CUDA plans.
StatusOr<nlohmann::json> compare_layers(const Engine& engine, const ir::Graph& reference,
                                        const std::vector<std::pair<std::string, Tensor>>& inputs, bool cosine,
                                        double bound);
// `kiln bench`'s measurement of a loaded engine (inputs generated with seed 1, `shapes` for
// dynamic inputs): fills `j` like `kiln bench --json` (without "plan" and the load time) and
// prints the summary. Returns an exit code; errors are printed (see last_reported_error).
int bench_engine(const BenchOptions& o, const Engine& engine, const std::map<std::string, Shape>& shapes,
                 nlohmann::json* j);

int cmd_build(const BuildOptions& o);
int cmd_run(const RunOptions& o);
int cmd_bench(const BenchOptions& o);
int cmd_inspect(const InspectOptions& o);
int cmd_compare(const CompareOptions& o);
int cmd_conformance(const ConformanceOptions& o);
int cmd_quantize(const QuantizeOptions& o);
int cmd_build_llm(const BuildLlmOptions& o);
// `kiln generate` / `kiln bench-llm`: run kiln_llm_generate (the LLM runner's program, which may
// link SentencePiece; `kiln` links protobuf and cannot) from the directory of the running `kiln`,
// with `args` (the subcommand first). Returns only on failure (exit code 2, message printed).
int exec_llm_tool(int argc, char** argv);

}  // namespace kiln::cli
