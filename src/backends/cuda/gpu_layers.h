// Engine layers of the CUDA path. Each layer holds its descriptors and selected tactic; enqueue
// reads/writes device memory through the value table (arena offsets or weight pointers).
// Which tactic a layer runs is decided by the builder's tactic selector (builder/tactic_selector.h).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels.h"
#include "backends/cuda/kernels_more.h"
#include "backends/kernel.h"
#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln::cuda {

// One tensor of the engine: an activation in the arena or a weight on the device.
struct GVal {
  std::string name;
  Shape shape;            // logical (ONNX) shape
  StorageType type = StorageType::kF32;  // element storage in device memory
  bool nhwc = false;      // rank-4 stored as N,H,W,C
  int64_t offset = -1;    // bytes into the arena (activations)
  void* weight = nullptr; // device pointer (weights)
  int alias_of = -1;      // shares the storage of another value (reshape views, split parts, concat slices)
  int64_t alias_offset = 0;  // bytes into alias_of's storage where this value starts
  size_t bytes() const { return static_cast<size_t>(shape_numel(shape)) * storage_bytes(type); }
};

struct ExecState {
  char* arena = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  cudaStream_t stream = nullptr;
  const std::vector<GVal>* vals = nullptr;
  // Load time: the plan's tactic data by key (Layer::export_tactic_data); may be null.
  const std::map<std::string, std::string>* tactic_data = nullptr;
  // select() runs the tactic once to check that it runs here (build, and shapes a plan did not
  // tune for); false when loading a plan's tactics, which ran at build on this GPU and libraries.
  bool verify = true;
  // Build: a scratch buffer written before each timed run to flush the L2 cache (TuningBudget::
  // cold_l2); null = timed runs back to back.
  void* l2_flush = nullptr;
  size_t l2_flush_bytes = 0;
  void* ptr(int v) const;
};

// One engine layer under the tactic contract (backends/kernel.h, docs/decisions/0014):
// candidates() lists the tactics it can run (stable ids), select() makes one current and checks
// it runs here, enqueue() runs it. The builder's selector times the candidates (through
// TunableLayer, gpu_model.cc); a plan's load selects the recorded id without timing.
class Layer {
 public:
  virtual ~Layer() = default;
  std::string name, op;
  std::string tactic;  // the selected tactic's name, e.g. "cudnn.conv_bias_act algo=1 fp16 nhwc +relu"
  TacticId tactic_id = kNoTactic;  // the selected tactic (kNoTactic before select)
  std::vector<std::string> origin;
  std::vector<int> ins, outs;  // value indices; -1 for an omitted optional input
  double tuned_ms = 0;
  // Why this layer runs a slower path than its fast tactic ("" = none), for `kiln inspect`.
  std::string fallback;
  // What the layer's measured time depends on (op, shapes, dtypes/layouts, parameters,
  // epilogue, workspace cap): the timing-cache signature.
  virtual std::string signature() const { return op + " " + tactic; }
  // Bytes of workspace the selected tactic needs (at most the cap it was selected within);
  // before any select, the most any candidate may need.
  virtual size_t workspace() const { return 0; }
  // The tactics this layer can run, preferred first. Layers with one implementation: their one id.
  virtual StatusOr<std::vector<TacticId>> candidates(ExecState& s) { return std::vector<TacticId>{single_id()}; }
  // Makes `id` current (descriptors, workspace within s.workspace_bytes) and checks it runs here
  // (it may run once on s.stream: the arena holds valid data). Errors: the id is not one of
  // candidates(), or it cannot run (the selector then tries another).
  virtual Status select(TacticId id, ExecState& s) {
    if (id != single_id())
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not one of its tactics");
    tactic_id = id;
    return Status::Ok();
  }
  // Build time, after selection: state that makes a later select fast (a serialized cuDNN
  // execution plan, so a load does not recompile runtime-fused kernels), by a key unique to it.
  virtual void export_tactic_data(std::map<std::string, std::string>* out) const {}
  bool restored = false;  // the last select used the plan's tactic data
  // Called once after ins/outs are set, before candidates/select/enqueue. Whatever enqueue needs
  // fixed (descriptor attributes naming weights) is set here: enqueue must not modify the layer,
  // because execution contexts on several threads share it.
  virtual void finalize(const std::vector<GVal>& vals) {}
  virtual Status enqueue(ExecState& s) = 0;

 protected:
  // The id of a layer with one implementation: Kiln's kernel, variant 0.
  virtual TacticId single_id() const { return make_tactic_id(TacticSource::kKiln, 0); }
};

