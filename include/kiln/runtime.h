// The Runtime loads plans into Engines; an Engine makes ExecutionContexts that run it
// (TensorRT's IRuntime / ICudaEngine / IExecutionContext). An Engine is immutable, shared and
// thread-safe: its weights live once (on the device for CUDA engines) and every context reads
// them. A context holds one inference's shapes, bindings and its own activation memory (arena);
// use one context per thread, any number of contexts per engine.
// Two ways to run: execute() on host kiln::Tensors (kiln/tensor.h: host memory, row-major;
// synchronous; every engine), and enqueue() on the caller's CUDA stream with device addresses
// bound by tensor name (asynchronous; CUDA engines), see docs/decisions/0002-runtime-tensor.md
// and 0008-enqueue-bindings.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/plan.h"
#include "kiln/status.h"
#include "kiln/tensor.h"

struct CUstream_st;  // cudaStream_t is `CUstream_st*` (cuda_runtime_api.h); no CUDA header needed here

namespace kiln {

// A CUDA stream: pass a cudaStream_t (nullptr is the legacy default stream).
using CudaStream = CUstream_st*;

class ExecutionContext;
namespace gpu {
struct ContextState;
}

// One layer as a device engine runs it (CUDA plans; reformat layers included).
struct DeviceLayerInfo {
  std::string name, op, tactic;
  uint32_t tactic_id = 0xFFFFFFFFu;  // the tactic's stable id (source << 24 | variant), as the plan records it
  double tuned_ms = 0;         // time measured for the chosen tactic at build, ms (0: not timed)
  std::string fallback;        // why a slower path than the layer's fast tactic runs ("" = none)
  size_t workspace_bytes = 0;  // scratch the chosen tactic uses
  int stream = 0;              // 0 = the caller's stream, 1.. = an aux stream (independent branches)
};

// Device memory of a CUDA engine at the profile's opt shapes, bytes.
struct DeviceMemoryInfo {
  size_t arena_bytes = 0;           // activation arena per execution context (after reuse)
  size_t activation_bytes_sum = 0;  // sum of every activation (what no reuse would need)
  size_t weight_bytes = 0;          // weights as stored on the device (fp16/bf16 halve them)
  size_t workspace_bytes = 0;       // tactic scratch per execution context (one per stream)
  int aux_streams = 0;              // aux streams each execution context runs branches on
};

// An input or output of the engine.
struct IOTensor {
  TensorDesc desc;
  bool is_input = true;
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const PlanHeader& header() const;
  // Inputs first (in the model's order), then outputs.
  const std::vector<IOTensor>& io_tensors() const;
  const IOTensor* find_io(const std::string& name) const;
  // Every profile names every input (static inputs with min = opt = max).
  const std::vector<OptimizationProfile>& profiles() const;
  const std::vector<LayerInfo>& layers() const;
  size_t weights_bytes() const;  // bytes of constant tensors held by the engine
  // Build settings recorded in the plan.
  bool fp16() const;
  bool bf16() const;
  bool tf32() const;
  bool fp8() const;
  bool int8() const;
  int opt_level() const;
  uint64_t workspace_limit() const;  // bytes; 0 = no limit
  int max_aux_streams() const;       // CUDA aux streams allowed (-1: the builder decides, 0: none)
  // CUDA plans: the device layers and memory at the opt shapes (empty / zeros for CPU plans).
  std::vector<DeviceLayerInfo> device_layers() const;
  DeviceMemoryInfo device_memory() const;
  // Where the load of this engine went, in ms, in order: "read" (file, load_engine only),
  // "parse" (header, checksum, sections), then for CUDA plans "device" (the CUDA driver, context and
  // cuDNN / cuBLASLt loading: paid once per process, ~0 for later engines), "shapes" (value shapes at the
  // opt shapes), "lower" (lowering and the memory plan), "weights" (uploading the plan's packed
  // weights; layout change and fp16/bf16 conversion for any it lacks) and "tactics" (each layer's
  // tactic set up on the device; includes creating the library handles).
  struct LoadPhase {
    std::string name;
    double ms = 0;
  };
  const std::vector<LoadPhase>& load_phases() const;
  // CUDA plans: how many layers' tactics were restored from the plan's serialized tactic data
  // (cuDNN execution plans, cuBLASLt algorithms) and how many were rebuilt from their heuristic rank.
  int tactics_restored() const;
  int tactics_rebuilt() const;
  // CUDA plans: weights the load uploaded as the plan stores them (packed for their tactics, no
  // conversion), and the input shapes the plan's tactics were tuned at (opt first; only opt for
  // fixed shapes). A context at other shapes runs the nearest tuned set's tactics.
  int weights_uploaded_packed() const;
  std::vector<std::vector<Shape>> tuned_shapes() const;
  // CUDA plans: ms the first use of each input-shape set took (lowering with its tactics, weights
  // shared), in the order first used; opt's is the load itself and not listed.
  std::vector<std::pair<std::vector<Shape>, double>> shape_setup_ms() const;

