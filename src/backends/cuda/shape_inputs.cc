// Shape-tensor inputs (docs/decisions/0073): small graph inputs read only as shape operands
// (Reshape's shape, Slice's starts, ReduceSum's axes, ...) are bound as constants of the graph a
// value-keyed engine lowers at one call's values, so the layer factories see constant shapes,
// axes and repeats. TensorRT's "shape tensor" inputs, lowering half; the runtime half keys the
// engine's models by the input bytes (gpu_engine.cc, decision 0069). Host code only.
#include <cstring>

#include "backends/cpu/interpreter.h"
#include "backends/cuda/gpu_model.h"
#include "ir/constant_folding.h"

namespace kiln::cuda {

namespace {

// True when input `k` of an `op` node is read only for its value as a shape operand (a shape,
// axes, repeats, pads, sizes, scales, counts): ONNX operator sections of each op. Positions only
// exist at the opsets that take the operand as an input (Slice-10, Squeeze-13, ReduceMean-18,
// ...), so the table needs no opset test.
bool is_shape_operand(ir::OpKind op, size_t k) {
  using ir::OpKind;
  switch (op) {
    case OpKind::kConstantOfShape:  // shape
    case OpKind::kBlackmanWindow:   // size
    case OpKind::kHammingWindow:
    case OpKind::kHannWindow:
      return k == 0;
    case OpKind::kReshape:  // shape
    case OpKind::kExpand:   // shape
    case OpKind::kTile:     // repeats
    case OpKind::kSqueeze:  // axes
    case OpKind::kUnsqueeze:
    case OpKind::kSplit:  // split
    case OpKind::kTopK:   // k
    case OpKind::kOneHot:  // depth
    case OpKind::kCumSum:  // axis
    case OpKind::kUpsample:       // scales (opset 9)
    case OpKind::kReduceL1:       // axes (opset 18; ReduceSum 13)
    case OpKind::kReduceL2:
    case OpKind::kReduceLogSum:
    case OpKind::kReduceLogSumExp:
    case OpKind::kReduceMax:
    case OpKind::kReduceMean:
    case OpKind::kReduceMin:
    case OpKind::kReduceProd:
    case OpKind::kReduceSum:
    case OpKind::kReduceSumSquare:
      return k == 1;
    case OpKind::kSlice:  // starts, ends, axes, steps
      return k >= 1 && k <= 4;
    case OpKind::kMelWeightMatrix:  // every input is a scalar count or frequency
      return k <= 4;
    case OpKind::kPad:  // pads, axes; and constant_value, a scalar the Pad layer takes at lowering
      return k >= 1 && k <= 3;
    case OpKind::kResize:  // roi, scales, sizes (Resize-10: scales)
      return k >= 1 && k <= 3;
    case OpKind::kMaxUnpool:  // output_shape
      return k == 2;
    case OpKind::kDropout:  // ratio, training_mode: scalars the Dropout layer takes at lowering
      return k == 1 || k == 2;
    case OpKind::kSTFT:  // frame_step, frame_length
      return k == 1 || k == 3;
    case OpKind::kIf:  // cond: an If of closed branches then folds (bind_shape_inputs)
      return k == 0;
    default:
      return false;
  }
}

}  // namespace

std::vector<ShapeInput> shape_operand_inputs(const ir::Graph& g) {
  std::vector<ShapeInput> out;
  const auto consumers = g.consumers();
  std::vector<bool> is_output(g.values.size(), false);
  for (ir::ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = true;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::ValueId v = g.inputs[i];
    const ir::Value& val = g.value(v);
    if (val.kind != ir::ValueKind::kTensor || val.constant || is_output[static_cast<size_t>(v)]) continue;
    if (val.shape) {  // a declared size above the limit: never a shape tensor
      int64_t n = 1;
      bool known = true;
      for (const ir::Dim& d : *val.shape) {
        known &= d.is_known();
        if (d.is_known()) n *= d.value;
      }
      if (known && n > kMaxShapeInputElements) continue;
    }
    ShapeInput si;
    si.input = i;
    bool only_shapes = !consumers[static_cast<size_t>(v)].empty();
    for (ir::NodeId c : consumers[static_cast<size_t>(v)]) {
      const ir::Node& n = g.node(c);
      if (n.removed) continue;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k] != v) continue;
        if (!is_shape_operand(n.op, k)) {
          only_shapes = false;
          break;
        }
        if (si.first_use.empty())
          si.first_use = n.describe() + " input " + std::to_string(k);
      }
      if (!only_shapes) break;
    }
    if (only_shapes && !si.first_use.empty()) out.push_back(std::move(si));
  }
  return out;
}