// Mean device time (ms) of `reps` runs of `run` on s.stream (at least one) after one untimed
// warm-up run. Warm L2 (s.l2_flush null): the runs back to back between two events. Cold L2
// (s.l2_flush set, TuningBudget::cold_l2): each run timed alone, after an untimed write of the
// s.l2_flush_bytes flush buffer. Errors: the CUDA call that failed, or run()'s status.
StatusOr<double> time_runs(ExecState& s, int reps, const std::function<Status()>& run);

// A layer with the device state it runs on, as the builder's tactic selector sees it.
class TunableCudaLayer : public TunableLayer {
 public:
  TunableCudaLayer(Layer& l, ExecState& s) : l_(l), s_(s) {}
  const std::string& name() const override { return l_.name; }
  std::string signature() const override { return l_.signature(); }
  StatusOr<std::vector<TacticId>> candidates() override { return l_.candidates(s_); }
  Status select(TacticId id) override { return l_.select(id, s_); }
  StatusOr<double> time_ms(int iterations) override;

 private:
  Layer& l_;
  ExecState& s_;
};

// Without tuning (shapes a plan did not tune for): the first candidate from `sources` that
// selects. Errors name the layer and each candidate's reason.
Status select_first_that_runs(Layer& l, ExecState& s, const TacticSources& sources);

// The cuBLASLt / CUDA library data type of a storage type (CUDA_R_32F, _16F, _16BF, _32I, _64I).
cudaDataType_t cuda_type(StorageType t);
// The cuDNN data type of a storage type (CUDNN_DATA_FLOAT, _HALF, _BFLOAT16, _INT32, _INT64).
cudnnDataType_t cudnn_type(StorageType t);

struct ConvParams {
  int64_t n, c, h, w, k, r, sk, oh, ow;  // input NCHW, K filters of r x sk, output oh x ow
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  bool has_residual;
  std::string activation;  // "", Relu, or another FusedConv activation (a pointwise pass after the conv)
  float act_alpha, act_beta;
  int64_t c_unpadded = 0;  // > 0: c was zero-padded up from this many channels (input and weights)
};
// cuDNN legacy convolution (source kCudnn). Tactics: variant A < 8 = cudnnConvolutionBiasActivationForward
// with forward algorithm A (bias (+ residual z) (+ ReLU) fused; other activations run after it;
// without ReLU cuDNN runs only IMPLICIT_PRECOMP_GEMM), variant 0x100 + A = cudnnConvolutionForward
// with algorithm A + Kiln's bias/residual/activation epilogue ("... fallback=conv+epilogue"),
// which the layer says in `fallback` when no fused variant ran.
StatusOr<std::unique_ptr<Layer>> make_conv_layer(const ConvParams& p, StorageType t, bool nhwc, bool tf32);

// An N-D convolution (1 to 3 spatial dims) or transposed convolution through cuDNN's legacy
// API (conv_nd_layer.cc, docs/decisions/0070): row-major N, C, spatial... tensors in storage t
// (fp32 with FMA math unless tf32, fp16 / bf16 with float accumulation); the weight is an input
// (constant or activation) in ONNX's layout, [K, C/groups, k...] (Conv) or [C, K/groups, k...]
// (ConvTranspose); the bias (optional input 2) is [K]. A 1-D op runs as 2-D with H = 1.
// Conv: asymmetric pads are an explicit zero-padding copy into the workspace (then cuDNN pads 0).
// ConvTranspose: cudnnConvolutionBackwardData writes the full output (no pads, no
// output_padding) into the workspace; a copy crops pad_begin off (output_padding and a larger
// output_shape read zeros) and adds the bias. One tactic: cuDNN's first heuristic algorithm
// that fits the workspace (its id records the algorithm).
struct ConvNdParams {
  bool transpose = false;
  int nd = 2;                         // spatial dims, 1..3
  int64_t n = 1, c = 1, k = 1;        // batch, input channels, output channels
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1};
  int64_t pad_begin[3] = {0, 0, 0}, pad_end[3] = {0, 0, 0};
  int64_t groups = 1;
  // Conv only (FusedConv's epilogue): y = act(conv + bias (+ residual, input 3)); the bias
  // (input 2) is always present then (zeros when the node has none).
  bool has_bias = false, has_residual = false;
  PointwiseOp act = PointwiseOp::kIdentity;
  float act_alpha = 0, act_beta = 0;
};
// Errors: a geometry cuDNN's output size disagrees with (Unsupported, with both sizes), a cuDNN
// descriptor call that fails.
StatusOr<std::unique_ptr<Layer>> make_conv_nd_layer(const ConvNdParams& p, StorageType t, bool tf32);

// The pointwise op of a FusedConv activation name ("Relu", "Gelu", ...; kIdentity for "" or an
// unknown one, which lower_conv refuses first).
PointwiseOp conv_activation_op(const std::string& a);