  std::unique_ptr<ExecutionContext> create_execution_context() const;

  // Internal state (plan sections, layer graph, device model); tools reach it through
  // engine_impl() in src/runtime/engine_impl.h.
  struct Impl;

 private:
  friend class Runtime;
  friend class ExecutionContext;
  friend const Impl& engine_impl(const Engine& engine);
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Time spent in one layer during the last execute() (profiling on). CUDA engines list the layers
// the GPU runs (reformats included) with device times from CUDA events; CPU engines the plan's
// layers with host wall-clock times.
struct LayerTiming {
  std::string name;
  std::string op;      // "Conv", "Reformat", ...
  std::string tactic;  // the layer's chosen implementation ("cpu.ref", "cudnn....", "cublaslt....")
  double ms = 0;       // milliseconds
};

class ExecutionContext {
 public:
  ~ExecutionContext();

  // Selects the optimization profile whose ranges apply (default 0); clears set shapes.
  Status set_optimization_profile(int index);
  int optimization_profile() const { return profile_; }
  // Fixes the shape of input `name` for the next execute(). Errors name the input, the dim
  // and the profile's bounds when `shape` lies outside the range.
  Status set_input_shape(const std::string& name, const Shape& shape);
  // Binds input `name` (checked: dtype; shape equal to the one given to set_input_shape, if
  // any, and inside the profile's range). Rebinding with another shape is allowed when no
  // shape was set explicitly.
  Status set_input(const std::string& name, Tensor tensor);
  // Runs the engine on the bound inputs. Errors name the missing input or the failing layer.
  Status execute();
  // Output `name` of the last execute().
  StatusOr<Tensor> output(const std::string& name) const;
  // Per-layer timing (off by default). CPU engines add a clock read per layer; CUDA engines run
  // the layers once more after execute(), outside any CUDA graph, with an event pair per layer.
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<LayerTiming>& layer_timings() const { return timings_; }
  // CUDA engines: execute() captures the layers into a CUDA graph on its first run for the
  // current shapes and replays the graph afterwards (off by default; CPU engines ignore it).
  void set_cuda_graph(bool on) { cuda_graph_ = on; }

