// CUDA engine layers: cuDNN convolution and pooling, cuBLASLt GEMM, and Kiln's own kernels.
// Tactic choice: cuDNN's own benchmark of every forward algorithm
// (cudnnFindConvolutionForwardAlgorithmEx) and CUDA-event timing of cuBLASLt's heuristic top
// candidates; the fastest that fits the workspace wins.
#include "backends/cuda/gpu_layers.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <limits>

#include "backends/cuda/cuda_check.h"
#include "builder/timing_cache.h"

namespace kiln::cuda {

void* ExecState::ptr(int v) const {
  if (v < 0) return nullptr;
  const GVal* g = &(*vals)[v];
  int64_t off = 0;  // alias offsets add up along the chain (a split part of a concat slice)
  while (g->alias_of >= 0) {
    off += g->alias_offset;
    g = &(*vals)[g->alias_of];
  }
  return (g->weight ? static_cast<char*>(g->weight) : arena + g->offset) + off;
}

namespace {

constexpr size_t kMaxConvWorkspace = 256u << 20;  // bytes a single conv tactic may use

cudnnDataType_t cudnn_type(StorageType t) {
  switch (t) {
    case StorageType::kF16: return CUDNN_DATA_HALF;
    case StorageType::kBF16: return CUDNN_DATA_BFLOAT16;
    case StorageType::kI32: return CUDNN_DATA_INT32;
    case StorageType::kI64: return CUDNN_DATA_INT64;
    case StorageType::kF32: break;
  }
  return CUDNN_DATA_FLOAT;
}


// Mean device time (ms) of `reps` back-to-back runs on s.stream after one untimed warm-up run.
StatusOr<float> time_runs(ExecState& s, int reps, const std::function<Status()>& run) {
  KILN_RETURN_IF_ERROR(run());
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  KILN_CUDA_CHECK(cudaEventCreate(&e0));
  cudaError_t ce = cudaEventCreate(&e1);
  if (ce != cudaSuccess) {
    cudaEventDestroy(e0);
    return cuda_status(ce, "cudaEventCreate", __FILE__, __LINE__);
  }
  Status st = cuda_status(cudaEventRecord(e0, s.stream), "cudaEventRecord", __FILE__, __LINE__);
  for (int r = 0; r < reps && st.ok(); ++r) st = run();
  if (st.ok()) st = cuda_status(cudaEventRecord(e1, s.stream), "cudaEventRecord", __FILE__, __LINE__);
  if (st.ok()) st = cuda_status(cudaEventSynchronize(e1), "cudaEventSynchronize", __FILE__, __LINE__);
  float ms = 0;
  if (st.ok()) st = cuda_status(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime", __FILE__, __LINE__);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  KILN_RETURN_IF_ERROR(st);
  return ms / static_cast<float>(std::max(reps, 1));
}

// ---------------------------------------------------------------- convolution (cuDNN)
class ConvLayer : public Layer {
 public:
  ConvLayer(const ConvParams& p, StorageType t, bool nhwc) : p_(p), t_(t), nhwc_(nhwc) {}
  ~ConvLayer() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }

  Status init(bool tf32) {
    tf32_ = tf32;
    const cudnnDataType_t dt = cudnn_type(t_);
    const cudnnTensorFormat_t fmt = nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_));
    KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    KILN_CUDNN_CHECK(cudnnCreateActivationDescriptor(&act_));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, fmt, dt, p_.n, p_.c, p_.h, p_.w));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, fmt, dt, p_.n, p_.k, p_.oh, p_.ow));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b_, fmt, dt, 1, p_.k, 1, 1));
    KILN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, dt, fmt, p_.k, p_.c / p_.groups, p_.r, p_.sk));
    // Float accumulation for every storage type (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configs).
    KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, p_.pad_h, p_.pad_w, p_.stride_h, p_.stride_w, p_.dil_h,
                                                     p_.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(p_.groups)));
    const cudnnMathType_t math =
        t_ != StorageType::kF32 ? CUDNN_TENSOR_OP_MATH : (tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, math));
    fused_relu_ = p_.activation == "Relu";
    KILN_CUDNN_CHECK(cudnnSetActivationDescriptor(
        act_, fused_relu_ ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    if (!fused_relu_ && !p_.activation.empty()) post_act_ = true;
    // cuDNN runs the identity activation only with IMPLICIT_PRECOMP_GEMM.
    algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    op = "FusedConv";
    return update_workspace(nullptr);
  }

  size_t workspace() const override { return ws_; }

  // Runs the fused call once: a storage type or shape the legacy fused API has no kernel for
  // (NOT_SUPPORTED, BAD_PARAM, ...) switches this layer to conv + Kiln epilogue.
  Status prepare(ExecState& s) override {
    if (!fused_) return describe();
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(s.cudnn, x_, w_, conv_, y_, algo_, &ws_);
    if (st == CUDNN_STATUS_SUCCESS) {
      if (ws_ > s.workspace_bytes) return describe();  // sized again by tune; cannot probe here
      st = run_fused(s);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
      fused_ = false;
      fallback = std::string("cudnnConvolutionBiasActivationForward returned ") + cudnnGetErrorString(st) + " for " +
                 storage_name(t_) + (nhwc_ ? " NHWC" : " NCHW") + "; runs cudnnConvolutionForward + Kiln epilogue";
      KILN_RETURN_IF_ERROR(update_workspace(s.cudnn));
    }
    return describe();
  }

  Status tune(ExecState& s) override {
    KILN_RETURN_IF_ERROR(prepare(s));
    const size_t cap = std::min(s.workspace_bytes, kMaxConvWorkspace);
    cap_ = cap;
    const std::string sig = sig_for(cap);
    if (s.cache) {
      double best = std::numeric_limits<double>::infinity();
      int best_algo = -1;
      for (const auto& [t, ms] : s.cache->lookup(sig)) {
        const int a = parse_algo(t);
        if (a >= 0 && ms < best && algo_allowed(a)) {
          best = ms;
          best_algo = a;
        }
      }
      if (best_algo >= 0 && try_algo(s, static_cast<cudnnConvolutionFwdAlgo_t>(best_algo), cap)) {
        tuned_ms = best;
        return describe();
      }
    }
    if (fused_ && !fused_relu_) {  // identity activation pins the algorithm: time it alone
      algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
      KILN_RETURN_IF_ERROR(update_workspace(s.cudnn));
      if (ws_ <= cap) {
        KILN_ASSIGN_OR_RETURN(float ms, time_runs(s, 5, [&] { return enqueue(s); }));
        tuned_ms = ms;
        if (s.cache) s.cache->record(sig, algo_id(algo_), ms);
        return describe();
      }
      // The pinned algorithm needs more than the cap (FP32/TF32 at large batches): the plain
      // convolution may pick any algorithm that fits, followed by Kiln's epilogue.
      fallback = "cudnnConvolutionBiasActivationForward with the identity activation runs only IMPLICIT_PRECOMP_GEMM, "
                 "which needs " + std::to_string(ws_) + " bytes of workspace here (cap " + std::to_string(cap) +
                 "); runs cudnnConvolutionForward + Kiln epilogue";
      fused_ = false;
      ws_ = 0;
    }
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    KILN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(s.cudnn, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, y_,
                                                            s.ptr(outs[0]), CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                            &returned, perf, s.workspace, cap));
    // perf[] is sorted by time (of the plain convolution); the first that fits the cap and
    // runs as the call enqueue makes (the fused one may support fewer algorithms) wins.
    int chosen = -1;
    size_t smallest_need = std::numeric_limits<size_t>::max();
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
      smallest_need = std::min(smallest_need, perf[i].memory);
      if (perf[i].memory > cap || !try_algo(s, perf[i].algo, cap)) continue;
      if (s.cache) s.cache->record(sig, algo_id(perf[i].algo), perf[i].time);
      if (chosen < 0) chosen = i;
    }
    if (chosen < 0) {
      // cuDNN reports algorithms beyond the workspace as ALLOC_FAILED: ask each one's need.
      std::string statuses;
      for (int i = 0; i < returned; ++i)
        statuses += std::string(i ? ", " : "") + "algo " + std::to_string(static_cast<int>(perf[i].algo)) + ": " +
                    cudnnGetErrorString(perf[i].status);
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
        size_t need = 0;
        if (cudnnGetConvolutionForwardWorkspaceSize(s.cudnn, x_, w_, conv_, y_, static_cast<cudnnConvolutionFwdAlgo_t>(a),
                                                    &need) == CUDNN_STATUS_SUCCESS)
          smallest_need = std::min(smallest_need, need);
      }
      if (smallest_need != std::numeric_limits<size_t>::max() && smallest_need > cap)
        return workspace_error(smallest_need, cap);
      return unsupported("layer '" + name + "': no cuDNN forward algorithm ran for " + sig_for(cap) + " (" + statuses +
                         ")");
    }
    if (!try_algo(s, perf[chosen].algo, cap))
      return internal_error("layer '" + name + "': cuDNN algorithm " + std::to_string(static_cast<int>(perf[chosen].algo)) +
                            " stopped running");
    tuned_ms = perf[chosen].time;
    return describe();
  }

  Status use_tactic(const std::string& t, ExecState& s) override {
    const int algo = parse_algo(t);
    if (algo < 0) return invalid_plan("layer '" + name + "': tactic '" + t + "' names no valid cuDNN algorithm");
    if (t.find("fallback=conv+epilogue") != std::string::npos) {
      fused_ = false;
      fallback = std::string("the build found no usable cudnnConvolutionBiasActivationForward for this ") +
                 storage_name(t_) + " conv (no kernel, or its only algorithm needed more workspace than the cap); "
                 "runs cudnnConvolutionForward + Kiln epilogue";
    }
    if (!fused_ || fused_relu_) algo_ = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
    KILN_RETURN_IF_ERROR(update_workspace(s.cudnn));
    return describe();
  }

  Status enqueue(ExecState& s) override {
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    void* y = s.ptr(outs[0]);
    if (!fused_) {
      const float one = 1.f, zero = 0.f;
      KILN_CUDNN_CHECK(cudnnConvolutionForward(s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo_,
                                               s.workspace, ws_, &zero, y_, y));
      const PointwiseOp act = fused_relu_ ? PointwiseOp::kRelu : post_op();
      KILN_CUDA_CHECK(launch_bias_act(y, s.ptr(ins[2]), p_.has_residual ? s.ptr(ins[3]) : nullptr, t_,
                                      p_.n * p_.k * p_.oh * p_.ow, p_.k, p_.oh * p_.ow, nhwc_, act, p_.act_alpha,
                                      p_.act_beta, s.stream));
      return Status::Ok();
    }
    KILN_RETURN_IF_ERROR(cudnn_status(run_fused(s), "cudnnConvolutionBiasActivationForward", __FILE__, __LINE__));
    if (post_act_) {
      BroadcastDesc d;
      d.rank = 1;
      d.out_dims[0] = p_.n * p_.k * p_.oh * p_.ow;
      d.a_strides[0] = 1;
      KILN_CUDA_CHECK(launch_pointwise(post_op(), t_, y, nullptr, y, d, p_.act_alpha, p_.act_beta, s.stream));
    }
    return Status::Ok();
  }

  // Everything the measured time depends on (timing-cache key), with the workspace cap.
  std::string signature() const override { return sig_for(cap_); }
  std::string sig_for(size_t cap) const {
    std::string sig = std::string(fused_ ? "conv_bias_act" : "conv+epilogue") + " x=" + std::to_string(p_.n) + "x" +
                      std::to_string(p_.c) + "x" + std::to_string(p_.h) + "x" + std::to_string(p_.w) +
                      " w=" + std::to_string(p_.k) + "x" + std::to_string(p_.c / p_.groups) + "x" + std::to_string(p_.r) +
                      "x" + std::to_string(p_.sk) + " y=" + std::to_string(p_.oh) + "x" + std::to_string(p_.ow) +
                      " pad=" + std::to_string(p_.pad_h) + "," + std::to_string(p_.pad_w) +
                      " stride=" + std::to_string(p_.stride_h) + "," + std::to_string(p_.stride_w) +
                      " dil=" + std::to_string(p_.dil_h) + "," + std::to_string(p_.dil_w) +
                      " groups=" + std::to_string(p_.groups) + " " + storage_name(t_) + (nhwc_ ? " nhwc" : " nchw");
    if (t_ == StorageType::kF32) sig += tf32_ ? " tf32" : " fma";
    sig += std::string(fused_relu_ ? " +relu" : "") + (p_.has_residual ? " +residual" : "") +
           (post_act_ ? " +" + p_.activation : "") + " ws<=" + std::to_string(cap);
    return sig;
  }

 private:
  cudnnStatus_t run_fused(ExecState& s) {
    const float one = 1.f, zero = 0.f;
    void* y = s.ptr(outs[0]);
    const void* z = p_.has_residual ? s.ptr(ins[3]) : y;
    return cudnnConvolutionBiasActivationForward(s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo_,
                                                 s.workspace, ws_, p_.has_residual ? &one : &zero, y_, z, b_,
                                                 s.ptr(ins[2]), act_, y_, y);
  }
  // Selects `a` if it fits the cap and one enqueue-equivalent call succeeds (fused or plain).
  bool try_algo(ExecState& s, cudnnConvolutionFwdAlgo_t a, size_t cap) {
    const cudnnConvolutionFwdAlgo_t old_algo = algo_;
    const size_t old_ws = ws_;
    algo_ = a;
    bool ok = cudnnGetConvolutionForwardWorkspaceSize(s.cudnn, x_, w_, conv_, y_, algo_, &ws_) == CUDNN_STATUS_SUCCESS &&
              ws_ <= cap && cudnnSetStream(s.cudnn, s.stream) == CUDNN_STATUS_SUCCESS;
    if (ok && fused_) {
      ok = run_fused(s) == CUDNN_STATUS_SUCCESS;
    } else if (ok) {
      const float one = 1.f, zero = 0.f;
      ok = cudnnConvolutionForward(s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo_, s.workspace, ws_,
                                   &zero, y_, s.ptr(outs[0])) == CUDNN_STATUS_SUCCESS;
    }
    if (!ok) {
      algo_ = old_algo;
      ws_ = old_ws;
    }
    return ok;
  }
  bool algo_allowed(int a) const {
    return !fused_ || fused_relu_ || a == static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
  }
  static std::string algo_id(cudnnConvolutionFwdAlgo_t a) { return "algo=" + std::to_string(static_cast<int>(a)); }
  static int parse_algo(const std::string& t) {
    const auto at = t.find("algo=");
    if (at == std::string::npos) return -1;
    const int a = std::atoi(t.c_str() + at + 5);
    return a >= 0 && a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT ? a : -1;
  }
  Status workspace_error(size_t need, size_t cap) const {
    return Status(StatusCode::kOutOfMemory, "layer '" + name + "': every cuDNN algorithm needs more workspace than allowed: " +
                                                std::to_string(need) + " bytes needed, " + std::to_string(cap) +
                                                " bytes allowed (raise kiln build --workspace)");
  }
  PointwiseOp post_op() const {
    const std::string& a = p_.activation;
    if (a == "LeakyRelu") return PointwiseOp::kLeakyRelu;
    if (a == "Clip") return PointwiseOp::kClip;
    if (a == "Sigmoid") return PointwiseOp::kSigmoid;
    if (a == "Tanh") return PointwiseOp::kTanh;
    if (a == "HardSigmoid") return PointwiseOp::kHardSigmoid;
    if (a == "HardSwish") return PointwiseOp::kHardSwish;
    if (a == "Silu") return PointwiseOp::kSilu;
    if (a == "Gelu") return PointwiseOp::kGeluErf;
    if (a == "GeluTanh") return PointwiseOp::kGeluTanh;
    return PointwiseOp::kIdentity;  // unreachable: lower_conv refuses other activations
  }
  Status update_workspace(cudnnHandle_t h) {
    if (!h) {
      // At construction (no handle yet): sized by prepare / tune / use_tactic, which every path
      // to enqueue passes through. Querying here meant a cuDNN handle per layer (~5 ms each, half
      // of a ResNet-101 plan load); the tuning scratch needs no more than kMaxConvWorkspace anyway.
      ws_ = 0;
      return describe();
    }
    KILN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_, w_, conv_, y_, algo_, &ws_));
    return Status::Ok();
  }
  Status describe() {
    // The family token stays "cudnn.conv_bias_act" either way (a choice layer matches plan
    // tactics by it); the fallback path adds "fallback=conv+epilogue".
    tactic = std::string("cudnn.conv_bias_act algo=") + std::to_string(static_cast<int>(algo_)) + " " +
             storage_name(t_) + (nhwc_ ? " nhwc" : " nchw") +
             (p_.c_unpadded > 0 ? " cpad=" + std::to_string(p_.c_unpadded) + "->" + std::to_string(p_.c) : "") +
             (fused_relu_ ? " +relu" : "") + (p_.has_residual ? " +residual" : "") +
             (post_act_ ? " +" + p_.activation : "") + (fused_ ? "" : " fallback=conv+epilogue");
    return Status::Ok();
  }

  ConvParams p_;
  StorageType t_;
  bool nhwc_, tf32_ = true, fused_relu_ = false, post_act_ = false;
  bool fused_ = true;  // cudnnConvolutionBiasActivationForward; false: conv + Kiln epilogue
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_{};
  size_t ws_ = 0;   // bytes the chosen algorithm needs
  size_t cap_ = 0;  // bytes of workspace it was tuned within
};

