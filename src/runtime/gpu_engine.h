// The CUDA side of Builder and Engine (compiled in every build; without the CUDA backend every
// entry point reports that the GPU is unavailable). A CUDA engine keeps one GpuModel per set of
// input shapes: the profile's opt shapes are lowered at load with the plan's tactics; other
// shapes inside the profile are lowered on first use with heuristic tactics.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::gpu {

// Precision and tuning settings of a CUDA build or engine.
struct GpuSettings {
  bool fp16 = false, bf16 = false, tf32 = true;
  size_t workspace_limit = 0;     // bytes one layer's tactic may use; 0 = the default (1 GiB)
  std::string timing_cache_path;  // build: JSON timing cache to read and rewrite ("" = none)
  // build: step "tuning" (done/total layers, detail = layer name) and "timing cache" log lines.
  std::function<void(const BuildProgress&)> progress;
};

// True when this build has the CUDA backend and a GPU is present.
bool available();
// The plan target of this machine's GPU (backend cuda, compute capability, library versions).
PlanTarget target();

// Build time: lowers the optimized graph at `opt_shapes` (one per graph input), times the
// tactics (reusing / extending the timing cache), and returns one tactic string per graph node
// ("cuda.view" for layers that are views; tuned layers end in " tuned_ms=<ms>").
// Errors list every layer the GPU cannot run.
StatusOr<std::vector<std::string>> select_tactics(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                                  const GpuSettings& settings);

struct EngineState;  // GpuModels by input shapes (thread-safe)
struct ContextState; // one GpuContext for the current shapes

StatusOr<std::shared_ptr<EngineState>> create_engine(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                                     const std::vector<std::string>& tactics, const GpuSettings& settings);
// Runs float32 inputs through the model for their shapes; `ctx` holds the context between calls.
// With `layer_ms`, also fills per-layer device times (layer name, ms).
Status execute(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Tensor>& inputs,
               std::vector<Tensor>* outputs, std::vector<std::pair<std::string, double>>* layer_ms);
// Engine layers of the opt-shape model as the GPU runs them (reformats included), for `kiln inspect`.
std::vector<DeviceLayerInfo> describe_layers(const EngineState& e);
// Device memory of the opt-shape model (arena vs the sum of all activations, weights, workspace).
DeviceMemoryInfo memory(const EngineState& e);

}  // namespace kiln::gpu
