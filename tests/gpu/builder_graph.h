// The graphs the CUDA tests lower come from the builder's own pipeline (builder/build_from_graph.h;
// issue 10 item 5: one path, no test keeps a copy of it): cuda_graph() is what Builder::build lowers
// for a CUDA plan (the builder's passes, each layer's precision decided, NHWC conv / pool and
// Reformat layers in fp16 / bf16), passes_output() the output of the builder's passes alone, for
// the tests of the passes that run after them. Profiles: the config's, else the graph's declared (static) input shapes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "builder/build_from_graph.h"
#include "ir/graph.h"
#include "kiln/builder.h"
#include "kiln/precision.h"

namespace kiln::testing {

// A CUDA plan's config in fp32 (TF32 as the builder's default), fp16 or bf16 (fp16 wins, as in
// BuilderConfig), with per-layer precision constraints.
inline BuilderConfig cuda_config(bool fp16 = false, bool bf16 = false, std::vector<LayerPrecision> rules = {}) {
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = fp16;
  c.bf16 = bf16;
  c.layer_precisions = std::move(rules);
  return c;
}

// What Builder::build lowers for `c` (cuda_layer_graph); a failure is a test failure naming the
// status (and an empty graph).
inline ir::Graph cuda_graph(const ir::Graph& g, const BuilderConfig& c = cuda_config()) {
  auto laid = cuda_layer_graph(g, c, nullptr);
  EXPECT_TRUE(laid.ok()) << laid.status().to_string();
  return laid.ok() ? std::move(*laid) : ir::Graph{};
}

// The builder's passes' output for `c` (no precision decision, no layouts).
inline ir::Graph passes_output(const ir::Graph& g, const BuilderConfig& c = BuilderConfig{}) {
  auto opt = kiln::optimized_graph(g, c);
  EXPECT_TRUE(opt.ok()) << opt.status().to_string();
  return opt.ok() ? std::move(*opt) : ir::Graph{};
}

}  // namespace kiln::testing
