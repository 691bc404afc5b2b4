// The CUDA side of Builder and Engine (compiled in every build; without the CUDA backend every
// entry point reports that the GPU is unavailable). A CUDA engine keeps one GpuModel per set of
// input shapes: the profile's opt shapes are lowered at load with the plan's tactics; other
// shapes inside the profile are lowered on first use, each layer with the first of its candidate
// tactics that runs (the plan's tactics were tuned for opt).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "builder/timing_cache.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "plan/plan_format.h"

namespace kiln::gpu {

// Precision and tuning settings of a CUDA build or engine.
struct GpuSettings {
  // The plan's precision flags: fp16/bf16 give the storage of graph inputs and of layers without
  // a decided precision, tf32 the math of float32 layers. Each layer's own precision is its
  // node attribute "precision" (passes::assign_precisions).
  PrecisionConfig precision;
  size_t workspace_limit = 0;     // bytes one layer's tactic may use; 0 = the default (1 GiB)
  int max_aux_streams = -1;       // aux streams for independent branches; -1 = the builder decides, 0 = none
  std::string timing_cache_path;  // build: JSON timing cache to read and rewrite ("" = in memory only)
  TacticSources sources = TacticSources::all();  // build: tactic sources the selector may use
  TuningBudget budget;                           // build: candidates timed per source, runs per candidate
  Logger logger;                                 // build and load: messages (verbose: load steps)
  // build: step "tuning" (done/total layers, detail = layer name) and "timing cache" log lines.
  std::function<void(const BuildProgress&)> progress;
  // load: the plan's tactic data (serialized cuDNN execution plans by key), so tactics are
  // restored without recompiling their kernels.
  std::map<std::string, std::string> tactic_data;
  // load: the plan's packed weights and the constants it stores only packed (Plan fields).
  std::map<std::string, plan::Plan::PackedBlob> packed_weights;
  std::vector<ir::ValueId> elided_constants;
  // load: tactics tuned at other shapes (Plan::shape_tactics); build: the extra shapes to tune at.
  std::vector<plan::Plan::ShapeTactics> shape_tactics;
  // build: a graph with shape-tensor inputs (docs/decisions/0073) gives an untuned plan whose
  // engine lowers at each call's values (true: target cuda), or Unsupported (false: target auto,
  // which then keeps the CPU plan: without values nothing proves the lowering at build).
  bool lower_at_call_values = true;
};

// What the CUDA build adds to the plan (select_tactics).
struct GpuBuild {
  std::vector<plan::PlanTactic> tactics;  // one per graph node, at the opt shapes
  std::map<std::string, std::string> tactic_data;
  std::map<std::string, plan::Plan::PackedBlob> packed_weights;
  std::vector<ir::ValueId> elided_constants;
  std::vector<plan::Plan::ShapeTactics> shape_tactics;  // opt first, then each of `tuning_shapes`
  int tuned_shape_sets = 0;
};

// Where the time of one CUDA engine load went, in ms (Runtime::deserialize_engine).
struct GpuLoadTimes {
  double device_ms = 0;   // primary context and library loading (first engine of a process)
  double shapes_ms = 0;   // value shapes at the opt shapes
  double lower_ms = 0;    // lowering and memory plan, without `weights_ms`
  double weights_ms = 0;  // weight layout change, fp16/bf16 conversion and upload
  double tactics_ms = 0;  // restoring each layer's tactic (cuDNN plans: deserialize or rebuild)
  int packed_hits = 0;    // weights uploaded from the plan's packed bytes (no conversion)
  int restored = 0;       // tactics restored from the plan's tactic data
  int rebuilt = 0;        // cuDNN-graph / cuBLASLt tactics rebuilt from their heuristic rank (no or unusable data)
};

// True when this build has the CUDA backend and a GPU is present.
bool available();
// The plan target of this machine's GPU (backend cuda, compute capability, library versions).
PlanTarget target();
// The timing-cache header of this machine (GPU name, compute capability, cuDNN / cuBLASLt and
// Kiln versions): what a cache file must match to be used.
TimingCacheHeader timing_cache_header();

// Build time: lowers the optimized graph at `opt_shapes` (one per graph input), has the
// builder's TacticSelector choose each layer's tactic (reusing / extending the timing cache),
// and returns one tactic per graph node (name, id, tuned ms; "cuda.view" without an id for
// layers that are views), the tactics' serialized data, every weight packed as the tactics read
// it, and — for each of `tuning_shapes` (each one shape per graph input) — the layers' tactics
// tuned at those shapes. Errors list every layer the GPU cannot run.
StatusOr<GpuBuild> select_tactics(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                  const std::vector<std::vector<Shape>>& tuning_shapes, const GpuSettings& settings);

struct EngineState;  // GpuModels by input shapes (thread-safe)
struct ContextState; // one GpuContext for the current shapes

StatusOr<std::shared_ptr<EngineState>> create_engine(const ir::Graph& g, const std::vector<Shape>& opt_shapes,
                                                     const std::vector<plan::PlanTactic>& tactics,
                                                     const GpuSettings& settings);
// How long the last create_engine of `e` took, by phase.
GpuLoadTimes load_times(const EngineState& e);
// ms the first use of each other input-shape set took (Engine::shape_setup_ms).
std::vector<std::pair<std::vector<Shape>, double>> shape_setup_ms(const EngineState& e);
// Makes `ctx` the device context (activation arena, workspace, library handles) for `shapes`
// (one per graph input), reusing it when the shapes are unchanged. Allocates; shapes other than
// the profile's opt are lowered on first use (a CPU reference run for shape discovery). An engine
// whose shapes depend on its input values (docs/decisions/0069) is prepared by execute instead
// (OK without doing anything here).
Status prepare(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Shape>& shapes);
// Input shapes a context was prepared for, and its output shapes (graph order).
std::vector<Shape> prepared_shapes(const ContextState& ctx);
std::vector<Shape> output_shapes(const ContextState& ctx);
// Runs host inputs through the model for their shapes (synchronous): every input and output in
// the graph's declared dtype (float32, float16, bfloat16, int32, int64, bool; an input of another
// dtype: an error naming it); for a value-keyed engine (decision 0069) the model is lowered at
// these inputs' values on first use of them; with `cuda_graph`
// the layers are captured into a CUDA graph once per context and replayed. With `timings`, also
// fills per-layer device times of one extra run (every engine layer, reformats included).
Status execute(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Tensor>& inputs,
               std::vector<Tensor>* outputs, bool cuda_graph, std::vector<LayerTiming>* timings);
// ExecutionContext::enqueue: `ctx` must be prepared for the inputs' shapes (else prepares it,
// allocating). Addresses as in cuda::GpuContext::enqueue_device; `stream` is a cudaStream_t.
// Unsupported for an engine whose shapes depend on its input values (decision 0069).
Status enqueue(const EngineState& e, std::shared_ptr<ContextState>& ctx, const std::vector<Shape>& shapes,
               const std::vector<const void*>& inputs, const std::vector<void*>& outputs, CudaStream stream);
// ExecutionContext::profile_enqueued: the layers of `ctx` (prepared by an enqueue) run once more on
// `stream` over what its arena holds, one event pair each (cuda::GpuContext::profile_layers with no
// inputs); synchronizes. InvalidArgument when no enqueue prepared `ctx`.
StatusOr<std::vector<LayerTiming>> profile_enqueued(const EngineState& e, const std::shared_ptr<ContextState>& ctx,
                                                    CudaStream stream);
// OK when `p` is device, managed or pinned host memory (what an async copy can read or write).
Status check_address(const void* p);
// Engine layers of the opt-shape model as the GPU runs them (reformats included), for `kiln inspect`.
std::vector<DeviceLayerInfo> describe_layers(const EngineState& e);
// Device memory of the opt-shape model (arena vs the sum of all activations, weights, workspace).
DeviceMemoryInfo memory(const EngineState& e);

}  // namespace kiln::gpu
