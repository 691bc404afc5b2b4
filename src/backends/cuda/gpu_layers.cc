// CUDA engine layers: cuDNN convolution and pooling, cuBLASLt GEMM, and Kiln's own kernels.
// Tactic choice: cuDNN's own benchmark of every forward algorithm
// (cudnnFindConvolutionForwardAlgorithmEx) and CUDA-event timing of cuBLASLt's heuristic top
// candidates; the fastest that fits the workspace wins.
#include "backends/cuda/gpu_layers.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {

void* ExecState::ptr(int v) const {
  if (v < 0) return nullptr;
  const GVal* g = &(*vals)[v];
  while (g->alias_of >= 0) g = &(*vals)[g->alias_of];
  return g->weight ? g->weight : arena + g->offset;
}

namespace {

constexpr size_t kMaxConvWorkspace = 256u << 20;  // bytes a single conv tactic may use

// ---------------------------------------------------------------- convolution (cuDNN)
class ConvLayer : public Layer {
 public:
  ConvLayer(const ConvParams& p, bool half, bool nhwc) : p_(p), half_(half), nhwc_(nhwc) {}
  ~ConvLayer() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
    if (act_) cudnnDestroyActivationDescriptor(act_);
  }

  Status init(bool tf32) {
    const cudnnDataType_t dt = half_ ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
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
    KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_, p_.pad_h, p_.pad_w, p_.stride_h, p_.stride_w, p_.dil_h,
                                                     p_.dil_w, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(p_.groups)));
    const cudnnMathType_t math = half_ ? CUDNN_TENSOR_OP_MATH : (tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
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

  Status tune(ExecState& s) override {
    if (!fused_relu_) return describe();  // identity activation pins the algorithm
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    KILN_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(s.cudnn, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, y_,
                                                            s.ptr(outs[0]), CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                            &returned, perf, s.workspace, s.workspace_bytes));
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > std::min(s.workspace_bytes, kMaxConvWorkspace)) continue;
      algo_ = perf[i].algo;
      tuned_ms = perf[i].time;
      break;
    }
    KILN_RETURN_IF_ERROR(update_workspace(s.cudnn));
    return describe();
  }

  Status use_tactic(const std::string& t, ExecState& s) override {
    const auto at = t.find("algo=");
    if (at == std::string::npos) return invalid_plan("layer '" + name + "': tactic '" + t + "' names no cuDNN algorithm");
    const int algo = std::atoi(t.c_str() + at + 5);
    if (algo < 0 || algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
      return invalid_plan("layer '" + name + "': tactic '" + t + "' names cuDNN algorithm " + std::to_string(algo));
    if (fused_relu_) algo_ = static_cast<cudnnConvolutionFwdAlgo_t>(algo);
    KILN_RETURN_IF_ERROR(update_workspace(s.cudnn));
    return describe();
  }

  Status enqueue(ExecState& s) override {
    const float one = 1.f, zero = 0.f;
    void* y = s.ptr(outs[0]);
    const void* z = p_.has_residual ? s.ptr(ins[3]) : y;
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    KILN_CUDNN_CHECK(cudnnConvolutionBiasActivationForward(
        s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo_, s.workspace, ws_,
        p_.has_residual ? &one : &zero, y_, z, b_, s.ptr(ins[2]), act_, y_, y));
    if (post_act_) {
      BroadcastDesc d;
      d.rank = 1;
      d.out_dims[0] = p_.n * p_.k * p_.oh * p_.ow;
      d.a_strides[0] = 1;
      KILN_CUDA_CHECK(launch_pointwise(post_op(), half_, y, nullptr, y, d, p_.act_alpha, p_.act_beta, s.stream));
    }
    return Status::Ok();
  }

 private:
  PointwiseOp post_op() const {
    const std::string& a = p_.activation;
    if (a == "LeakyRelu") return PointwiseOp::kLeakyRelu;
    if (a == "Clip") return PointwiseOp::kClip;
    if (a == "Sigmoid") return PointwiseOp::kSigmoid;
    if (a == "Tanh") return PointwiseOp::kTanh;
    if (a == "HardSigmoid") return PointwiseOp::kHardSigmoid;
    if (a == "HardSwish") return PointwiseOp::kHardSwish;
    return PointwiseOp::kIdentity;
  }
  Status update_workspace(cudnnHandle_t h) {
    if (!h) {
      ws_ = 0;
      cudnnHandle_t tmp;
      if (cudnnCreate(&tmp) != CUDNN_STATUS_SUCCESS) return Status::Ok();  // sized at tune time
      cudnnGetConvolutionForwardWorkspaceSize(tmp, x_, w_, conv_, y_, algo_, &ws_);
      cudnnDestroy(tmp);
      return describe();
    }
    KILN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_, w_, conv_, y_, algo_, &ws_));
    return Status::Ok();
  }
  Status describe() {
    tactic = std::string("cudnn.conv_bias_act algo=") + std::to_string(static_cast<int>(algo_)) +
             (half_ ? " fp16" : " fp32") + (nhwc_ ? " nhwc" : " nchw") + (fused_relu_ ? " +relu" : "") +
             (p_.has_residual ? " +residual" : "") + (post_act_ ? " +" + p_.activation : "");
    return Status::Ok();
  }

  ConvParams p_;
  bool half_, nhwc_, fused_relu_ = false, post_act_ = false;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_{};
  size_t ws_ = 0;
};

