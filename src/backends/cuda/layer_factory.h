// Layer factories (issue 10 item 2, docs/decisions/0042): how an op becomes CUDA layers. A factory
// is one function for one op (or a family of ops): it checks that it supports the node at the
// concrete shapes, precision and layout (an `Unsupported` status naming the node and the reason
// when not: the builder lists every such layer), then creates the engine layers — each a
// `cuda::Layer` listing its tactics by stable id (backends/kernel.h, gpu_layers.h) — through the
// LowerContext. Adding a kernel = one factory file in this directory + one line in
// the table of layer_factories.cc + rows in the op test table (tests/op_table). Every op the CUDA
// path runs has a factory; gpu_model.cc implements LowerContext and handles only the plan's own
// Reformat layers (docs/decisions/0042).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/exact_layers.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/gpu_model.h"
#include "backends/cuda/kernels.h"
#include "core/parallel.h"
#include "ir/graph.h"
#include "kiln/status.h"

namespace kiln::cuda {

// What a factory sees of the lowering in progress. Engine values are ints (indices of the
// model's values); graph values are ir::ValueIds.
class LowerContext {
 public:
  virtual ~LowerContext() = default;
  virtual const ir::Graph& graph() const = 0;
  // The concrete shape of a graph value at the shapes being lowered.
  virtual const Shape& shape(ir::ValueId v) const = 0;
  // The storage type of the layer being lowered (its outputs and weights): its float precision,
  // or kI32 / kI64 / kBool / kF64 when its output 0 is int32 / int64 / bool / float64 (an "exact"
  // node, lowered through the exact factory table; docs/decisions/0051, 0075).
  virtual StorageType storage() const = 0;
  // The float precision of the layer being lowered (storage() unless the node is exact): what an
  // exact node reads float operands in (a comparison of floats, IsNaN).
  virtual StorageType float_storage() const = 0;
  // Graph value `v` row-major in storage `t`: a constant converted on the host (integers exactly,
  // int64 included) and uploaded as it is (not packed in the plan); an activation as stored, or
  // through a cast layer (kernels_exact.h launch_cast, one per value and type) when stored
  // otherwise. Unsupported when `v` does not live on the GPU.
  virtual StatusOr<int> operand_as(ir::ValueId v, StorageType t) = 0;
  // The layout the plan chose for this node's 4-D activations (assign_layouts' "layout"
  // attribute), else `dflt`.
  virtual bool nhwc(const ir::Node& n, bool dflt) const = 0;
  // The engine value holding graph value `v` (converted to storage() when the layer reads
  // another float precision; integer and bool values, and any value read by an exact node, as
  // stored); Unsupported when it does not live on the GPU.
  virtual StatusOr<int> activation(ir::ValueId v) = 0;
  // `value` in NHWC / row-major layout (a Reformat layer is added once per value and layout).
  virtual int as_layout(int value, bool nhwc) = 0;
  // A new engine value: an activation of `shape` in storage `type`, NHWC when `nhwc` and 4-D.
  virtual int new_value(const std::string& name, const Shape& shape, StorageType type, bool nhwc) = 0;
  // The dtype of a graph value at the shapes being lowered.
  virtual DataType dtype(ir::ValueId v) const = 0;
  // The storage type of engine value `value`, and whether it is stored NHWC.
  virtual StorageType value_type(int value) const = 0;
  virtual bool value_nhwc(int value) const = 0;
  // Sets the value alias: `value` is the bytes of `of` from byte `offset` on (a view; no copy).
  virtual void alias(int value, int of, int64_t offset = 0) = 0;
  // An operand of an elementwise layer with output shape `out` in `out_nhwc` layout: a constant
  // uploaded in that physical order (packed in the plan), or the activation in the output's
  // layout; `phys` receives its physical shape, broadcast-padded to the output's rank.
  virtual StatusOr<int> pointwise_operand(ir::ValueId v, const Shape& out, bool out_nhwc, Shape* phys) = 0;
  // An input in row-major order: a constant uploaded as a weight in storage() (packed in the plan,
  // docs/decisions/0040), else the activation, reformatted out of NHWC.
  virtual StatusOr<int> row_major_operand(ir::ValueId v) = 0;
  // Output k of `n` as a new row-major value in storage(), bound to the graph value.
  virtual int new_output(const ir::Node& n, size_t k = 0) = 0;
  // Graph value `v` is now engine value `value` (later layers read it).
  virtual void bind(ir::ValueId v, int value) = 0;
  // Appends a layer reading engine values `ins` and writing `outs`; `origin` names the ONNX
  // nodes it stands for.
  virtual void add_layer(std::unique_ptr<Layer> layer, const std::string& name, std::vector<int> ins,
                         std::vector<int> outs, std::vector<std::string> origin) = 0;