std::string shape_input_dependence(const ir::Graph& g, const std::vector<ShapeInput>& inputs) {
  std::string s;
  for (const ShapeInput& si : inputs)
    s += std::string(s.empty() ? "" : "; ") + "graph input '" + g.value(g.inputs[si.input]).name +
         "' is read as a shape operand (" + si.first_use + ")";
  return s;
}

StatusOr<ir::Graph> bind_shape_inputs(const ir::Graph& g, const std::vector<Tensor>& values) {
  if (values.size() != g.inputs.size())
    return invalid_argument("bind_shape_inputs: " + std::to_string(values.size()) + " input values for a graph of " +
                            std::to_string(g.inputs.size()) + " inputs");
  ir::Graph b = g;
  for (const ShapeInput& si : shape_operand_inputs(g)) {
    const ir::ValueId in = g.inputs[si.input];
    const Tensor& t = values[si.input];
    const ir::Value& val = g.value(in);
    if (t.numel() > kMaxShapeInputElements) continue;  // stays an input: its consumers refuse it by node
    if (val.dtype != DataType::kUndefined && t.dtype() != val.dtype)
      return invalid_argument("graph input '" + val.name + "' is given as " + dtype_name(t.dtype()) + ", declared " +
                              dtype_name(val.dtype));
    // A new constant value; the input itself stays a graph input (staged, read by no layer), so
    // the engine's I/O is unchanged.
    const ir::ValueId c = b.add_value(val.name + ":bound", t.dtype());
    ir::Value& cv = b.value(c);
    auto copy = std::make_shared<Tensor>(t.dtype(), t.shape());  // the caller's storage may be reused
    if (t.nbytes() > 0) std::memcpy(copy->raw(), t.raw(), t.nbytes());
    cv.constant = std::move(copy);
    ir::SymShape sym;
    for (int64_t d : t.shape()) sym.push_back(ir::Dim::known(d));
    cv.shape = sym;
    for (ir::Node& n : b.nodes)
      for (ir::ValueId& x : n.inputs)
        if (x == in) x = c;
  }
  // Nodes computed only from bound values and constants (a window function of its size,
  // MelWeightMatrix, a ConstantOfShape) become constants, as the builder's fold_constants would
  // have made them had the values been initializers. Only those: other constant subgraphs the
  // build left alone (Q/DQ weights) stay as they are.
  std::vector<bool> bound_derived(b.values.size(), false);
  for (size_t v = g.values.size(); v < b.values.size(); ++v) bound_derived[v] = true;
  for (ir::Node& n : b.nodes) {
    if (n.removed) continue;
    bool reads_bound = false;
    for (ir::ValueId x : n.inputs) reads_bound |= x != ir::kNoValue && bound_derived[static_cast<size_t>(x)];
    if (!reads_bound || !ir::fold_constant_node(b, n, reference_evaluator())) continue;
    bound_derived.resize(b.values.size(), false);
    for (ir::ValueId y : n.outputs)
      if (y != ir::kNoValue) bound_derived[static_cast<size_t>(y)] = true;
  }
  return b;
}

}  // namespace kiln::cuda