// ---------------------------------------------------------------- pooling (cuDNN)
// cuDNN pooling; where cuDNN reports no kernel for the storage type, Kiln's own pool kernel.
class PoolLayer : public Layer {
 public:
  ~PoolLayer() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  }
  Status init(const PoolParams& p, StorageType t, bool nhwc) {
    t_ = t;
    const cudnnDataType_t dt = cudnn_type(t);
    const cudnnTensorFormat_t fmt = nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
    KILN_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, fmt, dt, p.n, p.c, p.h, p.w));
    KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, fmt, dt, p.n, p.c, p.oh, p.ow));
    const cudnnPoolingMode_t mode = p.max ? CUDNN_POOLING_MAX
                                          : (p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING);
    KILN_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_, mode, CUDNN_PROPAGATE_NAN, p.kh, p.kw, p.pad_h, p.pad_w,
                                                 p.stride_h, p.stride_w));
    d_.max = p.max;
    d_.count_include_pad = p.count_include_pad;
    d_.nhwc = nhwc;
    d_.n = p.n; d_.c = p.c; d_.h = p.h; d_.w = p.w; d_.oh = p.oh; d_.ow = p.ow;
    d_.kh = p.kh; d_.kw = p.kw; d_.pad_h = p.pad_h; d_.pad_w = p.pad_w; d_.stride_h = p.stride_h; d_.stride_w = p.stride_w;
    op = p.max ? "MaxPool" : "AveragePool";
    if (p.ceil_output) {
      own_ = true;
      fallback = "ceil_mode output " + std::to_string(p.oh) + "x" + std::to_string(p.ow) +
                 " is larger than cuDNN's floored size; runs Kiln's pool kernel";
    }
    describe();
    return Status::Ok();
  }
  Status prepare(ExecState& s) override {
    if (own_) return Status::Ok();
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    const cudnnStatus_t st = run_cudnn(s);
    if (st != CUDNN_STATUS_SUCCESS) {
      own_ = true;
      fallback = std::string("cudnnPoolingForward returned ") + cudnnGetErrorString(st) + " for " + storage_name(t_) +
                 "; runs Kiln's pool kernel";
      describe();
    }
    return Status::Ok();
  }
  // One implementation to run; timed (or read from the cache) for `kiln inspect`'s tuned time.
  Status tune(ExecState& s) override {
    KILN_RETURN_IF_ERROR(prepare(s));
    const std::string sig = signature(), id = own_ ? "kiln" : "cudnn";
    if (s.cache) {
      const auto cached = s.cache->lookup(sig);
      auto it = cached.find(id);
      if (it != cached.end()) {
        tuned_ms = it->second;
        return Status::Ok();
      }
    }
    KILN_ASSIGN_OR_RETURN(float ms, time_runs(s, 5, [&] { return enqueue(s); }));
    tuned_ms = ms;
    if (s.cache) s.cache->record(sig, id, ms);
    return Status::Ok();
  }
  std::string signature() const override {
    return std::string(d_.max ? "maxpool" : (d_.count_include_pad ? "avgpool_incl_pad" : "avgpool")) +
           " x=" + std::to_string(d_.n) + "x" + std::to_string(d_.c) + "x" + std::to_string(d_.h) + "x" +
           std::to_string(d_.w) + " y=" + std::to_string(d_.oh) + "x" + std::to_string(d_.ow) + " k=" +
           std::to_string(d_.kh) + "x" + std::to_string(d_.kw) + " pad=" + std::to_string(d_.pad_h) + "," +
           std::to_string(d_.pad_w) + " stride=" + std::to_string(d_.stride_h) + "," + std::to_string(d_.stride_w) +
           " " + storage_name(t_) + (d_.nhwc ? " nhwc" : " nchw");
  }
  Status use_tactic(const std::string& t, ExecState& s) override {
    if (t.rfind("kiln.pool", 0) == 0 && !own_) {
      own_ = true;
      fallback = std::string("cuDNN pooling had no ") + storage_name(t_) + " kernel at build time; runs Kiln's pool kernel";
    }
    describe();
    return Status::Ok();
  }
  Status enqueue(ExecState& s) override {
    if (own_) {
      KILN_CUDA_CHECK(launch_pool(s.ptr(ins[0]), s.ptr(outs[0]), t_, d_, s.stream));
      return Status::Ok();
    }
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    KILN_RETURN_IF_ERROR(cudnn_status(run_cudnn(s), "cudnnPoolingForward", __FILE__, __LINE__));
    return Status::Ok();
  }

 private:
  cudnnStatus_t run_cudnn(ExecState& s) {
    const float one = 1.f, zero = 0.f;
    return cudnnPoolingForward(s.cudnn, pool_, &one, x_, s.ptr(ins[0]), &zero, y_, s.ptr(outs[0]));
  }
  void describe() {
    tactic = std::string(own_ ? "kiln.pool " : "cudnn.pooling ") + storage_name(t_) + (d_.nhwc ? " nhwc" : " nchw");
  }
  StorageType t_ = StorageType::kF32;
  PoolDesc d_;
  bool own_ = false;  // Kiln's kernel instead of cuDNN
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

