// ExecutionContext: one inference's shapes, inputs and outputs for a shared Engine. Inputs
// are checked (dtype, rank, every dim against the selected optimization profile) before the
// CPU engine runs the layer graph on the reference interpreter, or the CUDA engine runs its
// device context (execute: host tensors, synchronous; enqueue: bound addresses, asynchronous).
#include <algorithm>

#include "backends/cpu/interpreter.h"
#include "core/checked_size.h"
#include "runtime/engine_impl.h"

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
  addresses_.assign(engine_->io_tensors().size(), nullptr);
  // Static shapes: prepare the device context now, so the first enqueue does not allocate. An
  // error here (out of memory) is reported again by the first execute/enqueue.
  if (engine_->impl_->gpu) (void)prepare_device();
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
  KILN_RETURN_IF_ERROR(checked_numel(shape, "input '" + name + "'").status());
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
  const int i = input_index(engine_->impl_->graph, name);
  if (i < 0) return not_found("'" + name + "' is not an input of the engine (inputs: " + input_names(engine_->impl_->graph) + ")");
  KILN_RETURN_IF_ERROR(check_shape(name, shape));
  shapes_[i] = shape;
  shape_set_[i] = true;
  if (inputs_[i].defined() && inputs_[i].shape() != shape) inputs_[i] = Tensor{};
  if (engine_->impl_->gpu) return prepare_device();
  return Status::Ok();
}

StatusOr<std::vector<Shape>> ExecutionContext::bound_shapes() const {
  const ir::Graph& g = engine_->impl_->graph;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const std::string& name = g.value(g.inputs[i]).name;
    if (shape_set_[i]) {
      shapes.push_back(shapes_[i]);
      continue;
    }
    const ShapeRange* r = engine_->profiles()[profile_].find(name);
    KILN_CHECK(r != nullptr);
    if (r->min != r->max)
      return invalid_argument("input '" + name + "' has a dynamic shape (profile " + std::to_string(profile_) + " range " +
                              shape_str(r->min) + ".." + shape_str(r->max) + "): call set_input_shape first");
    shapes.push_back(r->min);
  }
  return shapes;
}

Status ExecutionContext::prepare_device() {
  auto shapes = bound_shapes();
  if (!shapes.ok()) return Status::Ok();  // not every shape known yet: prepared later
  return gpu::prepare(*engine_->impl_->gpu, gpu_, *shapes);
}

Status ExecutionContext::set_tensor_address(const std::string& name, void* address) {
  const auto& io = engine_->io_tensors();
  size_t i = 0;
  while (i < io.size() && io[i].desc.name != name) ++i;
  if (i == io.size()) {
    std::string names;
    for (const IOTensor& t : io) names += (names.empty() ? "'" : ", '") + t.desc.name + "'";
    return not_found("'" + name + "' is not an input or output of the engine (io tensors: " + names + ")");
  }
  if (!engine_->impl_->gpu)
    return unsupported("tensor '" + name + "': set_tensor_address/enqueue need a CUDA engine, this plan targets " +
                       engine_->header().target.to_string() + " (use set_input/execute)");
  if (!address) return invalid_argument("tensor '" + name + "': the address is null");
  Status s = gpu::check_address(address);
  if (!s.ok()) return s.with_context("tensor '" + name + "'");
  addresses_[i] = address;
  return Status::Ok();
}

void* ExecutionContext::tensor_address(const std::string& name) const {
  const auto& io = engine_->io_tensors();
  for (size_t i = 0; i < io.size(); ++i)
    if (io[i].desc.name == name) return addresses_[i];
  return nullptr;
}