// ---------------------------------------------------------------- pooling (cuDNN)
class PoolLayer : public Layer {
 public:
  ~PoolLayer() override {
    if (x_) cudnnDestroyTensorDescriptor(x_);
    if (y_) cudnnDestroyTensorDescriptor(y_);
    if (pool_) cudnnDestroyPoolingDescriptor(pool_);
  }
  Status init(const PoolParams& p, bool half, bool nhwc) {
    const cudnnDataType_t dt = half ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
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
    op = p.max ? "MaxPool" : "AveragePool";
    tactic = std::string("cudnn.pooling ") + (half ? "fp16" : "fp32") + (nhwc ? " nhwc" : " nchw");
    return Status::Ok();
  }
  Status enqueue(ExecState& s) override {
    const float one = 1.f, zero = 0.f;
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    KILN_CUDNN_CHECK(cudnnPoolingForward(s.cudnn, pool_, &one, x_, s.ptr(ins[0]), &zero, y_, s.ptr(outs[0])));
    return Status::Ok();
  }

 private:
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
  Status init(const GemmParams& p, bool half, bool tf32) {
    p_ = p;
    half_ = half;
    const cudaDataType_t dt = half ? CUDA_R_16F : CUDA_R_32F;
    const cublasComputeType_t ct = half ? CUBLAS_COMPUTE_32F : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, ct, CUDA_R_32F));
    const cublasOperation_t ta = p.weight_is_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = p.has_bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                        : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (p.has_residual) beta_ = 1.f;
    if (p.weight_is_nk) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.k, p.n, p.k));
    else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.n, p.k, p.n));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, dt, p.k, p.m, p.k));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, dt, p.n, p.m, p.n));
    op = "Gemm";
    describe(-1);
    return Status::Ok();
  }
  size_t workspace() const override { return kGemmWorkspace; }

  Status use_tactic(const std::string& t, ExecState& s) override {
    const auto at = t.find("heuristic#");
    pinned_ = at == std::string::npos ? 0 : std::atoi(t.c_str() + at + 10);
    return tune(s);
  }

  Status tune(ExecState& s) override {
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = std::min(s.workspace_bytes, kGemmWorkspace);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res[8];
    int returned = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc_, a_, b_, c_, c_, pref, 8, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    if (returned == 0) return internal_error("layer '" + name + "': cuBLASLt found no algorithm");
    if (pinned_ >= 0) {  // a plan's choice: same library version, same heuristic order
      best_index_ = std::min(pinned_, returned - 1);
      algo_ = res[best_index_].algo;
      has_algo_ = true;
      describe(best_index_);
      return Status::Ok();
    }
    cudaEvent_t e0, e1;
    KILN_CUDA_CHECK(cudaEventCreate(&e0));
    KILN_CUDA_CHECK(cudaEventCreate(&e1));
    float best = std::numeric_limits<float>::infinity();
    for (int i = 0; i < returned; ++i) {
      algo_ = res[i].algo;
      has_algo_ = true;
      Status ok = enqueue(s);  // warm-up
      if (!ok.ok()) continue;
      cudaEventRecord(e0, s.stream);
      for (int r = 0; r < 5; ++r) (void)enqueue(s);
      cudaEventRecord(e1, s.stream);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (ms / 5 < best) {
        best = ms / 5;
        best_index_ = i;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (best_index_ < 0) return internal_error("layer '" + name + "': no cuBLASLt algorithm ran");
    algo_ = res[best_index_].algo;
    tuned_ms = best;
    describe(best_index_);
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override {
    const float alpha = 1.f, beta = beta_;
    if (p_.has_bias) {
      const void* bias = s.ptr(ins[2]);
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    void* y = s.ptr(outs[0]);
    const void* c = p_.has_residual ? s.ptr(ins[3]) : y;
    KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &alpha, s.ptr(ins[1]), a_, s.ptr(ins[0]), b_, &beta, c, c_, y, c_,
                                     has_algo_ ? &algo_ : nullptr, s.workspace,
                                     std::min(s.workspace_bytes, kGemmWorkspace), s.stream));
    return Status::Ok();
  }

 private:
  static constexpr size_t kGemmWorkspace = 32u << 20;  // bytes
  void describe(int idx) {
    tactic = std::string("cublaslt.matmul") + (idx >= 0 ? " heuristic#" + std::to_string(idx) : "") +
             (half_ ? " fp16" : " fp32") + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") +
             (p_.has_residual ? " +residual" : "");
  }
  GemmParams p_{};
  bool half_ = false;
  float beta_ = 0.f;  // 1 when the residual is cuBLASLt's C
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
  PointwiseLayer(PointwiseOp o, const BroadcastDesc& d, bool half, float a, float b)
      : op_(o), d_(d), half_(half), alpha_(a), beta_(b) {
    op = "Pointwise";
    tactic = std::string("kiln.pointwise ") + (half ? "fp16" : "fp32");
  }
  Status enqueue(ExecState& s) override {
    const void* b = ins.size() > 1 ? s.ptr(ins[1]) : nullptr;
    KILN_CUDA_CHECK(launch_pointwise(op_, half_, s.ptr(ins[0]), b, s.ptr(outs[0]), d_, alpha_, beta_, s.stream));
    return Status::Ok();
  }

 private:
  PointwiseOp op_;
  BroadcastDesc d_;
  bool half_;
  float alpha_, beta_;
};

class ReformatLayer : public Layer {
 public:
  ReformatLayer(const Shape& s, bool sh, bool sn, bool dh, bool dn) : s_(s), sh_(sh), sn_(sn), dh_(dh), dn_(dn) {
    op = "Reformat";
    tactic = std::string("kiln.reformat ") + (sh ? "fp16" : "fp32") + (sn ? "/nhwc" : "/nchw") + " -> " +
             (dh ? "fp16" : "fp32") + (dn ? "/nhwc" : "/nchw");
  }
  Status enqueue(ExecState& s) override {
    if (s_.size() == 4) {
      KILN_CUDA_CHECK(launch_reformat(s.ptr(ins[0]), sh_, sn_, s.ptr(outs[0]), dh_, dn_, s_[0], s_[1], s_[2], s_[3], s.stream));
    } else {
      KILN_CUDA_CHECK(launch_convert(s.ptr(ins[0]), sh_, s.ptr(outs[0]), dh_, shape_numel(s_), s.stream));
    }
    return Status::Ok();
  }

 private:
  Shape s_;
  bool sh_, sn_, dh_, dn_;
};

class SoftmaxLayer : public Layer {
 public:
  SoftmaxLayer(int64_t rows, int64_t cols, bool half, bool log) : rows_(rows), cols_(cols), half_(half), log_(log) {
    op = log ? "LogSoftmax" : "Softmax";
    tactic = std::string("kiln.softmax ") + (half ? "fp16" : "fp32");
  }
  Status enqueue(ExecState& s) override {
    KILN_CUDA_CHECK(launch_softmax(s.ptr(ins[0]), s.ptr(outs[0]), half_, rows_, cols_, log_, s.stream));
    return Status::Ok();
  }

 private:
  int64_t rows_, cols_;
  bool half_, log_;
};

class ConcatLayer : public Layer {
 public:
  ConcatLayer(int64_t outer, std::vector<int64_t> inner, int eb) : outer_(outer), inner_(std::move(inner)), eb_(eb) {
    op = "Concat";
    tactic = "kiln.concat";
  }
  Status enqueue(ExecState& s) override {
    int64_t total = 0, off = 0;
    for (int64_t v : inner_) total += v;
    for (size_t i = 0; i < ins.size(); ++i) {
      KILN_CUDA_CHECK(launch_concat_part(s.ptr(ins[i]), s.ptr(outs[0]), eb_, outer_, inner_[i], total, off, s.stream));
      off += inner_[i];
    }
    return Status::Ok();
  }

 private:
  int64_t outer_;
  std::vector<int64_t> inner_;
  int eb_;
};

class ChoiceLayer : public Layer {
 public:
  explicit ChoiceLayer(std::vector<std::unique_ptr<Layer>> c) : cands_(std::move(c)) {
    op = cands_[0]->op;
    tactic = cands_[0]->tactic;
  }
  size_t workspace() const override {
    size_t w = 0;
    for (const auto& c : cands_) w = std::max(w, c->workspace());
    return w;
  }
  Status tune(ExecState& s) override {
    sync();
    cudaEvent_t e0, e1;
    KILN_CUDA_CHECK(cudaEventCreate(&e0));
    KILN_CUDA_CHECK(cudaEventCreate(&e1));
    float best = std::numeric_limits<float>::infinity();
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (!cands_[i]->tune(s).ok() || !cands_[i]->enqueue(s).ok()) continue;
      cudaEventRecord(e0, s.stream);
      for (int r = 0; r < 10; ++r) (void)cands_[i]->enqueue(s);
      cudaEventRecord(e1, s.stream);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (ms / 10 < best) {
        best = ms / 10;
        chosen_ = i;
      }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (best == std::numeric_limits<float>::infinity()) return internal_error("layer '" + name + "': no candidate ran");
    tuned_ms = best;
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
        pick(i);
        return Status::Ok();
      }
    }
    return invalid_plan("layer '" + name + "': tactic '" + t + "' matches no implementation");
  }
  Status enqueue(ExecState& s) override {
    sync();
    return cands_[chosen_]->enqueue(s);
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
  }
  std::vector<std::unique_ptr<Layer>> cands_;
  size_t chosen_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_choice_layer(std::vector<std::unique_ptr<Layer>> candidates) {
  return std::make_unique<ChoiceLayer>(std::move(candidates));
}