// ---------------------------------------------------------------- GEMM (cuBLASLt)
class GemmLayer : public Layer {
 public:
  ~GemmLayer() override {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (c_) cublasLtMatrixLayoutDestroy(c_);
  }
  // Row-major Y[M,N] = X[M,K] W is column-major Y^T[N,M] = W^T[N,K] X^T[K,M]:
  // A = W (transposed when stored [N,K]), B = X^T (ld K), C = Y^T (ld N); bias runs along N.
  Status init(const GemmParams& p, StorageType t, bool tf32) {
    p_ = p;
    t_ = t;
    tf32_ = tf32;
    const cudaDataType_t dt = cuda_type(t);
    // FP32 accumulation and FP32 alpha/beta for every storage type.
    const cublasComputeType_t ct =
        t != StorageType::kF32 ? CUBLAS_COMPUTE_32F : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, ct, CUDA_R_32F));
    const cublasOperation_t ta = p.weight_is_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = p.has_bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                        : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (p.has_bias) {  // the bias vector is stored in D's type (cuBLASLt's default, stated explicitly)
      const int32_t bias_type = static_cast<int32_t>(dt);
      KILN_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    if (p.has_residual) beta_ = 1.f;
    if (p.weight_is_nk) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.k, p.n, p.k));
    else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.n, p.k, p.n));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, dt, p.k, p.m, p.k));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, dt, p.n, p.m, p.n));
    op = "Gemm";
    describe(-1);
    return Status::Ok();
  }
  size_t workspace() const override { return cap_; }
  // No tuning: cuBLASLt's own heuristic at run time, within the workspace this build allows.
  Status prepare(ExecState& s) override {
    cap_ = std::min(s.workspace_bytes, kGemmWorkspace);
    return Status::Ok();
  }

  Status use_tactic(const std::string& t, ExecState& s) override {
    const auto at = t.find("heuristic#");
    pinned_ = at == std::string::npos ? 0 : std::atoi(t.c_str() + at + 10);
    return tune(s);
  }

  Status tune(ExecState& s) override {
    cap_ = std::min(s.workspace_bytes, kGemmWorkspace);
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t st =
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap_, sizeof cap_);
    cublasLtMatmulHeuristicResult_t res[8];
    int returned = 0;
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc_, a_, b_, c_, c_, pref, 8, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    if (returned == 0)
      return unsupported("layer '" + name + "': cuBLASLt has no " + storage_name(t_) + " algorithm within " +
                         std::to_string(cap_) + " bytes of workspace for " + signature());
    if (pinned_ >= 0) {  // a plan's choice: same library version, same heuristic order
      best_index_ = std::min(pinned_, returned - 1);
      algo_ = res[best_index_].algo;
      has_algo_ = true;
      describe(best_index_);
      return Status::Ok();
    }
    const std::string sig = signature();
    if (s.cache) {
      double best = std::numeric_limits<double>::infinity();
      for (const auto& [t, ms] : s.cache->lookup(sig)) {
        const auto at = t.find("heuristic#");
        const int i = at == std::string::npos ? -1 : std::atoi(t.c_str() + at + 10);
        if (i >= 0 && i < returned && ms < best) {
          best = ms;
          best_index_ = i;
        }
      }
      if (best_index_ >= 0) {
        algo_ = res[best_index_].algo;
        has_algo_ = true;
        tuned_ms = best;
        describe(best_index_);
        return Status::Ok();
      }
    }
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < returned; ++i) {
      algo_ = res[i].algo;
      has_algo_ = true;
      auto ms = time_runs(s, 5, [&] { return enqueue(s); });
      if (!ms.ok()) continue;  // this algorithm does not run here; the next may
      if (s.cache) s.cache->record(sig, "heuristic#" + std::to_string(i), *ms);
      if (*ms < best) {
        best = *ms;
        best_index_ = i;
      }
    }
    if (best_index_ < 0) return internal_error("layer '" + name + "': no cuBLASLt algorithm ran for " + sig);
    algo_ = res[best_index_].algo;
    tuned_ms = best;
    describe(best_index_);
    return Status::Ok();
  }

  void finalize(const std::vector<GVal>& vals) override {
    if (!p_.has_bias) return;
    const void* bias = vals[ins[2]].weight;  // the bias is always an uploaded weight
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  }

  Status enqueue(ExecState& s) override {
    const float alpha = 1.f, beta = beta_;
    void* y = s.ptr(outs[0]);
    const void* c = p_.has_residual ? s.ptr(ins[3]) : y;
    KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &alpha, s.ptr(ins[1]), a_, s.ptr(ins[0]), b_, &beta, c, c_, y, c_,
                                     has_algo_ ? &algo_ : nullptr, s.workspace, std::min(s.workspace_bytes, cap_),
                                     s.stream));
    return Status::Ok();
  }

  // Everything the measured time depends on (timing-cache key), with the workspace cap.
  std::string signature() const override {
    std::string sig = "gemm m=" + std::to_string(p_.m) + " n=" + std::to_string(p_.n) + " k=" + std::to_string(p_.k) +
                      (p_.weight_is_nk ? " w=nk " : " w=kn ") + storage_name(t_);
    if (t_ == StorageType::kF32) sig += tf32_ ? " tf32" : " fma";
    return sig + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") + (p_.has_residual ? " +residual" : "") +
           " ws<=" + std::to_string(cap_);
  }

 private:
  static constexpr size_t kGemmWorkspace = 32u << 20;  // bytes
  void describe(int idx) {
    tactic = std::string("cublaslt.matmul") + (idx >= 0 ? " heuristic#" + std::to_string(idx) : "") + " " +
             storage_name(t_) + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") +
             (p_.has_residual ? " +residual" : "");
  }
  GemmParams p_{};
  StorageType t_ = StorageType::kF32;
  bool tf32_ = true;
  float beta_ = 0.f;  // 1 when the residual is cuBLASLt's C
  size_t cap_ = kGemmWorkspace;  // bytes of workspace the algorithms were chosen for
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  bool has_algo_ = false;
  int best_index_ = -1;
  int pinned_ = -1;  // heuristic index fixed by a plan (-1: tune)
};

