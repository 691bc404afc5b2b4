// cuDNN legacy convolution as tactics (source kCudnn): the fused
// cudnnConvolutionBiasActivationForward per forward algorithm, and cudnnConvolutionForward +
// Kiln's bias/residual/activation epilogue per algorithm where the fused call has no kernel
// (bf16) or loses. Which one runs is the tactic selector's decision (builder/tactic_selector.h).
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_layers.h"

namespace kiln::cuda {

namespace {

constexpr size_t kMaxConvWorkspace = 256u << 20;  // bytes a single conv tactic may use
constexpr uint32_t kPlainVariant = 0x100;        // variant bit: plain conv + Kiln epilogue

}  // namespace

PointwiseOp conv_activation_op(const std::string& a) {
  if (a == "Relu") return PointwiseOp::kRelu;
  if (a == "LeakyRelu") return PointwiseOp::kLeakyRelu;
  if (a == "Clip") return PointwiseOp::kClip;
  if (a == "Sigmoid") return PointwiseOp::kSigmoid;
  if (a == "Tanh") return PointwiseOp::kTanh;
  if (a == "HardSigmoid") return PointwiseOp::kHardSigmoid;
  if (a == "HardSwish") return PointwiseOp::kHardSwish;
  if (a == "Silu") return PointwiseOp::kSilu;
  if (a == "Gelu") return PointwiseOp::kGeluErf;
  if (a == "GeluTanh") return PointwiseOp::kGeluTanh;
  return PointwiseOp::kIdentity;  // no activation (lower_conv refuses unknown ones)
}

namespace {

PointwiseOp activation_op(const std::string& a) { return conv_activation_op(a); }

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
    post_act_ = !fused_relu_ && !p_.activation.empty();
    op = "FusedConv";
    describe();
    return Status::Ok();
  }

  // Before a select: the cap any algorithm may use; after: what the selected one needs.
  size_t workspace() const override { return tactic_id == kNoTactic ? kMaxConvWorkspace : ws_; }