  // ---- Asynchronous execution on the caller's stream (CUDA engines; TensorRT's enqueueV3) ----
  // Binds tensor `name` (an input or output of the engine) to `address`: device memory
  // (cudaMalloc) or pinned host memory (cudaMallocHost / cudaHostRegister) holding a row-major
  // tensor of tensor_shape(name), NCHW for images, in the io tensor's dtype (io_tensors(): the
  // model's declared dtype — float32, float16, int32, int64, ... — or the one
  // BuilderConfig::output_types gave an output; not checkable from a raw address). Errors: not an
  // io tensor, a null or pageable-host address, a CPU engine. The binding stays until rebound.
  Status set_tensor_address(const std::string& name, void* address);
  // The address bound to `name` (nullptr when unbound or not an io tensor).
  void* tensor_address(const std::string& name) const;
  // The shape `name` has for the next enqueue: an input's shape from set_input_shape (or its
  // static shape); an output's shape computed from the input shapes. Errors name an input whose
  // dynamic shape is not set yet.
  StatusOr<Shape> tensor_shape(const std::string& name) const;
  // Enqueues one inference on `stream`: copies each bound input into the context's arena, runs
  // every layer, copies each output to its bound address, all asynchronously on `stream`.
  // Returns without waiting for the GPU; the caller synchronizes (cudaStreamSynchronize or an
  // event) before reading outputs or rewriting inputs. Never allocates and never synchronizes
  // once the context is prepared for the current input shapes (set_input_shape prepares it as
  // soon as every input's shape is known; a context of an engine with static shapes is prepared
  // at creation), so enqueue may itself be captured into a CUDA graph. A context is not
  // reentrant: one enqueue in flight per context (its arena), as many contexts as streams.
  // Errors (Status, nothing enqueued): a tensor without an address (named), an input whose
  // dynamic shape is unset, a CPU engine; a failing CUDA call names the layer.
  Status enqueue(CudaStream stream);
  // Per-layer device times of the last enqueue's work (CUDA engines): every layer runs once more
  // on `stream`, in order, over the inputs that enqueue copied into the context's arena, with an
  // event pair per layer and the layers enqueued behind a spin so they run back to back (as a
  // CUDA graph runs them: the times exclude host launch latency). Synchronizes `stream`. The
  // outputs are computed again, not copied out; layers that write state (an LLM step's KV append)
  // write the same values again. Errors: a CPU engine (Unsupported), no enqueue yet
  // (InvalidArgument).
  StatusOr<std::vector<LayerTiming>> profile_enqueued(CudaStream stream);

 private:
  friend class Engine;
  explicit ExecutionContext(std::shared_ptr<const Engine> engine);
  Status check_shape(const std::string& name, const Shape& shape) const;
  // Shapes of every input for enqueue (set, or static); error names the first unknown one.
  StatusOr<std::vector<Shape>> bound_shapes() const;
  // CUDA engines: prepares the device context once every input shape is known.
  Status prepare_device();

  std::shared_ptr<const Engine> engine_;
  int profile_ = 0;
  std::vector<Shape> shapes_;        // per engine input: the shape given to set_input_shape
  std::vector<bool> shape_set_;      // whether set_input_shape was called for that input
  std::vector<Tensor> inputs_;       // per engine input
  std::vector<Tensor> outputs_;      // per engine output
  bool profiling_ = false;
  bool cuda_graph_ = false;
  std::vector<LayerTiming> timings_;
  std::vector<void*> addresses_;     // per io tensor (engine io order): enqueue bindings
  std::shared_ptr<gpu::ContextState> gpu_;  // CUDA engines: the device context for the current shapes
};

class Runtime {
 public:
  // Validates every field of the plan (see kiln/plan.h) and builds the engine; refuses a plan
  // for another target. Never crashes on corrupt bytes.
  // `logger` (may be empty) receives the load's messages: verbose lines say where a CUDA load's
  // lowering went, step by step and per op kind.
  static StatusOr<std::shared_ptr<Engine>> deserialize_engine(const std::vector<uint8_t>& plan, const Logger& logger = {});
  static StatusOr<std::shared_ptr<Engine>> deserialize_engine(const uint8_t* data, size_t size, const Logger& logger = {});
  static StatusOr<std::shared_ptr<Engine>> load_engine(const std::string& path, const Logger& logger = {});

 private:
  // `owner` (may be null) keeps an aligned `data` alive: the engine's weights then stay in it.
  static StatusOr<std::shared_ptr<Engine>> deserialize(const uint8_t* data, size_t size, std::shared_ptr<void> owner,
                                                       const Logger& logger);
};

}  // namespace kiln