// ---------------------------------------------------------------- own kernels
class PointwiseLayer : public Layer {
 public:
  PointwiseLayer(PointwiseOp o, const BroadcastDesc& d, StorageType t, float a, float b)
      : op_(o), d_(d), half_(t), alpha_(a), beta_(b) {
    op = "Pointwise";
    tactic = std::string("kiln.pointwise ") + storage_name(t);
  }
  Status enqueue(ExecState& s) override {
    const void* b = ins.size() > 1 ? s.ptr(ins[1]) : nullptr;
    KILN_CUDA_CHECK(launch_pointwise(op_, half_, s.ptr(ins[0]), b, s.ptr(outs[0]), d_, alpha_, beta_, s.stream));
    return Status::Ok();
  }

 private:
  PointwiseOp op_;
  BroadcastDesc d_;
  StorageType half_;
  float alpha_, beta_;
};

class FusedPointwiseLayer : public Layer {
 public:
  FusedPointwiseLayer(const PwDeviceProgram& p, StorageType t) : p_(p), t_(t) {
    op = "FusedPointwise";
    tactic = std::string("kiln.fused_pointwise ") + storage_name(t) + " instrs=" + std::to_string(p.num_instrs);
  }
  Status enqueue(ExecState& s) override {
    PwDevicePointers ptrs;
    for (size_t k = 0; k < ins.size() && k < static_cast<size_t>(ir::kMaxPwInputs); ++k) ptrs.in[k] = s.ptr(ins[k]);
    KILN_CUDA_CHECK(launch_fused_pointwise(p_, ptrs, s.ptr(outs[0]), t_, s.stream));
    return Status::Ok();
  }

