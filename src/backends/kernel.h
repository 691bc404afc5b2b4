// The one tactic interface every kernel implements, split by phase (TensorRT IPluginV3-style):
//   build time: TacticFactory::supports(), Tactic::workspace_size(), Tactic::prepare()
//   run time:   Tactic::reshape(), Tactic::enqueue() — enqueue never allocates device memory
//               and never synchronizes (the CPU reference tactic allocates host outputs, as a
//               reference interpreter must for data-dependent shapes).
// The builder asks the registry for every factory that supports a layer, times the
// candidates (on a GPU) and records the chosen tactic's name in the plan.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln {

enum class BackendKind : uint8_t { kCpu = 0, kCuda = 1 };
const char* backend_name(BackendKind b);

class KernelContextBase;

// One compiled kernel for one layer.
class Tactic {
 public:
  virtual ~Tactic() = default;
  // Scratch memory this tactic needs at the layer's max shapes (bytes).
  virtual size_t workspace_size() const { return 0; }
  // Build time: pack/quantize weights, query libraries. Called once per engine.
  virtual Status prepare(const ir::Graph& graph, const ir::Node& node) { return Status::Ok(); }
  // Run time: executes the layer. `stream` is a cudaStream_t for CUDA tactics, null on the CPU.
  virtual Status enqueue(KernelContextBase& ctx, void* stream) = 0;
};

// Creates tactics of one kind ("cpu.ref", "cuda.cudnn_conv", ...) for the layers it supports.
class TacticFactory {
 public:
  virtual ~TacticFactory() = default;
  virtual std::string name() const = 0;
  virtual BackendKind backend() const = 0;
  virtual bool supports(const ir::Graph& graph, const ir::Node& node) const = 0;
  virtual std::unique_ptr<Tactic> create(const ir::Graph& graph, const ir::Node& node) const = 0;
};

}  // namespace kiln
