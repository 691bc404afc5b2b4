// The Engine's private state, shared by engine.cc and execution_context.cc; tools (e.g. the
// layer graph for `kiln run`'s shape inputs) read it through engine_impl().
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/runtime.h"
#include "plan/plan_format.h"
#include "runtime/gpu_engine.h"

namespace kiln {

struct Engine::Impl {
  PlanHeader header;
  ir::Graph graph;                          // constants share the plan's weights buffer
  std::vector<IOTensor> io;                 // inputs (graph order), then outputs
  std::vector<OptimizationProfile> profiles;
  std::vector<LayerInfo> layers;            // one per graph node
  plan::BuildSettings build;
  uint64_t weights_bytes = 0;
  std::vector<std::vector<Shape>> tuned_shapes;  // Plan::shape_tactics' shapes (opt alone when none)
  std::shared_ptr<gpu::EngineState> gpu;    // set for CUDA plans
  std::vector<Engine::LoadPhase> load_phases;
};

// The engine's internal state (its layer graph: engine_impl(e).graph). Not part of the public API.
const Engine::Impl& engine_impl(const Engine& engine);

}  // namespace kiln