 private:
  PwDeviceProgram p_;
  StorageType t_;
};

class ReformatLayer : public Layer {
 public:
  ReformatLayer(const Shape& s, StorageType sh, bool sn, StorageType dh, bool dn, int64_t dc)
      : s_(s), sh_(sh), sn_(sn), dh_(dh), dn_(dn), dc_(dc) {
    op = "Reformat";
    tactic = std::string("kiln.reformat ") + storage_name(sh) + (sn ? "/nhwc" : "/nchw") + " -> " + storage_name(dh) +
             (dn ? "/nhwc" : "/nchw");
    if (s_.size() == 4 && dc_ > s_[1]) tactic += " cpad=" + std::to_string(s_[1]) + "->" + std::to_string(dc_);
  }
  Status enqueue(ExecState& s) override {
    if (s_.size() == 4) {
      KILN_CUDA_CHECK(launch_reformat(s.ptr(ins[0]), sh_, sn_, s.ptr(outs[0]), dh_, dn_, s_[0], s_[1], s_[2], s_[3],
                                      std::max(dc_, s_[1]), s.stream));
    } else {
      KILN_CUDA_CHECK(launch_convert(s.ptr(ins[0]), sh_, s.ptr(outs[0]), dh_, shape_numel(s_), s.stream));
    }
    return Status::Ok();
  }

