// The pass interface. A pass rewrites an ir::Graph in place; its file's header comment states
// the rewrite as a formula. Passes run in the one ordered list in pipelines.cc.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/constant_evaluator.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::passes {

struct PassOptions {
  int opt_level = 2;                      // 0: none, 1: cleanups, 2: + fusions, 3: + aggressive
  std::set<std::string> disabled;         // pass names to skip (`kiln build --disable-pass`)
  bool verify_each = false;               // run the verifier after every pass (--verify-passes)
  std::string dump_after;                 // print the graph after this pass (--dump-after)
  // Receives one line per pass ("fold_batchnorm: 339 -> 310 layers, 1.2 ms") and dumps.
  std::function<void(const std::string&)> log;
  // Computes layers whose inputs are all constants (fold_constants). Not owned; nullptr: only
  // shape computations with known shapes fold. The builder passes kiln::reference_evaluator().
  const ir::ConstantEvaluator* evaluator = nullptr;
  // fuse_qdq_conv: INT8 / UINT8 convolutions fuse into QuantConv too (FP8 ones always do); when
  // false each records the rule "INT8 QuantConv not enabled" instead. The builder sets it from
  // BuilderConfig::quant_conv (docs/decisions/0078 addendum).
  bool int8_quant_conv = true;
  // requantize_quant_conv: FP8 QuantConvs pass 8-bit activations too (INT8 ones always do). The
  // builder sets it from BuilderConfig::quant_conv: by default an FP8 conv keeps a float output,
  // which lets the builder time cuDNN's FP8 graph convolution (float Y only) against Kiln's kernels
  // (docs/decisions/0081 addendum).
  bool fp8_conv_activations_8bit = true;
};

struct Pass {
  const char* name;
  int min_level;  // runs when PassOptions::opt_level >= min_level
  Status (*run)(ir::Graph& g, const PassOptions& opts);
};

// Live (not removed) node count.
int live_layers(const ir::Graph& g);

// Rewires every use of `from` (node inputs, graph outputs) to `to`; keeps graph output names:
// when `from` is a graph output, `to` takes over its name if `to` is an intermediate.
// Returns false (and changes nothing) when that is impossible (both are graph inputs/outputs).
bool replace_all_uses(ir::Graph& g, ir::ValueId from, ir::ValueId to);

// The entries of a constant int32/int64 tensor (shapes, axes, pads); false if `v` is not one.
bool constant_ints(const ir::Graph& g, ir::ValueId v, std::vector<int64_t>* out);

// The dims of a value whose shape is fully known; false otherwise.
bool known_shape(const ir::Graph& g, ir::ValueId v, std::vector<int64_t>* out);

// Names of values that subgraphs (If/Loop/Scan bodies, nested) read from enclosing scopes.
// They are referenced by name, not by id, so a pass must not rewire or drop them.
std::set<std::string> subgraph_reads(const ir::Graph& g);

// The float32 constant behind `v`, or nullptr (omitted input, not constant, other dtype).
const Tensor* const_f32(const ir::Graph& g, ir::ValueId v);

// Marks nodes whose outputs nobody reads (and are not graph outputs) removed, repeatedly.
int remove_dead_nodes(ir::Graph& g);

}  // namespace kiln::passes
