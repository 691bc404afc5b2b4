// Engine layers of the CUDA path. Each layer holds its descriptors and chosen tactic; enqueue
// reads/writes device memory through the value table (arena offsets or weight pointers).
// Tuning may consult a TimingCache (ExecState::cache): a layer whose signature is cached
// picks the fastest cached tactic without timing.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernels.h"
#include "core/tensor.h"
#include "kiln/status.h"

namespace kiln {
class TimingCache;
}

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
  TimingCache* cache = nullptr;  // build time: measured tactic times to reuse / record (may be null)
  // Load time: the plan's tactic data by key (Layer::export_tactic_data); may be null.
  const std::map<std::string, std::string>* tactic_data = nullptr;
  void* ptr(int v) const;
};

class Layer {
 public:
  virtual ~Layer() = default;
  std::string name, op, tactic;
  std::vector<std::string> origin;
  std::vector<int> ins, outs;  // value indices; -1 for an omitted optional input
  double tuned_ms = 0;
  // Why this layer runs a slower path than its fast tactic ("" = none), for `kiln inspect`.
  std::string fallback;
  // What the layer's measured time depends on (op, shapes, dtypes/layouts, parameters,
  // epilogue, workspace cap): the timing-cache signature.
  virtual std::string signature() const { return op + " " + tactic; }
  // Bytes of workspace the chosen tactic needs (at most the cap it was tuned with).
  virtual size_t workspace() const { return 0; }
  // Build time: time the candidate tactics and keep the fastest (state has scratch buffers).
  virtual Status tune(ExecState& s) { return Status::Ok(); }
  // Build time without tuning: checks that the default tactic runs here (a layer may switch
  // to its fallback path, see `fallback`).
  virtual Status prepare(ExecState& s) { return Status::Ok(); }
  // Load time: re-applies a tactic string this layer reported at build time (with the state
  // export_tactic_data saved, when ExecState::tactic_data has it: then `restored` is set).
  virtual Status use_tactic(const std::string& tactic, ExecState& s) { return Status::Ok(); }
  // Build time, after tuning: state that makes use_tactic fast (a serialized cuDNN execution
  // plan, so a load does not recompile runtime-fused kernels), by a key unique to the tactic.
  virtual void export_tactic_data(std::map<std::string, std::string>* out) const {}
  bool restored = false;
  // Called once after ins/outs are set, before tune/use_tactic/enqueue. Whatever enqueue needs
  // fixed (descriptor attributes naming weights) is set here: enqueue must not modify the layer,
  // because execution contexts on several threads share it.
  virtual void finalize(const std::vector<GVal>& vals) {}
  virtual Status enqueue(ExecState& s) = 0;
};

// The cuBLASLt / CUDA library data type of a storage type (CUDA_R_32F, _16F, _16BF, _32I, _64I).
cudaDataType_t cuda_type(StorageType t);

struct ConvParams {
  int64_t n, c, h, w, k, r, sk, oh, ow;  // input NCHW, K filters of r x sk, output oh x ow
  int64_t pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
  bool has_residual;
  std::string activation;  // "", Relu, or another FusedConv activation (a pointwise pass after the conv)
  float act_alpha, act_beta;
  int64_t c_unpadded = 0;  // > 0: c was zero-padded up from this many channels (input and weights)
};
// cuDNN convolution with fused bias (+ residual z) (+ ReLU); other activations run after it.
// Where cuDNN's fused call has no kernel for the storage type (it reports NOT_SUPPORTED when
// tuned), the layer falls back to cudnnConvolutionForward + Kiln's bias/residual/act epilogue
// and says so in `fallback` and its tactic ("cudnn.conv_bias_act algo=N ... fallback=conv+epilogue").
StatusOr<std::unique_ptr<Layer>> make_conv_layer(const ConvParams& p, StorageType t, bool nhwc, bool tf32);

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

struct GemmParams {
  int64_t m, n, k;
  bool weight_is_nk;  // weight stored [N, K] (Gemm transB=1); else [K, N]
  bool has_bias;
  bool relu;
  bool has_residual = false;  // Y = act(X·W + R + bias), R = input 3, Y's shape (cuBLASLt's C with beta 1)
};
// cuBLASLt matmul Y[M,N] = X[M,K] · W (+ R) (+ bias[N]) (ReLU epilogue optional), tuned over algorithms.
// All operands (bias included) in storage type t; FP32 accumulation (TF32 for fp32 when tf32).
StatusOr<std::unique_ptr<Layer>> make_gemm_layer(const GemmParams& p, StorageType t, bool tf32);

// Several implementations of one layer (same inputs and outputs); tuning times each and keeps
// the fastest, a plan's tactic string re-selects it by its prefix ("cudnn.", "cublaslt.").
std::unique_ptr<Layer> make_choice_layer(std::vector<std::unique_ptr<Layer>> candidates);

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