 private:
  Shape s_;
  StorageType sh_;
  bool sn_;
  StorageType dh_;
  bool dn_;
  int64_t dc_;  // destination channels (>= s_[1]; extra ones are zeros)
};

class SoftmaxLayer : public Layer {
 public:
  SoftmaxLayer(int64_t rows, int64_t cols, StorageType t, bool log) : rows_(rows), cols_(cols), half_(t), log_(log) {
    op = log ? "LogSoftmax" : "Softmax";
    tactic = std::string("kiln.softmax ") + storage_name(t);
  }
  Status enqueue(ExecState& s) override {
    KILN_CUDA_CHECK(launch_softmax(s.ptr(ins[0]), s.ptr(outs[0]), half_, rows_, cols_, log_, s.stream));
    return Status::Ok();
  }

 private:
  int64_t rows_, cols_;
  StorageType half_;
  bool log_;
};

// Concat (parts = inputs) or Split (parts = outputs) of row-major [outer, total] arrays along
// the inner axis: one strided copy per part; a part given as -1 is already in place (concat
// elimination) and is skipped.
class PartsLayer : public Layer {
 public:
  PartsLayer(bool concat, int64_t outer, std::vector<int64_t> inner, int eb)
      : concat_(concat), outer_(outer), inner_(std::move(inner)), eb_(eb) {
    for (int64_t v : inner_) total_ += v;
    op = concat ? "Concat" : "Split";
    tactic = concat ? "kiln.concat" : "kiln.split";
  }
  Status enqueue(ExecState& s) override {
    const std::vector<int>& parts = concat_ ? ins : outs;
    int64_t off = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i] >= 0) {
        if (concat_)
          KILN_CUDA_CHECK(
              launch_concat_part(s.ptr(ins[i]), s.ptr(outs[0]), eb_, outer_, inner_[i], total_, off, s.stream));
        else
          KILN_CUDA_CHECK(
              launch_split_part(s.ptr(ins[0]), s.ptr(outs[i]), eb_, outer_, total_, inner_[i], off, s.stream));
      }
      off += inner_[i];
    }
    return Status::Ok();
  }

 private:
  bool concat_;
  int64_t outer_;
  std::vector<int64_t> inner_;
  int64_t total_ = 0;  // sum of inner_: the inner size of the concatenated array
  int eb_;
};

