// Small graphs with independent branches, shared by the aux-stream tests (the CPU planner test
// in tests/unit and the GPU tests) and the precision tests: an Inception-like block and a ResNet
// bottleneck with a downsample branch, built in IR (*_graph) and, for lowering, taken through the
// builder's own pipeline for a CUDA plan config (builder_graph.h).
#pragma once

#include <map>
#include <string>

#include "gpu/builder_graph.h"
#include "passes/pass_test_util.h"

namespace kiln::testing {

using ir::Attribute;
using ir::OpKind;

// conv + bias + ReLU of `in` with k filters of r x r (pad r/2, stride s).
inline ir::ValueId conv_relu(TinyGraph& t, const std::string& name, ir::ValueId in, const Shape& out, int64_t c,
                             int64_t r, int64_t s, uint32_t seed, bool relu = true) {
  std::map<std::string, Attribute> a;
  if (r > 1) a["pads"] = Attribute::of_ints({r / 2, r / 2, r / 2, r / 2});
  if (s > 1) a["strides"] = Attribute::of_ints({s, s});
  auto y = t.node(OpKind::kConv, name,
                  {in, t.constant(name + "_w", random_tensor({out[1], c, r, r}, seed, -0.3f, 0.3f)),
                   t.constant(name + "_b", random_tensor({out[1]}, seed + 100))},
                  out, a);
  return relu ? t.node(OpKind::kRelu, name + "_relu", {y}, out) : y;
}

// x [n, 8, hw, hw] -> stem 3x3 -> four branches (3x3; 1x1 -> 3x3; 1x1 -> 5x5; maxpool -> 1x1)
// -> Concat on channels -> 1x1 head. Outputs: the head and the Concat. As built (before any pass).
inline ir::Graph inception_graph(int64_t n, int64_t hw) {
  TinyGraph t;
  auto x = t.input("x", {n, 8, hw, hw});
  auto stem = conv_relu(t, "stem", x, {n, 16, hw, hw}, 8, 3, 1, 1);
  auto b1 = conv_relu(t, "b1", stem, {n, 16, hw, hw}, 16, 3, 1, 2);
  auto b2 = conv_relu(t, "b2b", conv_relu(t, "b2a", stem, {n, 8, hw, hw}, 16, 1, 1, 3), {n, 32, hw, hw}, 8, 3, 1, 4);
  auto b3 = conv_relu(t, "b3b", conv_relu(t, "b3a", stem, {n, 8, hw, hw}, 16, 1, 1, 5), {n, 16, hw, hw}, 8, 5, 1, 6);
  auto pool = t.node(OpKind::kMaxPool, "pool", {stem}, {n, 16, hw, hw},
                     {{"kernel_shape", Attribute::of_ints({3, 3})}, {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  auto b4 = conv_relu(t, "b4", pool, {n, 16, hw, hw}, 16, 1, 1, 7);
  auto cat = t.node(OpKind::kConcat, "cat", {b1, b2, b3, b4}, {n, 80, hw, hw}, {{"axis", Attribute::of_int(1)}});
  auto head = conv_relu(t, "head", cat, {n, 8, hw, hw}, 80, 1, 1, 8);
  t.g.outputs = {head, cat};
  return t.g;
}

// x [n, 16, hw, hw] -> stem 3x3 -> bottleneck (1x1 -> 3x3 stride 2 -> 1x1) + downsample 1x1
// stride 2 -> ReLU -> 1x1 head (the builder's passes fuse the residual Add into the last conv of
// the main path). As built (before any pass).
inline ir::Graph resnet_block_graph(int64_t n, int64_t hw) {
  TinyGraph t;
  auto x = t.input("x", {n, 16, hw, hw});
  const int64_t h2 = hw / 2;
  auto stem = conv_relu(t, "stem", x, {n, 32, hw, hw}, 16, 3, 1, 11);
  auto c1 = conv_relu(t, "conv1", stem, {n, 16, hw, hw}, 32, 1, 1, 12);
  auto c2 = conv_relu(t, "conv2", c1, {n, 16, h2, h2}, 16, 3, 2, 13);
  auto c3 = conv_relu(t, "conv3", c2, {n, 64, h2, h2}, 16, 1, 1, 14, false);
  auto ds = conv_relu(t, "down", stem, {n, 64, h2, h2}, 32, 1, 2, 15, false);
  auto add = t.node(OpKind::kAdd, "add", {c3, ds}, {n, 64, h2, h2});
  auto r = t.node(OpKind::kRelu, "add_relu", {add}, {n, 64, h2, h2});
  auto head = conv_relu(t, "head", r, {n, 8, h2, h2}, 64, 1, 1, 16);
  t.g.outputs = {head};
  return t.g;
}

// What the builder lowers for a CUDA plan of config `c` (cuda_graph: the builder's passes,
// precisions, layouts); fp32 by default.
inline ir::Graph inception(int64_t n, int64_t hw, const BuilderConfig& c = cuda_config()) {
  return cuda_graph(inception_graph(n, hw), c);
}
inline ir::Graph resnet_block(int64_t n, int64_t hw, const BuilderConfig& c = cuda_config()) {
  return cuda_graph(resnet_block_graph(n, hw), c);
}

}  // namespace kiln::testing
