// The interface between shape inference's driver (shape_inference.cc) and its per-family rule
// files (shape_rules_<family>.cc): a ShapeContext gives a rule its node's input dtypes, symbolic
// shapes, constants and tracked shape-tensor values; the rule sets each output's dtype and shape
// (and, for small int64 shape tensors, their element values). One rule per op in ops.def,
// registered explicitly per family into a ShapeRuleTable indexed by OpKind.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::ir {

// The value of one element of a small integer tensor, as known before running: a constant
// (any sign: -1 in a Reshape target is a constant), a named dim ("batch"), or unknown.
struct SymInt {
  enum class Kind : uint8_t { kUnknown, kConst, kSym };
  Kind kind = Kind::kUnknown;
  int64_t c = 0;
  std::string sym;

  static SymInt unknown() { return {}; }
  static SymInt constant(int64_t v) { return {Kind::kConst, v, {}}; }
  static SymInt symbol(std::string s) { return {Kind::kSym, 0, std::move(s)}; }
  static SymInt from_dim(const Dim& d);
  bool is_const() const { return kind == Kind::kConst; }
  bool is_const(int64_t v) const { return kind == Kind::kConst && c == v; }
  // A shape dim: constants >= 0 stay known, symbols stay symbols, anything else is unknown.
  Dim to_dim() const;
  bool operator==(const SymInt& o) const { return kind == o.kind && c == o.c && sym == o.sym; }
};
using SymValues = std::vector<SymInt>;  // elements in row-major order

// Symbolic integer arithmetic: exact on constants, identities (x+0, x*1, x/1) on symbols,
// unknown otherwise (no invented symbols).
SymInt sym_add(const SymInt& a, const SymInt& b);
SymInt sym_sub(const SymInt& a, const SymInt& b);
SymInt sym_mul(const SymInt& a, const SymInt& b);
SymInt sym_div(const SymInt& a, const SymInt& b);  // ONNX integer Div: truncates toward zero

// Product / sum of dims; unknown unless every factor is known (or a single symbol times 1s).
Dim dim_product(const SymShape& s, size_t begin, size_t end);
Dim dim_add(const Dim& a, const Dim& b);
Dim dim_mul(const Dim& a, const Dim& b);
// A non-negative extent computed in floating point (Resize's scales, Range's count) as an int64:
// false for NaN, negative values and values past kMaxTensorElements (casting those is undefined).
bool extent_from_double(double v, int64_t* out);
// Decimal text of a 128-bit intermediate (extents computed without wrapping), for error messages.
std::string wide_str(__int128 v);

// Numpy broadcasting of two dims / shapes: a symbol with 1 gives the symbol; equal symbols
// unify; incompatible known extents return false.
bool broadcast_dim(const Dim& a, const Dim& b, Dim* out);
// Two dims that must be equal (Concat's other axes, MatMul's K): the more informative one.
Dim unify_dim(const Dim& a, const Dim& b);
// Known and different: a proven mismatch.
bool dims_conflict(const Dim& a, const Dim& b);

class ShapeContext {
 public:
  struct Input {
    ValueId id = kNoValue;
    DataType dtype = DataType::kUndefined;
    std::optional<SymShape> shape;
    const Tensor* constant = nullptr;
    const SymValues* values = nullptr;
  };
  // Infers a subgraph (If/Loop/Scan body) given its input types; returns its output types.
  using SubgraphFn = std::function<StatusOr<std::vector<std::pair<DataType, std::optional<SymShape>>>>(
      const Graph&, const std::vector<std::pair<DataType, std::optional<SymShape>>>&, std::shared_ptr<Graph>*)>;

  ShapeContext(Node& node, std::vector<Input> inputs, SubgraphFn subgraph)
      : node_(node), inputs_(std::move(inputs)), subgraph_(std::move(subgraph)) {
    outputs_.resize(node.outputs.size());
  }

