// The cross-backend op test table (docs/decisions/0036-op-test-table.md): one row per op case
// (a tiny ir::Graph + its inputs, the precisions it runs in, the layout it must get, a
// tolerance per precision). op_table_test.cc runs every row on every backend through the product
// path (build_from_graph -> plan bytes -> Runtime -> Engine -> ExecutionContext) and compares
// with the CPU reference interpreter; cuda_lowering_test.cc checks the CUDA lowering of every
// row without a GPU. Rows live in rows_*.cc, one function per op family.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kiln/tensor.h"
#include "passes/pass_test_util.h"

namespace kiln::testing::op_table {

// The precision a plan is built in (BuilderConfig fp16 / bf16; fp32 with TF32 off). The CPU
// backend computes in float32 whatever the config says, so it runs the kFp32 column only.
enum class Precision { kFp32, kFp16, kBf16 };
const char* precision_name(Precision p);  // "fp32", "fp16", "bf16"

// The storage layout the CUDA plan must give the row's 4-D conv / pool layers: NCHW in fp32,
// NHWC in fp16 / bf16 (passes::assign_layouts with the tensor-core preference, as the builder
// runs it). kAny: the row has no layout-sensitive layer and no layout in its test name.
enum class LayoutRule { kAny, kFollowsPrecision };

// Allowed normalized error per precision: max |got - ref| / max |ref| over every float output
// element (NaN must sit where the reference has NaN). 0 = bit-exact values. Integer and bool
// outputs must always equal the reference exactly.
struct Tolerance {
  double fp32 = 1e-4;
  double fp16 = 2e-2;
  double bf16 = 6e-2;
  double of(Precision p) const { return p == Precision::kFp32 ? fp32 : (p == Precision::kFp16 ? fp16 : bf16); }
};

// bf16 keeps 8 significant bits to fp16's 11: rounding alone is 8x coarser (2^-9 relative), so
// data movement allows 8e-3 and arithmetic 6e-2.
constexpr Tolerance kMoveTol{0, 1e-3, 8e-3};
constexpr Tolerance kArithTol{1e-4, 2e-2, 6e-2};

// A graph and the inputs to run it on (one per graph input, in order; float32 or integer).
struct OpCase {
  ir::Graph graph;
  std::vector<Tensor> inputs;
};

struct Row {
  std::string name;                 // test-name part: letters, digits, '_' ("Conv_3x3_pad1")
  std::function<OpCase()> make;     // builds the case (deterministic: fixed seeds)
  Tolerance tol = kArithTol;        // CUDA rows, per precision
  double cpu_tol = 1e-5;            // the CPU plan against the interpreter (passes may reassociate)
  std::vector<Precision> precisions = {Precision::kFp32, Precision::kFp16, Precision::kBf16};  // CUDA rows
  LayoutRule layout = LayoutRule::kAny;
  // Ops (ir::op_name) the built plan must contain as layers, on every backend: what the row is
  // about survives the optimizer (default: the op of a single-node graph).
  std::vector<std::string> expect_ops;
  // Ops the CUDA plan must contain in fp16 / bf16 (e.g. "Reformat" where NHWC meets a
  // row-major layer).
  std::vector<std::string> expect_ops_16bit;
  // Ops the plan must not contain as layers, on every backend: what a fusion absorbed.
  std::vector<std::string> absent_ops;
  // CUDA: some layer's tactic name contains this (e.g. "+relu": the epilogue ran in the GEMM).
  std::string expect_tactic;
  // CUDA: no layer's tactic contains this (e.g. "-> f32": no output reformat to float32).
  std::string absent_tactic;
  // BuilderConfig::tactic_sources ("" = all): a row about one tactic of a layer that has several
  // (e.g. "kiln": Kiln's fused attention kernel, not the cuBLASLt path) leaves the builder no
  // other; expect_tactic then checks that it ran.
  std::string tactic_sources;
  // BuilderConfig::opt_level / disabled_passes: a row that must reach the backend as written
  // (an unoptimized block, an op a fusion would rewrite) turns the optimizer down.
  int opt_level = 2;
  std::set<std::string> disabled_passes;
  bool quant_conv = false;  // BuilderConfig::quant_conv (FP8 QuantConv rows about 8-bit activations)
  size_t workspace_limit = 0;  // BuilderConfig::workspace_limit, bytes (0: none); CUDA layers are checked to keep to it
  bool cuda_graph = false;     // CUDA: also run through a captured CUDA graph and replay it: same bits
  bool cuda = true;            // false: a CPU-only row (the CUDA backend does not lower it)
};

// Every row, in a stable order (rows_*.cc, concatenated).
const std::vector<Row>& all_rows();

// The row families (one per rows_*.cc).
std::vector<Row> movement_rows();     // Transpose, Slice, Expand, Split, Concat, Gather, Pad, Resize, Where, Cast
std::vector<Row> nn_rows();           // Conv / FusedConv epilogues, pooling, Gemm, pointwise, Softmax, Reformat
std::vector<Row> transformer_rows();  // LayerNorm, RMSNorm, Attention, MatMul(Bias), Reduce*, Gelu, blocks, int inputs
std::vector<Row> exact_rows();        // int32 / int64 / bool: comparisons, logic, Where, Cast, int arithmetic, Range, ...
std::vector<Row> gather_indexed_rows();  // GatherND, GatherElements: float / int32 / int64 / bool data
std::vector<Row> select_rows();       // TopK, OneHot, Compress with constant K / depth / condition (rows_select.cc)
std::vector<Row> roi_align_rows();    // RoiAlign (rows_rnn.cc): avg / max, both coordinate modes, ratios
std::vector<Row> dft_rows();          // DFT (rows_rnn.cc): real / complex, inverse, onesided, dft_length
std::vector<Row> det_rows();          // Det (rows_rnn.cc): single, batched, 1x1, singular
std::vector<Row> rnn_rows();          // RNN, GRU, LSTM (rows_rnn.cc): directions, activations, states, layout 1
std::vector<Row> scatter_rows();      // Scatter*, ReverseSequence, MaxUnpool, int Pad (rows_gather.cc)
std::vector<Row> nn_nd_rows();        // N-D Conv / ConvTranspose / pooling, BatchNorm, InstanceNorm, LRN, MVN, runtime Gemm
// float64 / uint64 tensors, integer Pow with a float exponent, cubic / crop Resize, Upsample, Tile
// past 6 dims, rank 7, Cast from bfloat16 (rows_f64.cc, docs/decisions/0075; rows named F64_*).
std::vector<Row> f64_rows();
std::vector<Row> narrow_rows();       // uint8 / int8 / uint16 / int16 / uint32: quantization, Cast, Clip, BitShift, int MatMul / Conv
std::vector<Row> bandwidth_rows();    // fast paths of the bandwidth-bound kernels and the general paths beside them (0082)

// Graphs of rows that other tests also use (tactic choices, concat elimination).
// conv 3x3 + bias + ReLU -> MaxPool 2x2 -> conv 1x1 + residual + ReLU -> GlobalAveragePool ->
// Flatten -> Gemm -> Softmax on x [2, 8, 16, 16]; outputs the Gemm and the Softmax. Layers
// "conv1" and "conv2" after the optimizer.
OpCase small_cnn();
// An Inception block on x [n, 8, hw, hw] (1x1; 1x1 -> 3x3; 1x1 -> 3x3; maxpool -> 1x1, each conv
// + bias + ReLU) concatenated on channels ("cat", first branch `k1` wide with an r1 x r1 kernel),
// then a 1x1 conv; outputs the head and the concat.
OpCase inception_block(int64_t n, int64_t hw, int64_t k1, int64_t r1);

// ---- helpers for building rows

// Magnitudes in [0.1, 1] with random signs, times `scale`, plus `offset`: never zero.
Tensor nonzero(const Shape& s, uint32_t seed, float scale = 1.f, float offset = 0.f);
// A 1-D (or `shape`) int64 / int32 tensor holding `v`.
Tensor ints(const std::vector<int64_t>& v, DataType dt = DataType::kInt64, Shape shape = {});
// A rank-0 int tensor.
Tensor scalar_index(int64_t v, DataType dt);
// A rank-0 float tensor.
Tensor scalar_f(float v);
// Uniform integers in [lo, hi] (int64 or int32).
Tensor int_tensor(DataType dt, const Shape& s, int64_t lo, int64_t hi, uint32_t seed);
// A graph input of an integer (or bool) dtype.
ir::ValueId int_input(TinyGraph& t, const std::string& name, const Shape& s, DataType dt);
// A single-node case: y = op(x, extra inputs...) with x a graph input of `in` and output `out`.
OpCase one_op(ir::OpKind op, const Shape& in, const Shape& out, const std::function<std::vector<ir::ValueId>(TinyGraph&)>& extra,
              std::map<std::string, ir::Attribute> attrs, Tensor x);

}  // namespace kiln::testing::op_table