  // ---- for the weight-carrying and layout-following factories (conv, GEMM, pointwise, concat, ...)
  // The concrete shapes and dtypes of every graph value (indexed by ir::ValueId).
  virtual const ValueShapes& value_shapes() const = 0;
  // The build options: tactic sources, TF32, the workspace limit.
  virtual const GpuBuildOptions& options() const = 0;
  // The shape of engine value `value` (logical NCHW order; a channel-padded input's internal copy
  // has the padded C).
  virtual const Shape& value_shape(int value) const = 0;
  // The engine value graph value `v` is bound to, as stored (no conversion, no layer added); -1
  // when none (constants, values not lowered yet).
  virtual int bound(ir::ValueId v) const = 0;
  // Whether graph input `v` is stored channel-padded (GpuBuildOptions::pad_input_channels: its
  // internal copy is NHWC with C rounded up to a multiple of 8; value_shape gives the padded C).
  virtual bool channel_padded(ir::ValueId v) const = 0;
  // A weight of the layer being lowered, a new engine value of `logical` shape in storage()
  // (NHWC when `nhwc` and 4-D): `count` elements, the plan's packed bytes when it holds them under
  // packed_weight_key(layer, name, storage(), nhwc, logical) (no layout change, no conversion),
  // else make() (count floats in the element order the tactic reads) converted to storage() and,
  // at build, recorded for the plan (docs/decisions/0040). `src` is the graph constant the weight
  // is made from (ir::kNoValue: made by the lowering, e.g. a zero bias). Errors: a packed weight of
  // another size, a constant the plan holds only packed for other layouts, device allocation.
  virtual StatusOr<int> upload(const std::string& name, ir::ValueId src, size_t count, const Shape& logical, bool nhwc,
                               const std::function<const float*()>& make) = 0;
  // `bytes` host bytes uploaded as they are (not converted, not packed in the plan) as a new
  // weight value `name` of `shape` (its GVal's storage type does not describe them: only the layer
  // that asked reads them, e.g. Gather's int64 indices). `what` names them in allocation errors.
  // `graph_constant`: `host` is a graph constant's storage, unchanged while the graph lives, so the
  // engine's device copy is found by address, without hashing the bytes again at every lowering
  // (an 8B model's FP8 weights are 8 GB; WeightCache::get_constant).
  virtual StatusOr<int> upload_raw(const std::string& name, const Shape& shape, const void* host, size_t bytes,
                                   const std::string& what, bool graph_constant = false) = 0;
  // A host buffer of at least `count` floats, reused across the layers of this lowering (valid
  // until the next call): a weight's layout change before upload() without fresh pages per weight.
  virtual float* weight_scratch(size_t count) = 0;
  // The layer just added is a Concat copying inner[i] elements of input i per outer index, each
  // `elem_bytes` bytes: a candidate for concat elimination (docs/decisions/0009).
  virtual void mark_concat(int64_t outer, std::vector<int64_t> inner, int elem_bytes) = 0;
};

// `where` is the node's description for messages ("node 'x' (Softmax): ").
using LayerFactory = Status (*)(LowerContext& ctx, const ir::Node& n, const std::string& where);

// The factory registered for `op` on nodes with float outputs, or null.
LayerFactory find_layer_factory(ir::OpKind op);
// The factory registered for `op` on nodes whose output 0 is int32 / int64 / bool / float64, or null.
LayerFactory find_exact_layer_factory(ir::OpKind op);

// The factories (layer_factories.cc lists them, one line each).
Status lower_quant_linear(LowerContext& ctx, const ir::Node& n, const std::string& where);  // QuantLinear (8-bit)
Status lower_quant_conv(LowerContext& ctx, const ir::Node& n, const std::string& where);    // QuantConv (8-bit, NHWC)
Status lower_softmax(LowerContext& ctx, const ir::Node& n, const std::string& where);  // Softmax, LogSoftmax, Hardmax
Status lower_view(LowerContext& ctx, const ir::Node& n, const std::string& where);     // Reshape, Flatten, Squeeze, ...
Status lower_strided(LowerContext& ctx, const ir::Node& n, const std::string& where);  // Transpose, Slice, Expand
Status lower_pad(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Resize (versions 10-19) and Upsample (7 / 9): the float kernel, or tap lists built by the CPU
// reference's build_taps for cubic, exclude_outside, tf_crop_and_resize, antialias, Resize-10 and
// Upsample (factory_resize.cc).
Status lower_resize(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_reduce(LowerContext& ctx, const ir::Node& n, const std::string& where);   // ReduceSum/Mean/Max/Min/Prod/L1/...
Status lower_layernorm(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_rms_norm(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_pool(LowerContext& ctx, const ir::Node& n, const std::string& where);     // Max/Average/Global pools
Status lower_cast(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_split(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_where(LowerContext& ctx, const ir::Node& n, const std::string& where);    // any condition, any type
Status lower_conv(LowerContext& ctx, const ir::Node& n, const std::string& where);     // Conv, FusedConv
// Conv / FusedConv that lower_conv's 2-D path does not take (1-D, 3-D, runtime weight or bias,
// asymmetric pads) and ConvTranspose: cuDNN's legacy Nd API (factory_conv_nd.cc).
Status lower_conv_nd(LowerContext& ctx, const ir::Node& n, const std::string& where);
// BatchNormalization (inference), InstanceNormalization, LRN, MeanVarianceNormalization
// (factory_nn_norm.cc; Kiln's kernels, kernels_nn.h).
Status lower_nn_norm(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_grid_sample(LowerContext& ctx, const ir::Node& n, const std::string& where);  // GridSample (4-D)
Status lower_gemm(LowerContext& ctx, const ir::Node& n, const std::string& where);     // Gemm, MatMul, MatMulBias
Status lower_attention(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_paged_attention(LowerContext& ctx, const ir::Node& n, const std::string& where);  // PagedAttention
Status lower_rope(LowerContext& ctx, const ir::Node& n, const std::string& where);             // Rope
Status lower_gather(LowerContext& ctx, const ir::Node& n, const std::string& where);
// GatherND, GatherElements: any storage type (float and exact tables), int32 / int64 indices.
Status lower_gather_nd(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_gather_elements(LowerContext& ctx, const ir::Node& n, const std::string& where);
// ScatterElements, Scatter (opset 9-10), ScatterND: any storage type, int32 / int64 indices,
// reduction none / add / mul / max / min (none only on bool; factory_gather_indexed.cc).
Status lower_scatter(LowerContext& ctx, const ir::Node& n, const std::string& where);
// ReverseSequence: any storage type, int32 / int64 lengths (factory_gather_indexed.cc).
Status lower_reverse_sequence(LowerContext& ctx, const ir::Node& n, const std::string& where);
// MaxUnpool (the CPU's last-index-wins for duplicate indices, deterministic; int64 indices).
Status lower_max_unpool(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Pad of int32 / int64 / bool tensors (constant, reflect, edge; elements as bits).
Status lower_pad_exact(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_concat(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_pointwise(LowerContext& ctx, const ir::Node& n, const std::string& where);  // Add, Relu, Clip, ...
Status lower_fused_pointwise(LowerContext& ctx, const ir::Node& n, const std::string& where);
// One FusedPointwise-program layer (ir::pw_apply, the CPU reference's formulas) for an ONNX op the
// fixed pointwise kernel lacks: Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu, Shrink, Sign,
// Round, Ceil, Floor, Tan, Asin..Atanh, Sinh, Cosh, float Mod, PRelu, Clip with activation bounds
// (constant bounds: lower_pointwise), variadic Max / Min / Sum / Mean (up to ir::kMaxPwInputs inputs).
Status lower_pw_op(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Narrow integer ops (docs/decisions/0076, factory_qint.cc; exact table): QuantizeLinear,
// DynamicQuantizeLinear, integer Clip, BitShift, MatMulInteger, QLinearMatMul, ConvInteger,
// QLinearConv, MaxPool of 8- / 16-bit values. DequantizeLinear (float table): an 8- / 16-bit or
// int32 x to float32.
Status lower_narrow_int(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_dequantize_linear(LowerContext& ctx, const ir::Node& n, const std::string& where);
// TfIdfVectorizer over int32 / int64 tokens (pool_int64s; factory_tfidf.cc).
Status lower_tfidf(LowerContext& ctx, const ir::Node& n, const std::string& where);
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (int32 / int64 targets; factory_loss.cc).
Status lower_nll_loss(LowerContext& ctx, const ir::Node& n, const std::string& where);
// DepthToSpace / SpaceToDepth (4-D), Tile with constant repeats: one strided copy, any element type
// (factory_rearrange.cc).
Status lower_depth_space(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_tile(LowerContext& ctx, const ir::Node& n, const std::string& where);
// RNN, GRU, LSTM (every attribute of versions 7 / 14, optional inputs and outputs; Kiln's kernel,
// one block per direction and batch entry; factory_rnn.cc).
Status lower_rnn(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Det (matrices up to kDetMaxDim rows; in double as the CPU reference; factory_linalg.cc).
Status lower_det(LowerContext& ctx, const ir::Node& n, const std::string& where);
// DFT (constant dft_length / axis; naive transform in double as the CPU; factory_linalg.cc).
Status lower_dft(LowerContext& ctx, const ir::Node& n, const std::string& where);
// STFT (constant frame_step / frame_length; naive transform in double as the CPU; factory_linalg.cc).
Status lower_stft(LowerContext& ctx, const ir::Node& n, const std::string& where);
// RoiAlign (avg / max, both coordinate modes; in double as the CPU; factory_linalg.cc).
Status lower_roi_align(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Einsum of float64 operands, one or two inputs (the exact table; factory_linalg.cc, docs/decisions/0075).
Status lower_einsum(LowerContext& ctx, const ir::Node& n, const std::string& where);
// TopK (values in any numeric storage + int64 indices), OneHot, Compress: output extents from a
// constant operand or a value-keyed model's shapes (factory_select.cc, docs/decisions/0074).
Status lower_topk(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_one_hot(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_compress(LowerContext& ctx, const ir::Node& n, const std::string& where);
// NonMaxSuppression (int64 output: the exact table; value-keyed models only; one-thread kernel).
Status lower_nms(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Unique (float or integer values; value-keyed models only; O(n²) slice comparisons).
Status lower_unique(LowerContext& ctx, const ir::Node& n, const std::string& where);
// NonZero (any input storage; value-keyed models only; one-thread kernel; factory_select.cc).
Status lower_nonzero(LowerContext& ctx, const ir::Node& n, const std::string& where);
// EyeLike (2-D; float, integer or bool output).
Status lower_eye_like(LowerContext& ctx, const ir::Node& n, const std::string& where);
// ConstantOfShape (any output type; a fill of the discovered output shape).
Status lower_constant_of_shape(LowerContext& ctx, const ir::Node& n, const std::string& where);
// Exact types (docs/decisions/0051): comparisons, And/Or/Xor/Not, IsNaN/IsInf (bool outputs);
// integer Add/Sub/Mul/Div/Mod/Neg/Abs/Min/Max; Range, CumSum, Trilu (integer or float); ArgMax /
// ArgMin; integer ReduceSum/Max/Min.
Status lower_logical(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_int_arith(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_range(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_cumsum(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_trilu(LowerContext& ctx, const ir::Node& n, const std::string& where);
Status lower_arg_extreme(LowerContext& ctx, const ir::Node& n, const std::string& where);  // ArgMax, ArgMin
Status lower_int_reduce(LowerContext& ctx, const ir::Node& n, const std::string& where);   // ReduceSum/Max/Min of ints

// One broadcast-elementwise exact layer (exact_layers.h) for `n`'s 1 or 2 present inputs, each
// read in storage `t`, writing n's output 0 (factory_logical.cc; the comparison / logical and the
// integer arithmetic factories share it). Unsupported when the shapes do not broadcast.
Status add_exact_elementwise(LowerContext& ctx, const ir::Node& n, ExactOp e, StorageType t, const std::string& where);

// Float activations the CUDA path computes on (float32, float16).
bool is_float(DataType t);
// A 4-D shape whose NCHW and NHWC orders are the same bytes (H*W == 1 or C == 1), or not 4-D.
bool layout_free(const Shape& s);
// The float storage to read graph value `v` in without a conversion: an activation's own float
// storage, float32 for a constant (exact), else the layer's float_storage().
StorageType stored_float_type(const LowerContext& ctx, ir::ValueId v);
// A constant's elements as floats (load_as_double for non-float32 dtypes), in its row-major order.
std::vector<float> floats_of(const Tensor& t);
// parallel_for (core/parallel.h): weight preparation at load time (layout change, fp16/bf16
// conversion) is ~40% of a ResNet-101 plan load.
using kiln::parallel_for;

// The spatial geometry of a Conv / pooling node at input shape `x` [N, C, spatial...] (the CPU
// reference's make_geom, backends/cpu/ops_nn.cc; ONNX Operators.md Conv / MaxPool): strides,
// dilations (when `has_dilations`; else 1), pads and auto_pad (SAME_UPPER / SAME_LOWER put the odd
// unit at the end / the beginning, VALID pads nothing), output extents floored or, with
// `ceil_mode`, ceiled with the last window starting inside the input or the left pad.
// InvalidArgument naming the node for attributes of the wrong length or an empty output.
struct WindowGeometry {
  std::vector<int64_t> in, kernel, stride, dilation, pad_begin, pad_end, out;
};
Status window_geometry(const ir::Node& n, const Shape& x, const std::vector<int64_t>& kernel, bool ceil_mode,
                       bool has_dilations, const std::string& where, WindowGeometry* g);

// Symmetric 2-D pads of a conv/pool node at input shape `in` (auto_pad resolved; ONNX Conv/Pool
// SAME_UPPER / SAME_LOWER / VALID); false if asymmetric.
bool symmetric_pads(const ir::Node& n, const Shape& in, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                    const std::vector<int64_t>& d, int64_t* ph, int64_t* pw);

}  // namespace kiln::cuda
