// ExecutionContext: one inference's shapes, inputs and outputs for a shared Engine. Inputs
// are checked (dtype, rank, every dim against the selected optimization profile) before the
// CPU engine runs the layer graph on the reference interpreter.
#include <algorithm>

#include "runtime/engine_impl.h"
#include "runtime/interpreter.h"

namespace kiln {
namespace {

int input_index(const ir::Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.value(g.inputs[i]).name == name) return static_cast<int>(i);
  return -1;
}

std::string input_names(const ir::Graph& g) {
  std::string s;
  for (ir::ValueId v : g.inputs) s += (s.empty() ? "'" : ", '") + g.value(v).name + "'";
  return s.empty() ? "none" : s;
}

}  // namespace

ExecutionContext::ExecutionContext(std::shared_ptr<const Engine> engine) : engine_(std::move(engine)) {
  const size_t n = engine_->impl_->graph.inputs.size();
  shapes_.assign(n, Shape{});
  shape_set_.assign(n, false);
  inputs_.assign(n, Tensor{});
}

ExecutionContext::~ExecutionContext() = default;

Status ExecutionContext::set_optimization_profile(int index) {
  const int n = static_cast<int>(engine_->profiles().size());
  if (index < 0 || index >= n)
    return invalid_argument("optimization profile " + std::to_string(index) + " does not exist (the engine has " +
                            std::to_string(n) + ")");
  profile_ = index;
  std::fill(shape_set_.begin(), shape_set_.end(), false);
  std::fill(inputs_.begin(), inputs_.end(), Tensor{});
  return Status::Ok();
}

Status ExecutionContext::check_shape(const std::string& name, const Shape& shape) const {
  const ShapeRange* r = engine_->profiles()[profile_].find(name);
  KILN_CHECK(r != nullptr);  // the plan reader guarantees every profile names every input
  const std::string range = shape_str(r->min) + ".." + shape_str(r->max);
  if (shape.size() != r->min.size())
    return invalid_argument("input '" + name + "': shape " + shape_str(shape) + " has rank " +
                            std::to_string(shape.size()) + ", the engine expects rank " +
                            std::to_string(r->min.size()) + " (profile " + std::to_string(profile_) + " range " +
                            range + ")");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < r->min[d] || shape[d] > r->max[d])
      return invalid_argument("input '" + name + "': dim " + std::to_string(d) + " is " + std::to_string(shape[d]) +
                              ", outside the optimization profile's range " + std::to_string(r->min[d]) + ".." +
                              std::to_string(r->max[d]) + " (shape " + shape_str(shape) + ", profile " +
                              std::to_string(profile_) + " range " + range + ")");
  }
  return Status::Ok();
}

Status ExecutionContext::set_input_shape(const std::string& name, const Shape& shape) {
  const int i = input_index(engine_->graph(), name);
  if (i < 0) return not_found("'" + name + "' is not an input of the engine (inputs: " + input_names(engine_->graph()) + ")");
  KILN_RETURN_IF_ERROR(check_shape(name, shape));
  shapes_[i] = shape;
  shape_set_[i] = true;
  if (inputs_[i].defined() && inputs_[i].shape() != shape) inputs_[i] = Tensor{};
  return Status::Ok();
}

Status ExecutionContext::set_input(const std::string& name, Tensor tensor) {
  const ir::Graph& g = engine_->graph();
  const int i = input_index(g, name);
  if (i < 0) return not_found("'" + name + "' is not an input of the engine (inputs: " + input_names(g) + ")");
  if (!tensor.defined()) return invalid_argument("input '" + name + "': the tensor is empty (undefined)");
  const DataType want = g.value(g.inputs[i]).dtype;
  if (want != DataType::kUndefined && tensor.dtype() != want)
    return invalid_argument("input '" + name + "': dtype " + dtype_name(tensor.dtype()) + ", the engine expects " +
                            dtype_name(want));
  if (shape_set_[i] && tensor.shape() != shapes_[i])
    return invalid_argument("input '" + name + "': tensor shape " + shape_str(tensor.shape()) +
                            " differs from the shape set with set_input_shape " + shape_str(shapes_[i]));
  KILN_RETURN_IF_ERROR(check_shape(name, tensor.shape()));
  inputs_[i] = std::move(tensor);
  return Status::Ok();
}

Status ExecutionContext::execute() {
  const ir::Graph& g = engine_->graph();
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!inputs_[i].defined())
      return invalid_argument("input '" + g.value(g.inputs[i]).name + "' is not set (call set_input before execute)");
  outputs_.clear();
  timings_.clear();
  InterpreterOptions opts;
  if (profiling_) {
    // Only top-level layers are timed; subgraph nodes count toward their If/Loop/Scan layer.
    const ir::Node* first = g.nodes.empty() ? nullptr : &g.nodes.front();
    const ir::Node* last = g.nodes.empty() ? nullptr : &g.nodes.back();
    opts.on_node = [this, first, last](const ir::Node& n, const std::vector<Tensor>&, double ms) {
      if (first && &n >= first && &n <= last) timings_.push_back(LayerTiming{n.name, ms});
    };
  }
  auto out = interpret(g, inputs_, nullptr, opts);
  if (!out.ok()) return out.status();
  outputs_ = std::move(out).value();
  return Status::Ok();
}

StatusOr<Tensor> ExecutionContext::output(const std::string& name) const {
  const ir::Graph& g = engine_->graph();
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    if (g.value(g.outputs[i]).name != name) continue;
    if (i >= outputs_.size()) return invalid_argument("output '" + name + "' is not computed yet (call execute first)");
    return outputs_[i];
  }
  std::string names;
  for (ir::ValueId v : g.outputs) names += (names.empty() ? "'" : ", '") + g.value(v).name + "'";
  return not_found("'" + name + "' is not an output of the engine (outputs: " + names + ")");
}

}  // namespace kiln