StatusOr<Shape> ExecutionContext::tensor_shape(const std::string& name) const {
  const ir::Graph& g = engine_->impl_->graph;
  const int i = input_index(g, name);
  KILN_ASSIGN_OR_RETURN(std::vector<Shape> shapes, bound_shapes());
  if (i >= 0) return shapes[i];
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    if (g.value(g.outputs[k]).name != name) continue;
    if (engine_->impl_->gpu) {
      if (!gpu_ || gpu::prepared_shapes(*gpu_) != shapes)
        return invalid_argument("output '" + name + "': the device context is not prepared for the input shapes " +
                                "(set_input_shape failed, or the engine could not be lowered for them)");
      return gpu::output_shapes(*gpu_).at(k);
    }
    // CPU engines: the static shape when shape inference fixed it.
    const ir::Value& v = g.value(g.outputs[k]);
    Shape s;
    if (v.shape)
      for (const ir::Dim& d : *v.shape) {
        if (!d.is_known()) return unsupported("output '" + name + "': its shape depends on the data (run execute)");
        s.push_back(d.value);
      }
    else
      return unsupported("output '" + name + "': its shape depends on the data (run execute)");
    return s;
  }
  return not_found("'" + name + "' is not an input or output of the engine");
}

Status ExecutionContext::enqueue(CudaStream stream) {
  if (!engine_->impl_->gpu)
    return unsupported("enqueue needs a CUDA engine, this plan targets " + engine_->header().target.to_string() +
                       " (use set_input/execute)");
  KILN_ASSIGN_OR_RETURN(std::vector<Shape> shapes, bound_shapes());
  const auto& io = engine_->io_tensors();
  std::vector<const void*> in;
  std::vector<void*> out;
  for (size_t i = 0; i < io.size(); ++i) {
    if (!addresses_[i])
      return invalid_argument(std::string(io[i].is_input ? "input" : "output") + " '" + io[i].desc.name +
                              "' has no address (call set_tensor_address before enqueue)");
    if (io[i].is_input) in.push_back(addresses_[i]);
    else out.push_back(addresses_[i]);
  }
  return gpu::enqueue(*engine_->impl_->gpu, gpu_, shapes, in, out, stream);
}

StatusOr<std::vector<LayerTiming>> ExecutionContext::profile_enqueued(CudaStream stream) {
  if (!engine_->impl_->gpu)
    return unsupported("profile_enqueued needs a CUDA engine, this plan targets " +
                       engine_->header().target.to_string());
  return gpu::profile_enqueued(*engine_->impl_->gpu, gpu_, stream);
}

Status ExecutionContext::set_input(const std::string& name, Tensor tensor) {
  const ir::Graph& g = engine_->impl_->graph;
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
  const ir::Graph& g = engine_->impl_->graph;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!inputs_[i].defined())
      return invalid_argument("input '" + g.value(g.inputs[i]).name + "' is not set (call set_input before execute)");
  outputs_.clear();
  timings_.clear();
  if (engine_->impl_->gpu) {
    try {  // host tensors (outputs) allocated past the limits: see below
      return gpu::execute(*engine_->impl_->gpu, gpu_, inputs_, &outputs_, cuda_graph_, profiling_ ? &timings_ : nullptr);
    } catch (const TensorAllocationError& e) {
      return e.status();
    }
  }
  InterpreterOptions opts;
  if (profiling_) {
    // Only top-level layers are timed; subgraph nodes count toward their If/Loop/Scan layer.
    const ir::Node* first = g.nodes.empty() ? nullptr : &g.nodes.front();
    const ir::Node* last = g.nodes.empty() ? nullptr : &g.nodes.back();
    opts.on_node = [this, first, last](const ir::Node& n, const std::vector<Tensor>&, double ms) {
      if (first && &n >= first && &n <= last) timings_.push_back(LayerTiming{n.name, ir::op_name(n.op), "cpu.ref", ms});
    };
  }
  // Kernels' allocation failures are Statuses naming the node (interpreter.cc); this catches the
  // interpreter's own allocations, so nothing thrown leaves the public API.
  StatusOr<std::vector<Tensor>> out = internal_error("not run");
  try {
    out = interpret(g, inputs_, nullptr, opts);
  } catch (const TensorAllocationError& e) {
    return e.status();
  }
  if (!out.ok()) return out.status();
  outputs_ = std::move(out).value();
  return Status::Ok();
}

StatusOr<Tensor> ExecutionContext::output(const std::string& name) const {
  const ir::Graph& g = engine_->impl_->graph;
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