class ChoiceLayer : public Layer {
 public:
  explicit ChoiceLayer(std::vector<std::unique_ptr<Layer>> c) : cands_(std::move(c)) {
    op = cands_[0]->op;
    tactic = cands_[0]->tactic;
  }
  // Before tuning: the most any candidate may need; after: the chosen one's.
  size_t workspace() const override {
    if (decided_) return cands_[chosen_]->workspace();
    size_t w = 0;
    for (const auto& c : cands_) w = std::max(w, c->workspace());
    return w;
  }
  Status prepare(ExecState& s) override {
    sync();
    for (auto& c : cands_) KILN_RETURN_IF_ERROR(c->prepare(s));
    pick(chosen_);
    return Status::Ok();
  }
  // Each candidate tunes itself (consulting the cache), then the candidates are timed against
  // each other (10 runs each) unless the cache holds this choice's times. Key tactic: the
  // candidate's family ("cudnn", "cublaslt").
  Status tune(ExecState& s) override {
    sync();
    std::vector<bool> ran(cands_.size(), false);
    std::string sig = "choice{";
    std::vector<std::string> errors;
    for (size_t i = 0; i < cands_.size(); ++i) {
      Status st = cands_[i]->tune(s);
      ran[i] = st.ok();
      if (!st.ok()) errors.push_back(st.message());
      sig += (i ? " ; " : "") + cands_[i]->signature() + " -> " + cands_[i]->tactic;
    }
    sig += "}";
    float best = std::numeric_limits<float>::infinity();
    if (s.cache) {
      const auto cached = s.cache->lookup(sig);
      for (size_t i = 0; i < cands_.size(); ++i) {
        auto it = cached.find(family(i));
        if (ran[i] && it != cached.end() && it->second < best) {
          best = static_cast<float>(it->second);
          chosen_ = i;
        }
      }
    }
    if (best == std::numeric_limits<float>::infinity()) {
      for (size_t i = 0; i < cands_.size(); ++i) {
        if (!ran[i]) continue;
        auto ms = time_runs(s, 10, [&] { return cands_[i]->enqueue(s); });
        if (!ms.ok()) {
          errors.push_back(ms.status().message());
          continue;
        }
        if (s.cache) s.cache->record(sig, family(i), *ms);
        if (*ms < best) {
          best = *ms;
          chosen_ = i;
        }
      }
    }
    if (best == std::numeric_limits<float>::infinity()) {
      std::string msg = "layer '" + name + "': no candidate ran";
      for (const auto& e : errors) msg += "\n    " + e;
      return internal_error(msg);
    }
    tuned_ms = best;
    decided_ = true;
    pick(chosen_);
    return Status::Ok();
  }
  Status use_tactic(const std::string& t, ExecState& s) override {
    sync();
    for (size_t i = 0; i < cands_.size(); ++i) {
      const std::string& ct = cands_[i]->tactic;
      // Tactic families ("cudnn.conv_bias_act", "cudnn.graph", "cublaslt.matmul") end at the first space.
      if (t.substr(0, t.find(' ')) == ct.substr(0, ct.find(' '))) {
        KILN_RETURN_IF_ERROR(cands_[i]->use_tactic(t, s));
        decided_ = true;
        pick(i);
        return Status::Ok();
      }
    }
    return invalid_plan("layer '" + name + "': tactic '" + t + "' matches no implementation");
  }
  void finalize(const std::vector<GVal>& vals) override {
    sync();
    for (auto& c : cands_) c->finalize(vals);
  }
  Status enqueue(ExecState& s) override { return cands_[chosen_]->enqueue(s); }
  void export_tactic_data(std::map<std::string, std::string>* out) const override {
    if (decided_) cands_[chosen_]->export_tactic_data(out);
  }

