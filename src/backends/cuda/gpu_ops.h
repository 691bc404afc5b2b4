// The CUDA path's transformer / data-movement ops (issue 4): node -> kernel parameters
// (attributes and constant inputs resolved at build time; errors name the node) and the layers
// that run Kiln's own kernels (kernels_more.h) or cuBLASLt batched matmuls. All tensors here
// are row-major (logical order); the lowering reformats NHWC activations before these layers.
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/kernels_linalg.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/kernels_resize.h"
#include "ir/graph.h"

namespace kiln::cuda {

// Shape computations at the concrete build shapes (a GpuModel is built per input-shape set):
// Shape and Size nodes become int64 constants of the shapes in `vs`, then constant folding
// (passes/fold_constants.cc) evaluates everything that depends only on them — Reshape targets,
// Expand shapes, Slice bounds, dynamic-batch Where/Equal chains. Value ids stay stable, so
// `vs` still describes the graph.
Status fold_shape_computations(ir::Graph& g, const ValueShapes& vs);

// The product of dims [from, to) of `s` (1 when empty).
int64_t dims_product(const Shape& s, size_t from, size_t to);
// Row-major element strides of a tensor of shape `s` (the last dim's is 1).
std::vector<int64_t> row_strides(const Shape& s);

// ---- integer and bool tensors (docs/decisions/0051)
// Staging storage of graph input `name` of dtype `dt`: the declared dtype as the caller gives it
// (TensorRT's rule: I/O tensors keep the model's dtypes): kI32/kI64/kBool for int32/int64/bool,
// kF64 for float64, kF16/kBF16 for float16/bfloat16, kF32 for float32 (and an undeclared dtype); a conversion to
// the storage the consumers want is a layer. Other dtypes are refused (Unsupported, naming it).
StatusOr<StorageType> input_storage(const std::string& name, DataType dt);
// The host dtype of a staged input or output of storage `t` (int32, int64, bool, float64,
// float16, bfloat16, float32).
DataType storage_host_dtype(StorageType t);
// The staging storage of a float graph input or output declared `dt`: kF16 / kBF16 for float16 /
// bfloat16, kF32 for anything else (float32; the caller checks the dtype is a float one).
StorageType float_io_storage(DataType dt);
// Narrow integer dtypes computed wide (docs/decisions/0069): uint8 / int8 / uint16 / int16 ->
// int32, uint32 -> int64 (*wide); false for any other dtype.
bool narrow_int_dtype(DataType dt, DataType* wide);
// When `vs` has narrow integer values: checks that computing them in the wide type gives the
// native result after the truncation of the graph outputs to their declared dtype (ring ops and
// integer Casts anywhere; order-dependent ops, indices and Casts from them only on values still
// inside the narrow range: see narrow_ints.cc; the ops of docs/decisions/0076 on canonical
// values), then rewrites their dtypes in `vs` to the wide ones and records the declared ones in
// vs->narrow. Unsupported, naming the node, the input and the dtype, otherwise.
Status widen_narrow_integers(const ir::Graph& g, ValueShapes* vs);
// The exact storage of an int32 / int64 / bool / float64 dtype (false for any other dtype):
// float64 values are stored and computed as doubles, like integers never by a float kernel
// (docs/decisions/0075).
bool exact_storage(DataType dt, StorageType* t);
// Ops that only reinterpret their input 0 (Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Dropout): they may carry an integer activation through as a view.
bool is_int_view(ir::OpKind op);
// Refuses node `n`, whose outputs are float, when an integer or bool activation (is_int[k] for
// input k) reaches an input that computes in float: only Cast and Where (input 0), Gather, GatherND,
// GatherElements and Trilu (input 1), Attention (its bool mask, input 3), PagedAttention (inputs
// 3..6: positions, token_seq, block_table, kv_pools), Rope (input 1, positions), DequantizeLinear (x and zero point), TfIdfVectorizer (tokens) and Range take them. (Nodes with integer / bool outputs go to the exact factory
// table, whose factories check their operands themselves.)
Status check_int_operands(const ir::Node& n, const std::vector<bool>& is_int);

// ---- planning (host side, build time). `in`/`out` are the concrete logical shapes.
// Transpose (ONNX "Transpose"; perm default: reversed axes), rank <= kMaxRank.
StatusOr<StridedDesc> plan_transpose(const ir::Node& n, const Shape& in);
// Slice (ONNX "Slice", opset 1 attributes / 10+ constant inputs, negative steps): the output
// dims come from `out`, the start of each sliced axis is clamped as the spec says.
StatusOr<StridedDesc> plan_slice(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out);
// Expand (ONNX "Expand"): numpy broadcast of `in` to `out` (stride 0 on broadcast dims).
StatusOr<StridedDesc> plan_expand(const ir::Node& n, const Shape& in, const Shape& out);
// Split (ONNX "Split"): one strided copy per output, sizes taken from the output shapes.
StatusOr<std::vector<StridedDesc>> plan_split(const ir::Node& n, const Shape& in, const std::vector<Shape>& outs);

// Reductions over a contiguous axis set as [outer, red, inner] (size-1 axes are ignored when
// checking contiguity). ReduceSum axes: input 1 from opset 13; the others: input 1 from 18.
struct ReducePlan {
  ReduceKind kind = ReduceKind::kSum;
  int64_t outer = 1, red = 1, inner = 1;
  // Reduced axes that are not one contiguous run: the input is first copied by `transpose` (kept
  // axes first, reduced axes last, each in order) into a [outer, red] array (inner == 1).
  bool transposed = false;
  StridedDesc transpose;
};
StatusOr<ReducePlan> plan_reduce(const ir::Node& n, const ir::Graph& g, const Shape& in);


// DepthToSpace (modes DCR / CRD) and SpaceToDepth of a 4-D input, and Tile with constant repeats
// (rank <= kMaxRank once each repeat != 1 is its own dim; more: several copies): one strided copy each (factory_rearrange.cc).
StatusOr<StridedDesc> plan_depth_space(const ir::Node& n, const Shape& in);
StatusOr<StridedDesc> plan_tile(const ir::Node& n, const ir::Graph& g, const Shape& in);

// Gather with int32/int64 indices. Constant indices are normalized here (negative ones counted
// from the end; out of range is an error naming the node). Runtime indices (an activation, e.g.
// token ids) are normalized by the kernel; out-of-range ones yield zeros (launch_gather_runtime).
// `indices` / `indices_dtype`: the indices' concrete shape and dtype.
struct GatherPlan {
  int64_t outer = 1, axis_dim = 1, inner = 1;
  std::vector<int64_t> indices;  // constant indices: normalized, in [0, axis_dim); empty when runtime
  bool runtime = false;          // indices are input 1 of the layer, read on the device
  bool indices_64 = true;        // runtime indices are int64 (else int32)
  int64_t count = 0;             // number of indices
};
StatusOr<GatherPlan> plan_gather(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& indices,
                                 DataType indices_dtype);

// Pad (ONNX "Pad", opset 2 attributes / 11+ inputs / 18 axes): modes constant, reflect, edge.
struct PadPlan {
  PadDesc desc;
  PadMode mode = PadMode::kConstant;
  float value = 0.f;
};
StatusOr<PadPlan> plan_pad(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out);

// Resize of H and W of a 4-D NCHW tensor (ONNX "Resize" opset 11+, nearest or linear; the
// coordinate modes half_pixel, asymmetric, pytorch_half_pixel, align_corners, tf_half_pixel_for_nn).
StatusOr<ResizeDesc> plan_resize(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out);
// Whether Resize / Upsample `n` takes the tap-list path (plan_resize_taps) instead of plan_resize's.
bool resize_needs_taps(const ir::Node& n);
// Resize (versions 10-19) / Upsample (7 / 9) resampling the last two axes of `in` into `out` (the
// leading axes unchanged): the per-axis taps of the CPU reference's build_taps
// (backends/cpu/resize_taps.h) as kernels_resize.h's table (int64 words, then the weights' bits).
// scales / sizes / roi must be constants. Errors name the node (factory_resize.cc).
struct ResizeTapsPlan {
  ResizeTapsDesc d;
  std::vector<int64_t> table;
};
StatusOr<ResizeTapsPlan> plan_resize_taps(const ir::Node& n, const ir::Graph& g, const Shape& in, const Shape& out);

// Einsum of one or two operands of shapes `in` into `out`: the equation parsed as the CPU
// reference does, per-label strides for launch_einsum_f64 (factory_linalg.cc). Errors name the node.
StatusOr<EinsumDesc> plan_einsum(const ir::Node& n, const std::vector<Shape>& in, const Shape& out);

// MatMul (ONNX "MatMul", numpy semantics) with both operands of rank >= 2: Y[b] = A[b] · B[b]
// over the broadcast batch; supported batch patterns: equal batches, B shared (2-D or batch 1:
// folded into M), A shared (one cuBLASLt call per batch entry).
struct BatchedMatMulParams {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;        // cuBLASLt strided-batch count
  bool a_shared = false;    // A has one matrix for every batch entry of B
};
StatusOr<BatchedMatMulParams> plan_batched_matmul(const ir::Node& n, const Shape& a, const Shape& b, const Shape& y);

// ---- layers (ins/outs set by the lowering)
// A layer of Kiln's kernels whose enqueue is one launcher call: `launch` gets the execution
// state and the layer (its ins/outs) and returns the launch's error.
using KernelLaunch = std::function<cudaError_t(ExecState&, const Layer&)>;
std::unique_ptr<Layer> make_kernel_layer(const std::string& op, const std::string& tactic, KernelLaunch launch);
std::unique_ptr<Layer> make_strided_copy_layer(const std::string& op, const StridedDesc& d, int elem_bytes);
// ins: x, scale, bias (-1 when absent).
std::unique_ptr<Layer> make_layernorm_layer(int64_t rows, int64_t cols, float eps, StorageType t);
std::unique_ptr<Layer> make_reduce_layer(const std::string& op, const ReducePlan& p, StorageType t);
// ins: x, indices (normalized int64 weight, or the runtime int32/int64 activation: p.runtime).
std::unique_ptr<Layer> make_gather_layer(const GatherPlan& p, int elem_bytes);
// Dense element conversion of `count` elements (Cast from int32/int64 to the float storage).
std::unique_ptr<Layer> make_convert_layer(int64_t count, StorageType src, StorageType dst);
std::unique_ptr<Layer> make_pad_layer(const PadPlan& p, StorageType t);
std::unique_ptr<Layer> make_resize_layer(const ResizeDesc& d, StorageType t);
// ins: condition (0/1 in the storage dtype), a, b; strides per operand as in BroadcastDesc.
std::unique_ptr<Layer> make_where_layer(const BroadcastDesc& d, const std::vector<int64_t>& c_strides, StorageType t);
// Cast to float16 while storage is float32: rounds each element to the nearest half.
std::unique_ptr<Layer> make_round_to_half_layer(int64_t count);
// ins: A, B (row-major, storage dtype); out: Y.
StatusOr<std::unique_ptr<Layer>> make_batched_matmul_layer(const BatchedMatMulParams& p, StorageType t, bool tf32);

}  // namespace kiln::cuda