StatusOr<std::unique_ptr<Layer>> make_conv_layer(const ConvParams& p, bool half, bool nhwc, bool tf32) {
  auto l = std::make_unique<ConvLayer>(p, half, nhwc);
  KILN_RETURN_IF_ERROR(l->init(tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

StatusOr<std::unique_ptr<Layer>> make_pool_layer(const PoolParams& p, bool half, bool nhwc) {
  auto l = std::make_unique<PoolLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, half, nhwc));
  return std::unique_ptr<Layer>(std::move(l));
}

StatusOr<std::unique_ptr<Layer>> make_gemm_layer(const GemmParams& p, bool half, bool tf32) {
  auto l = std::make_unique<GemmLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, half, tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

std::unique_ptr<Layer> make_pointwise_layer(PointwiseOp op, const BroadcastDesc& d, bool half, float alpha, float beta) {
  return std::make_unique<PointwiseLayer>(op, d, half, alpha, beta);
}
std::unique_ptr<Layer> make_reformat_layer(const Shape& nchw, bool sh, bool sn, bool dh, bool dn) {
  return std::make_unique<ReformatLayer>(nchw, sh, sn, dh, dn);
}
std::unique_ptr<Layer> make_softmax_layer(int64_t rows, int64_t cols, bool half, bool log) {
  return std::make_unique<SoftmaxLayer>(rows, cols, half, log);
}
std::unique_ptr<Layer> make_concat_layer(int64_t outer, std::vector<int64_t> inner_ins, int elem_bytes) {
  return std::make_unique<ConcatLayer>(outer, std::move(inner_ins), elem_bytes);
}

}  // namespace kiln::cuda
