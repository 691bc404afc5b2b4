// The CPU reference backend's kernel contract. A kernel is a plain function that reads its
// inputs, computes output shapes from them (data-dependent shapes included) and sets every
// requested output. Kernels are registered explicitly per op family (register_cpu_kernels).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "backends/kernel.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln {

// Executes a subgraph (If/Loop/Scan bodies) with the given inputs, resolving outer-scope
// references through the enclosing execution; returns the subgraph's outputs.
using SubgraphRunner = std::function<StatusOr<std::vector<Tensor>>(const ir::Graph&, const std::vector<Tensor>&)>;

class KernelContextBase {
 public:
  virtual ~KernelContextBase() = default;
};

namespace cpu {

class KernelContext : public KernelContextBase {
 public:
  KernelContext(const ir::Node& node, std::vector<const Tensor*> inputs, std::vector<Tensor>* outputs,
                SubgraphRunner runner)
      : node_(node), inputs_(std::move(inputs)), outputs_(outputs), runner_(std::move(runner)) {}

  const ir::Node& node() const { return node_; }
  int opset() const { return node_.opset; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // nullptr when input i is omitted (empty name) or past the end.
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  bool has_input(int i) const { return input(i) != nullptr; }
  // Input i, which must be present (the executor checks required inputs by schema; a kernel
  // that calls in() on an omitted input gets a clean error from check_inputs()).
  const Tensor& in(int i) const { return *inputs_[i]; }
  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool output_wanted(int i) const { return i < num_outputs() && node_.outputs[i] != ir::kNoValue; }
  void set_output(int i, Tensor t) {
    if (i < static_cast<int>(outputs_->size())) (*outputs_)[i] = std::move(t);
  }
  // Storage for output i of `dtype` and `shape`: the buffer the interpreter offers for it (a
  // slice of an in-place Concat's output, passes/concat_in_place.cc) when its dtype and shape
  // match, else fresh zero-filled storage. Kernels that fill their output in full may use it
  // instead of Tensor(dtype, shape); the offered buffer's contents are unspecified.
  Tensor output_buffer(int i, DataType dtype, const Shape& shape) const {
    if (offered_ && i < static_cast<int>(offered_->size())) {
      const Tensor& t = (*offered_)[i];
      if (t.defined() && t.dtype() == dtype && t.shape() == shape) return t;
    }
    return Tensor(dtype, shape);
  }
  // Buffers the caller offers for the outputs (one per output; undefined = none); see output_buffer.
  void offer_outputs(const std::vector<Tensor>* buffers) { offered_ = buffers; }
  const std::vector<Tensor>* offered_outputs() const { return offered_; }
  // Errors name the node: "node 'conv_17' (Conv): <msg>".
  Status fail(const std::string& msg) const { return invalid_argument(node_.describe() + ": " + msg); }
  Status unsupported_here(const std::string& msg) const { return unsupported(node_.describe() + ": " + msg); }
  // Returns an error unless inputs [0, n) are all present.
  Status require_inputs(int n) const;
  StatusOr<std::vector<Tensor>> run_subgraph(const ir::Graph& g, const std::vector<Tensor>& inputs) const {
    return runner_(g, inputs);
  }

  // Attribute shorthands.
  int64_t attr_int(const std::string& k, int64_t d) const { return node_.attr_int(k, d); }
  float attr_float(const std::string& k, float d) const { return node_.attr_float(k, d); }
  std::string attr_string(const std::string& k, const std::string& d) const { return node_.attr_string(k, d); }
  std::vector<int64_t> attr_ints(const std::string& k, std::vector<int64_t> d = {}) const { return node_.attr_ints(k, std::move(d)); }
  std::vector<float> attr_floats(const std::string& k, std::vector<float> d = {}) const { return node_.attr_floats(k, std::move(d)); }
  bool has_attr(const std::string& k) const { return node_.has_attr(k); }

 private:
  const ir::Node& node_;
  std::vector<const Tensor*> inputs_;
  std::vector<Tensor>* outputs_;
  SubgraphRunner runner_;
  const std::vector<Tensor>* offered_ = nullptr;
};

using KernelFn = Status (*)(KernelContext&);

class KernelRegistry {
 public:
  void add(ir::OpKind op, KernelFn fn) { fns_[static_cast<int>(op)] = fn; }
  KernelFn find(ir::OpKind op) const { return fns_[static_cast<int>(op)]; }
  // The registry with every CPU kernel (built once, on first use; thread-safe).
  static const KernelRegistry& get();

 private:
  KernelFn fns_[ir::kNumOps] = {};
};

// One registration function per op family (explicit, no static initializers).
void register_elementwise_kernels(KernelRegistry& r);  // ops_elementwise.cc: unary, binary, activations, Cast
void register_nn_kernels(KernelRegistry& r);           // ops_nn.cc: Conv, Gemm, MatMul, pooling, norms, softmax
void register_movement_kernels(KernelRegistry& r);     // ops_movement.cc: Reshape, Transpose, Gather, Slice, Pad, Resize...
void register_reduce_kernels(KernelRegistry& r);       // ops_reduce.cc: reductions, ArgMax, TopK, CumSum, Q/DQ, Einsum
void register_control_kernels(KernelRegistry& r);      // ops_control.cc: If/Loop/Scan, RNNs, NMS, signal ops
void register_fused_kernels(KernelRegistry& r);        // ops_fused.cc: internal ops made by fusion passes
void register_sequence_kernels(KernelRegistry& r);     // ops_sequence.cc: sequence/optional ops, TfIdfVectorizer

}  // namespace cpu
}  // namespace kiln