  const Node& node() const { return node_; }
  Node& mutable_node() { return node_; }
  int opset() const { return node_.opset; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i].id != kNoValue; }
  DataType dtype(int i) const { return has_input(i) ? inputs_[i].dtype : DataType::kUndefined; }
  // nullopt when the rank is unknown or the input is omitted.
  const std::optional<SymShape>& shape(int i) const;
  std::optional<int> rank(int i) const;
  const Tensor* constant(int i) const { return has_input(i) ? inputs_[i].constant : nullptr; }
  // Tracked elements of a small integer tensor (constants included); nullptr when untracked.
  const SymValues* values(int i) const { return has_input(i) ? inputs_[i].values : nullptr; }
  // All elements of input i as int64 if it is a constant integer tensor (or fully known values).
  std::optional<std::vector<int64_t>> const_ints(int i) const;
  // All elements of input i as doubles if it is a constant tensor.
  std::optional<std::vector<double>> const_doubles(int i) const;

  int num_outputs() const { return static_cast<int>(node_.outputs.size()); }
  bool output_wanted(int i) const { return i < num_outputs() && node_.outputs[i] != kNoValue; }
  void set_output(int i, DataType dtype, std::optional<SymShape> shape);
  void set_values(int i, SymValues v);

  // "node 'conv_17' (Conv): <msg>"
  Status fail(const std::string& msg) const { return invalid_model(node_.describe() + ": " + msg); }
  // Rank of input i or an error when it is known and differs from `expected`.
  Status expect_rank(int i, int expected, const char* what) const;

  StatusOr<std::vector<std::pair<DataType, std::optional<SymShape>>>> infer_subgraph(
      const std::string& attr, const std::vector<std::pair<DataType, std::optional<SymShape>>>& inputs);

  struct Output {
    bool set = false;
    DataType dtype = DataType::kUndefined;
    std::optional<SymShape> shape;
    std::optional<SymValues> values;
  };
  const std::vector<Output>& outputs() const { return outputs_; }

 private:
  Node& node_;
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  SubgraphFn subgraph_;
};

using ShapeRule = Status (*)(ShapeContext&);

class ShapeRuleTable {
 public:
  void add(OpKind op, ShapeRule r) { rules_[static_cast<int>(op)] = r; }
  ShapeRule find(OpKind op) const { return rules_[static_cast<int>(op)]; }
  // Every family registered (built once, on first use; thread-safe).
  static const ShapeRuleTable& get();

 private:
  ShapeRule rules_[kNumOps] = {};
};

// Helpers shared by the rule files.
// Normalizes a possibly negative axis against `rank`; false when out of range.
bool normalize_axis(int64_t axis, int rank, int64_t* out);
// Broadcasts all inputs [first, ctx.num_inputs()) with numpy rules; nullopt if any rank is unknown.
StatusOr<std::optional<SymShape>> broadcast_inputs(const ShapeContext& ctx, int first = 0);
// Axes from an attribute (older opsets) or an input (newer): nullopt when not statically known;
// an empty vector when neither is given.
std::optional<std::vector<int64_t>> axes_from(const ShapeContext& ctx, const char* attr, int input, bool use_input);
// Output shape of a windowed op (Conv/pools): N, C then one dim per spatial axis.
StatusOr<SymShape> window_output_shape(const ShapeContext& ctx, const SymShape& x, const std::vector<int64_t>& kernel,
                                       bool ceil_mode, const Dim& channels);
// Matmul shape with numpy semantics (1-D operands promoted and their dims dropped).
StatusOr<std::optional<SymShape>> matmul_shape(const ShapeContext& ctx, const std::optional<SymShape>& a,
                                               const std::optional<SymShape>& b);
// ONNX TensorProto.DataType code -> DataType.
DataType dtype_from_onnx_code(int64_t code);

void register_elementwise_shape_rules(ShapeRuleTable& t);  // unary, binary, variadic, activations, Cast
void register_movement_shape_rules(ShapeRuleTable& t);     // Reshape, Flatten, Transpose, (Un)Squeeze, Concat, Split, Expand, Tile, Shape...
void register_indexing_shape_rules(ShapeRuleTable& t);     // Slice, Gather*, Scatter*, Pad, Resize, D2S, Range, NonZero...
void register_nn_shape_rules(ShapeRuleTable& t);           // Conv, pools, Gemm, MatMul, norms, RNNs
void register_reduce_shape_rules(ShapeRuleTable& t);       // reductions, ArgMax, TopK, Q/DQ, Einsum, losses
void register_control_shape_rules(ShapeRuleTable& t);      // If/Loop/Scan, NMS, signal ops
void register_sequence_shape_rules(ShapeRuleTable& t);     // sequence/optional ops, TfIdfVectorizer
void register_transformer_shape_rules(ShapeRuleTable& t);  // internal Attention, MatMulBias, RMSNormalization

}  // namespace kiln::ir