  // The fused call first (IMPLICIT_PRECOMP_GEMM leading: cuDNN runs the identity activation
  // only with it), then conv + epilogue for every algorithm.
  StatusOr<std::vector<TacticId>> candidates(ExecState&) override {
    const auto ipg = static_cast<uint32_t>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
    std::vector<TacticId> c = {make_tactic_id(TacticSource::kCudnn, ipg)};
    for (uint32_t a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT && fused_relu_; ++a)
      if (a != ipg) c.push_back(make_tactic_id(TacticSource::kCudnn, a));
    c.push_back(make_tactic_id(TacticSource::kCudnn, kPlainVariant | ipg));
    for (uint32_t a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
      if (a != ipg) c.push_back(make_tactic_id(TacticSource::kCudnn, kPlainVariant | a));
    return c;
  }

  Status select(TacticId id, ExecState& s) override {
    const uint32_t v = tactic_id_variant(id);
    const uint32_t a = v & ~kPlainVariant;
    const bool fused = !(v & kPlainVariant);
    if (tactic_id_source(id) != TacticSource::kCudnn || a >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || (v & ~0x1FFu) ||
        (fused && !fused_relu_ && a != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM))
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not a cuDNN convolution tactic");
    const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a);
    const size_t cap = std::min(s.workspace_bytes, kMaxConvWorkspace);
    size_t need = 0;
    cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(s.cudnn, x_, w_, conv_, y_, algo, &need);
    if (st == CUDNN_STATUS_SUCCESS && need > cap)
      return Status(StatusCode::kOutOfMemory, "algorithm " + std::to_string(a) + " needs " + std::to_string(need) +
                                                  " bytes of workspace, " + std::to_string(cap) + " allowed");
    if (st == CUDNN_STATUS_SUCCESS && s.verify) st = run(s, fused, algo, need);
    if (st != CUDNN_STATUS_SUCCESS) {
      const std::string call = fused ? "cudnnConvolutionBiasActivationForward" : "cudnnConvolutionForward";
      if (fused) fused_error_ = call + " returned " + cudnnGetErrorString(st);
      return unsupported(call + " algorithm " + std::to_string(a) + ": " + cudnnGetErrorString(st));
    }
    fused_ = fused;
    algo_ = algo;
    ws_ = need;
    tactic_id = id;
    fallback.clear();
    if (!fused_)
      fallback = "runs cudnnConvolutionForward + Kiln epilogue instead of cudnnConvolutionBiasActivationForward (" +
                 (fused_error_.empty() ? std::string("the fused call was slower or not timed here") : fused_error_) +
                 ")";
    describe();
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override {
    KILN_RETURN_IF_ERROR(cudnn_status(run(s, fused_, algo_, ws_), fused_ ? "cudnnConvolutionBiasActivationForward"
                                                                         : "cudnnConvolutionForward",
                                      __FILE__, __LINE__));
    void* y = s.ptr(outs[0]);
    if (!fused_) {
      const PointwiseOp act = activation_op(p_.activation);
      KILN_CUDA_CHECK(launch_bias_act(y, s.ptr(ins[2]), p_.has_residual ? s.ptr(ins[3]) : nullptr, t_,
                                      p_.n * p_.k * p_.oh * p_.ow, p_.k, p_.oh * p_.ow, nhwc_, act, p_.act_alpha,
                                      p_.act_beta, s.stream));
    } else if (post_act_) {
      BroadcastDesc d;
      d.rank = 1;
      d.out_dims[0] = p_.n * p_.k * p_.oh * p_.ow;
      d.a_strides[0] = 1;
      KILN_CUDA_CHECK(launch_pointwise(activation_op(p_.activation), t_, y, nullptr, y, d, p_.act_alpha, p_.act_beta,
                                       s.stream));
    }
    return Status::Ok();
  }

  // Everything the measured time depends on (timing-cache key), with the workspace cap.
  std::string signature() const override {
    std::string sig = "conv x=" + std::to_string(p_.n) + "x" + std::to_string(p_.c) + "x" + std::to_string(p_.h) + "x" +
                      std::to_string(p_.w) + " w=" + std::to_string(p_.k) + "x" + std::to_string(p_.c / p_.groups) +
                      "x" + std::to_string(p_.r) + "x" + std::to_string(p_.sk) + " y=" + std::to_string(p_.oh) + "x" +
                      std::to_string(p_.ow) + " pad=" + std::to_string(p_.pad_h) + "," + std::to_string(p_.pad_w) +
                      " stride=" + std::to_string(p_.stride_h) + "," + std::to_string(p_.stride_w) +
                      " dil=" + std::to_string(p_.dil_h) + "," + std::to_string(p_.dil_w) +
                      " groups=" + std::to_string(p_.groups) + " " + storage_name(t_) + (nhwc_ ? " nhwc" : " nchw");
    if (t_ == StorageType::kF32) sig += tf32_ ? " tf32" : " fma";
    return sig + (fused_relu_ ? " +relu" : "") + (p_.has_residual ? " +residual" : "") +
           (post_act_ ? " +" + p_.activation : "") + " ws<=" + std::to_string(kMaxConvWorkspace);
  }

 private:
  // One call as enqueue makes it (the epilogue aside), with `ws` bytes of workspace.
  cudnnStatus_t run(ExecState& s, bool fused, cudnnConvolutionFwdAlgo_t algo, size_t ws) const {
    cudnnStatus_t st = cudnnSetStream(s.cudnn, s.stream);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const float one = 1.f, zero = 0.f;
    void* y = s.ptr(outs[0]);
    if (!fused)
      return cudnnConvolutionForward(s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo, s.workspace, ws,
                                     &zero, y_, y);
    const void* z = p_.has_residual ? s.ptr(ins[3]) : y;
    return cudnnConvolutionBiasActivationForward(s.cudnn, &one, x_, s.ptr(ins[0]), w_, s.ptr(ins[1]), conv_, algo,
                                                 s.workspace, ws, p_.has_residual ? &one : &zero, y_, z, b_,
                                                 s.ptr(ins[2]), act_, y_, y);
  }
  void describe() {
    // The name starts with the family "cudnn.conv_bias_act" either way; the epilogue path adds
    // "fallback=conv+epilogue".
    tactic = std::string("cudnn.conv_bias_act algo=") + std::to_string(static_cast<int>(algo_)) + " " +
             storage_name(t_) + (nhwc_ ? " nhwc" : " nchw") +
             (p_.c_unpadded > 0 ? " cpad=" + std::to_string(p_.c_unpadded) + "->" + std::to_string(p_.c) : "") +
             (fused_relu_ ? " +relu" : "") + (p_.has_residual ? " +residual" : "") +
             (post_act_ ? " +" + p_.activation : "") + (fused_ ? "" : " fallback=conv+epilogue");
  }

  ConvParams p_;
  StorageType t_;
  bool nhwc_, tf32_ = true, fused_relu_ = false, post_act_ = false;
  bool fused_ = true;  // cudnnConvolutionBiasActivationForward; false: conv + Kiln epilogue
  std::string fused_error_;  // why the last fused select failed ("" = none failed)
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t ws_ = 0;  // bytes the selected algorithm needs
};

}  // namespace

StatusOr<std::unique_ptr<Layer>> make_conv_layer(const ConvParams& p, StorageType t, bool nhwc, bool tf32) {
  auto l = std::make_unique<ConvLayer>(p, t, nhwc);
  KILN_RETURN_IF_ERROR(l->init(tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

}  // namespace kiln::cuda
