// Concat elimination in the CPU interpreter: the Concat layers that passes/concat_in_place.cc
// marked (attribute in_place = one flag per input) get their output allocated when the first
// flagged producer runs; each flagged producer is offered its slice as the output buffer
// (KernelContext::output_buffer) and the Concat then copies only the other inputs.
// Slices are contiguous because every dim of the output before the axis is 1 (row-major).
// Any mismatch found at run time (shape, dtype) falls back to an ordinary Concat.
#pragma once

#include <map>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace kiln {

class ConcatSlices {
 public:
  // Reads the in_place attributes of g's Concat layers (g's nodes are run in index order).
  explicit ConcatSlices(const ir::Graph& g);
  bool empty() const { return concats_.empty(); }
  // The buffer to offer for value v's producer: its slice of the in-place Concat output
  // (allocated on first use), or an undefined tensor.
  Tensor offer(ir::ValueId v);
  // After v's producer returned `t`: the tensor the interpreter keeps for v — the slice (with
  // t's bytes copied in when the kernel did not write there) — or `t` itself when v has no
  // slice or t does not fit it.
  Tensor place(ir::ValueId v, Tensor t);
  // Runs the Concat at node index `node` in place: copies the inputs that are not in their
  // slices yet and sets *out to the full output. False (nothing to do, or an input does not
  // fit its slice): the caller runs the Concat kernel.
  bool run_concat(size_t node, const std::vector<const Tensor*>& inputs, Tensor* out);

 private:
  struct Concat {
    ir::ValueId out = ir::kNoValue;
    DataType dtype = DataType::kUndefined;
    Shape shape;                  // the output's static shape
    std::vector<Shape> in_shapes;  // static shape of each input
    std::vector<size_t> offsets;  // bytes from the start of the output to each input's slice
    std::vector<bool> placed;     // input k already sits in its slice
    Tensor buffer;                // the output while its producers run
  };
  struct Slot {
    int concat;
    int input;
  };
  Tensor buffer(int c);
  std::vector<Concat> concats_;
  std::map<size_t, int> by_node_;        // node index -> concats_ index
  std::map<ir::ValueId, Slot> slots_;    // flagged input value -> its slice
};

}  // namespace kiln