// cuDNN graph-API convolution (NHWC fp16/bf16, epilogue bias (+ residual z) (+ ReLU) fused in
// one operation graph), tuned over cuDNN's engine configurations (conv_graph.cc). nullptr when
// the activation or dtype is outside what the graph expresses (then use make_conv_layer alone)
// or when the environment sets KILN_CUDNN_GRAPH=0 (A/B measurements).
std::unique_ptr<Layer> make_conv_graph_layer(const ConvParams& p, cudnnDataType_t io);
// Forgets the per-signature tuning results shared by the graph-API conv layers of this process.
void reset_conv_graph_decisions();

struct PoolParams {
  bool max;  // else average
  bool count_include_pad;
  int64_t n, c, h, w, kh, kw, pad_h, pad_w, stride_h, stride_w, oh, ow;
  // ceil_mode made the output larger than cuDNN's floored size: Kiln's kernel runs it (its
  // windows skip positions past the input, as ONNX's ceil_mode windows do).
  bool ceil_output = false;
};
StatusOr<std::unique_ptr<Layer>> make_pool_layer(const PoolParams& p, StorageType t, bool nhwc);

// A 2-D convolution whose kernel equals its stride, unpadded, dilation 1, one group (ViT's patch
// embedding, 16x16 stride 16): each output pixel reads its own R x S window of the input, so the
// conv is exactly the GEMM Y[N*OH*OW, K] = P[N*OH*OW, R*S*C] x W^T (+ bias) over the windows
// ("patches") gathered into the rows of P — the same products as the conv's, summed by the GEMM
// (docs/decisions/0083). Row order of P's columns follows the weight as uploaded: (r, s, c) for
// NHWC (KRSC), (c, r, s) for NCHW (KCRS).
struct ConvPatches {
  bool on = false;
  bool nchw = false;    // input and output NCHW: the GEMM's [N, OH*OW, K] goes to the workspace, then Y
  StridedDesc gather;   // conv input -> P, row-major [M, R*S*C] (in the workspace)
  StridedDesc scatter;  // nchw only: the GEMM output [N, OH*OW, K] -> Y [N, K, OH*OW]
};
// Whether conv `p` (as lower_conv fills it) is such a patchify conv: kernel == stride with
// R*S > 1 (a 1x1 is already lower_conv's GEMM), no padding, dilation 1, one group.
bool conv_is_patchify(const ConvParams& p);
// The copies of the patchify GEMM of conv `p` (conv_is_patchify) with input and output in NHWC
// (`nhwc`) or NCHW: gather reads the input (logical NCHW dims p.n, p.c, p.h, p.w; only the OH*R x
// OW*S top-left part is read) into P; scatter (NCHW) transposes the GEMM's output into Y.
ConvPatches plan_conv_patches(const ConvParams& p, bool nhwc);

