// The Runtime loads plans into Engines; an Engine makes ExecutionContexts that run it
// (TensorRT's IRuntime / ICudaEngine / IExecutionContext). An Engine is immutable, shared and
// thread-safe: its weights live once and every context reads them. A context holds one
// inference's shapes, inputs and outputs; use one context per thread.
// Tensors are kiln::Tensor (src/core/tensor.h: host memory, row-major); see
// docs/decisions/0002-runtime-tensor.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kiln/builder.h"
#include "kiln/plan.h"
#include "kiln/status.h"

namespace kiln {

class ExecutionContext;
namespace gpu {
struct ContextState;
}

// One layer as a device engine runs it (CUDA plans; reformat layers included).
struct DeviceLayerInfo {
  std::string name, op, tactic;
  double tuned_ms = 0;         // time measured for the chosen tactic at build, ms (0: not timed)
  std::string fallback;        // why a slower path than the layer's fast tactic runs ("" = none)
  size_t workspace_bytes = 0;  // scratch the chosen tactic uses
};

// Device memory of a CUDA engine at the profile's opt shapes, bytes.
struct DeviceMemoryInfo {
  size_t arena_bytes = 0;           // activation arena per execution context (after reuse)
  size_t activation_bytes_sum = 0;  // sum of every activation (what no reuse would need)
  size_t weight_bytes = 0;          // weights as stored on the device (fp16/bf16 halve them)
  size_t workspace_bytes = 0;       // tactic scratch per execution context
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
  // CUDA plans: the device layers and memory at the opt shapes (empty / zeros for CPU plans).
  std::vector<DeviceLayerInfo> device_layers() const;
  DeviceMemoryInfo device_memory() const;

  std::unique_ptr<ExecutionContext> create_execution_context() const;

  // The layer graph the engine runs (for tools such as `kiln compare`).
  const ir::Graph& graph() const;

  struct Impl;

 private:
  friend class Runtime;
  friend class ExecutionContext;
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Time spent in one layer during the last execute() (profiling on).
struct LayerTiming {
  std::string name;
  double ms = 0;
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
  // Per-layer timing (off by default: it adds a clock read per layer).
  void set_profiling(bool on) { profiling_ = on; }
  const std::vector<LayerTiming>& layer_timings() const { return timings_; }

 private:
  friend class Engine;
  explicit ExecutionContext(std::shared_ptr<const Engine> engine);
  Status check_shape(const std::string& name, const Shape& shape) const;

  std::shared_ptr<const Engine> engine_;
  int profile_ = 0;
  std::vector<Shape> shapes_;        // per engine input: the shape given to set_input_shape
  std::vector<bool> shape_set_;      // whether set_input_shape was called for that input
  std::vector<Tensor> inputs_;       // per engine input
  std::vector<Tensor> outputs_;      // per engine output
  bool profiling_ = false;
  std::vector<LayerTiming> timings_;
  std::shared_ptr<gpu::ContextState> gpu_;  // CUDA engines: the device context for the current shapes
};

class Runtime {
 public:
  // Validates every field of the plan (see kiln/plan.h) and builds the engine; refuses a plan
  // for another target. Never crashes on corrupt bytes.
  static StatusOr<std::shared_ptr<Engine>> deserialize_engine(const std::vector<uint8_t>& plan);
  static StatusOr<std::shared_ptr<Engine>> deserialize_engine(const uint8_t* data, size_t size);
  static StatusOr<std::shared_ptr<Engine>> load_engine(const std::string& path);
};

}  // namespace kiln