 private:
  void sync() {
    for (auto& c : cands_) {
      c->name = name;
      c->ins = ins;
      c->outs = outs;
    }
  }
  void pick(size_t i) {
    chosen_ = i;
    op = cands_[i]->op;
    tactic = cands_[i]->tactic;
    fallback = cands_[i]->fallback;
    restored = cands_[i]->restored;
  }
  // "cudnn.conv_bias_act", "cudnn.graph", "cublaslt.matmul": the tactic up to its first space.
  std::string family(size_t i) const { return cands_[i]->tactic.substr(0, cands_[i]->tactic.find(' ')); }
  std::vector<std::unique_ptr<Layer>> cands_;
  size_t chosen_ = 0;
  bool decided_ = false;  // chosen by tuning or a plan
};

}  // namespace

std::unique_ptr<Layer> make_choice_layer(std::vector<std::unique_ptr<Layer>> candidates) {
  return std::make_unique<ChoiceLayer>(std::move(candidates));
}

StatusOr<std::unique_ptr<Layer>> make_conv_layer(const ConvParams& p, StorageType t, bool nhwc, bool tf32) {
  auto l = std::make_unique<ConvLayer>(p, t, nhwc);
  KILN_RETURN_IF_ERROR(l->init(tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

StatusOr<std::unique_ptr<Layer>> make_pool_layer(const PoolParams& p, StorageType t, bool nhwc) {
  auto l = std::make_unique<PoolLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, t, nhwc));
  return std::unique_ptr<Layer>(std::move(l));
}

StatusOr<std::unique_ptr<Layer>> make_gemm_layer(const GemmParams& p, StorageType t, bool tf32) {
  auto l = std::make_unique<GemmLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, t, tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

std::unique_ptr<Layer> make_pointwise_layer(PointwiseOp op, const BroadcastDesc& d, StorageType t, float alpha,
                                            float beta) {
  return std::make_unique<PointwiseLayer>(op, d, t, alpha, beta);
}
std::unique_ptr<Layer> make_fused_pointwise_layer(const PwDeviceProgram& p, StorageType t) {
  return std::make_unique<FusedPointwiseLayer>(p, t);
}

std::unique_ptr<Layer> make_reformat_layer(const Shape& nchw, StorageType sh, bool sn, StorageType dh, bool dn,
                                           int64_t dst_c) {
  return std::make_unique<ReformatLayer>(nchw, sh, sn, dh, dn, dst_c);
}
std::unique_ptr<Layer> make_softmax_layer(int64_t rows, int64_t cols, StorageType t, bool log) {
  return std::make_unique<SoftmaxLayer>(rows, cols, t, log);
}
std::unique_ptr<Layer> make_concat_layer(int64_t outer, std::vector<int64_t> inner_ins, int elem_bytes) {
  return std::make_unique<PartsLayer>(true, outer, std::move(inner_ins), elem_bytes);
}
std::unique_ptr<Layer> make_split_layer(int64_t outer, std::vector<int64_t> inner_outs, int elem_bytes) {
  return std::make_unique<PartsLayer>(false, outer, std::move(inner_outs), elem_bytes);
}

cudaDataType_t cuda_type(StorageType t) {
  switch (t) {
    case StorageType::kF16: return CUDA_R_16F;
    case StorageType::kBF16: return CUDA_R_16BF;
    case StorageType::kI32: return CUDA_R_32I;
    case StorageType::kI64: return CUDA_R_64I;
    case StorageType::kF32: break;
  }
  return CUDA_R_32F;
}

}  // namespace kiln::cuda