struct GemmParams {
  int64_t m, n, k;
  bool weight_is_nk;  // weight stored [N, K] (Gemm transB=1); else [K, N]
  bool has_bias;
  bool relu;
  bool gelu_tanh = false;  // cuBLASLt's GELU(_BIAS) epilogue (only where cublaslt_gelu_is_tanh())
  bool has_residual = false;  // Y = act(X·W + R + bias), R = input 3, Y's shape (cuBLASLt's C with beta 1)
  // > n: the weight (and bias) are stored padded with zeros to n_pad outputs (W [K, n_pad] or
  // [n_pad, K]), so the layer can also run as a GEMM into an [M, n_pad] workspace (16-byte aligned
  // rows) followed by a copy of the first n columns; 0: stored as [K, n] / [n, K].
  int64_t n_pad = 0;
  // Y (cuBLASLt's C and D) in float32 while X, W (and the bias) are in the layer's 16-bit storage
  // (CUBLAS_COMPUTE_32F, scale 32F: a combination cublasLtMatmul lists): a GEMM whose output is
  // only a graph output declared float32 writes it directly, with no fp16 -> fp32 output reformat
  // (docs/decisions/0083). Not with a bias or a residual.
  bool out_f32 = false;
  // X is gathered from a conv input first (the patchify conv; m, k, n are the GEMM's).
  ConvPatches patches;
  // MatMulBias input 4 (passes::fuse_rmsnorm_gemm; docs/decisions/0092): X is RMS-normalized per
  // row with the norm scale S [K] (an uploaded weight, the last input) and norm_eps first — the
  // skinny GEMM in its prologue, cuBLASLt's tactics by launch_rms_norm into the workspace.
  bool norm = false;
  float norm_eps = 1e-5f;
  // MatMulBias attribute gate (passes::fuse_gated_gemm): Y [M, n / 2] = silu(P[:, j]) · P[:, n / 2 + j]
  // over the product P [M, n] stored in the layer's storage — the skinny GEMM (16-bit) in its
  // epilogue, cuBLASLt's tactics into the workspace and then launch_silu_gate. No residual, no
  // activation, no padded N or float32 output with it.
  bool gate = false;
};
// n rounded up to 64 when its rows would not be 16-byte aligned in storage t (cuBLASLt's fast
// kernels need that: on an H200 GPT-2's LM head, 4096 x 768 x 50,257 fp16, runs 2.51 ms with
// N's leading dim, 0.36 ms with 50,304 — bench/micro/gemm_align.cu); 0 when no padding is needed.
int64_t gemm_padded_n(int64_t n, StorageType t);
// Whether cuBLASLt's CUBLASLT_EPILOGUE_GELU_BIAS computes ONNX Gelu with approximate = "tanh" on
// the current device with the loaded library: cublasLt.h names no formula (docs/decisions/0058),
// so a GEMM with that epilogue runs once in float32 over a sweep of values in [-6, 6] and its
// result is compared with the formula (max abs error <= 2e-5; measured 5e-6 on an H200 with cuBLAS
// 13). Cached per device; false without a device or when any call fails.
bool cublaslt_gelu_is_tanh();
// Tactic variants from this value up are the padded form's (variant - kGemmPaddedVariant = its index
// in cuBLASLt's heuristic list for the padded layouts).
inline constexpr uint32_t kGemmPaddedVariant = 0x100;
// With out_f32 and a padded N, from this value up: the padded GEMM in the 16-bit storage into the
// workspace, then launch_compact_rows_to_f32 into Y (variant - kGemmPaddedF32Variant = the index in
// cuBLASLt's list for that layout).
inline constexpr uint32_t kGemmPaddedF32Variant = 0x200;
// Kiln's skinny GEMM (kernels_gemv.h; source kKiln, variant kGemmGemvVariant + rows per warp: 1,
// 2, 4), offered beside cuBLASLt's list when the weight is stored [N, K], M <= kGemvMaxM, the
// storage is 16-bit and K % 8 == 0 (no GELU epilogue, no conv patches); docs/decisions/0089.
inline constexpr uint32_t kGemmGemvVariant = 0x300;
// cuBLASLt matmul Y[M,N] = X[M,K] · W (+ R) (+ bias[N]) (ReLU epilogue optional); source kCublasLt,
// one tactic per entry of cuBLASLt's heuristic list (variant = index, stable for one version and cap);
// with n_pad, also one per entry for the padded form (variant kGemmPaddedVariant + index: the GEMM
// into the workspace, then launch_compact_rows) and, with out_f32, for the padded 16-bit form
// (kGemmPaddedF32Variant + index). With patches, X is first gathered from the conv input into the
// start of the workspace (and, NCHW, the output transposed from the workspace into Y); the tactics
// then need that much workspace besides cuBLASLt's own, and there are none when it is not there.
// All operands (bias included) in storage type t, Y in t or (out_f32) float32; FP32 accumulation
// (TF32 for fp32 when tf32).
StatusOr<std::unique_ptr<Layer>> make_gemm_layer(const GemmParams& p, StorageType t, bool tf32);

// Several implementations of one layer (same inputs and outputs), each from its own tactic
// source: the candidates are all of theirs, and select() hands an id to the one of its source.
// Each implementation is given with the source of all its tactics (distinct sources).
std::unique_ptr<Layer> make_choice_layer(std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls);

std::unique_ptr<Layer> make_pointwise_layer(PointwiseOp op, const BroadcastDesc& d, StorageType t, float alpha, float beta);
// One FusedPointwise program; ins are the program's inputs in order (physical layout of y).
std::unique_ptr<Layer> make_fused_pointwise_layer(const PwDeviceProgram& p, StorageType t);
// Layout/dtype change of a logical NCHW `nchw` tensor; dst_c > nchw[1] zero-pads the channels
// (NHWC destination only; 0 = no padding).
std::unique_ptr<Layer> make_reformat_layer(const Shape& nchw, StorageType src_t, bool src_nhwc, StorageType dst_t,
                                           bool dst_nhwc, int64_t dst_c = 0);
std::unique_ptr<Layer> make_softmax_layer(int64_t rows, int64_t cols, StorageType t, bool log);
// Concat of row-major inputs along an axis: outer = prod(dims before axis), inner_out = prod(axis..).
// An input given as -1 in Layer::ins is already in place (its producer wrote the slice) and is skipped.
std::unique_ptr<Layer> make_concat_layer(int64_t outer, std::vector<int64_t> inner_ins, int elem_bytes);
// Split of a row-major [outer, sum(inner_outs)] array into dense [outer, inner_outs[i]] outputs.
std::unique_ptr<Layer> make_split_layer(int64_t outer, std::vector<int64_t> inner_outs, int elem_bytes);

}  // namespace kiln::cuda
