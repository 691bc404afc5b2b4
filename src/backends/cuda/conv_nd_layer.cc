// N-D convolution and transposed convolution through cuDNN's legacy Nd descriptors (gpu_layers.h
// make_conv_nd_layer, docs/decisions/0070). Tactics: one per cuDNN algorithm (forward for Conv,
// backward-data for ConvTranspose; in fp32 the GEMM-based and direct ones only), variant = the
// algorithm's enum value; an algorithm cuDNN does not support for the descriptors, or whose
// workspace exceeds the cap, fails select() and the selector tries the next.
#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_layers.h"
#include "backends/cuda/kernels_nn.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxConvNdWorkspace = 256u << 20;  // bytes cuDNN's algorithm may use
constexpr size_t kAlign = 256;

size_t align_up(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

std::string join(const int64_t* v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? "x" : "") + std::to_string(v[i]);
  return s;
}

class ConvNdLayer : public Layer {
 public:
  ConvNdLayer(const ConvNdParams& p, StorageType t) : p_(p), t_(t) {}
  ~ConvNdLayer() override {
    if (a_) cudnnDestroyTensorDescriptor(a_);
    if (b_) cudnnDestroyTensorDescriptor(b_);
    if (w_) cudnnDestroyFilterDescriptor(w_);
    if (conv_) cudnnDestroyConvolutionDescriptor(conv_);
  }

  // Descriptors: Conv reads a_ (x, or its zero-padded copy) and writes b_ (y); ConvTranspose reads
  // a_ (x, cuDNN's dy) and writes b_ (the full output, cuDNN's dx).
  Status init(bool tf32) {
    tf32_ = tf32;
    if (p_.nd < 1 || p_.nd > 3) return unsupported("convolution with " + std::to_string(p_.nd) + " spatial dims");
    if (p_.transpose && (p_.has_residual || p_.act != PointwiseOp::kIdentity))
      return unsupported("ConvTranspose with a fused epilogue");
    if ((p_.has_residual || p_.act != PointwiseOp::kIdentity) && !p_.has_bias)
      return invalid_argument("Conv: a fused epilogue needs the bias input");
    const int nd = p_.nd;
    prepad_ = false;
    for (int d = 0; d < nd; ++d) {
      if (p_.pad_begin[d] != p_.pad_end[d]) prepad_ = true;
      a_sp_[d] = p_.in[d];
      if (p_.transpose) b_sp_[d] = (p_.in[d] - 1) * p_.stride[d] + (p_.kernel[d] - 1) * p_.dilation[d] + 1;
    }
    if (!p_.transpose && prepad_)
      for (int d = 0; d < nd; ++d) a_sp_[d] = p_.in[d] + p_.pad_begin[d] + p_.pad_end[d];
    const int64_t a_ch = p_.c, b_ch = p_.k;
    // cuDNN's spatial dims: a 1-D op is 2-D with a leading H of 1.
    const int sd = nd == 1 ? 2 : nd, lead = sd - nd;
    int a_dims[5], b_dims[5], w_dims[5], pads[3], strides[3], dils[3];
    a_dims[0] = b_dims[0] = static_cast<int>(p_.n);
    a_dims[1] = static_cast<int>(a_ch);
    b_dims[1] = static_cast<int>(b_ch);
    // Conv: [K, C/g, k...]; ConvTranspose (the forward conv from its output to its input):
    // [C, K/g, k...] — ONNX's own W layouts.
    w_dims[0] = static_cast<int>(p_.transpose ? p_.c : p_.k);
    w_dims[1] = static_cast<int>(p_.transpose ? p_.k / p_.groups : p_.c / p_.groups);
    for (int i = 0; i < sd; ++i) {
      const int d = i - lead;  // the ONNX spatial dim, < 0 for the 1-D op's H
      a_dims[2 + i] = d < 0 ? 1 : static_cast<int>(a_sp_[d]);
      b_dims[2 + i] = d < 0 ? 1 : static_cast<int>(p_.transpose ? b_sp_[d] : p_.out[d]);
      w_dims[2 + i] = d < 0 ? 1 : static_cast<int>(p_.kernel[d]);
      pads[i] = d < 0 || p_.transpose || prepad_ ? 0 : static_cast<int>(p_.pad_begin[d]);
      strides[i] = d < 0 ? 1 : static_cast<int>(p_.stride[d]);
      dils[i] = d < 0 ? 1 : static_cast<int>(p_.dilation[d]);
    }
    const cudnnDataType_t dt = cudnn_type(t_);
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&a_));
    KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b_));
    KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
    KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_));
    KILN_RETURN_IF_ERROR(set_packed(a_, dt, sd + 2, a_dims));
    KILN_RETURN_IF_ERROR(set_packed(b_, dt, sd + 2, b_dims));
    KILN_CUDNN_CHECK(cudnnSetFilterNdDescriptor(w_, dt, CUDNN_TENSOR_NCHW, sd + 2, w_dims));
    // Float accumulation for every storage type (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configs).
    KILN_CUDNN_CHECK(
        cudnnSetConvolutionNdDescriptor(conv_, sd, pads, strides, dils, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    KILN_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_, static_cast<int>(p_.groups)));
    const cudnnMathType_t math =
        t_ != StorageType::kF32 ? CUDNN_TENSOR_OP_MATH : (tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    KILN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_, math));
    // The forward conv these descriptors describe must produce what ONNX's geometry says: y for
    // Conv, the transposed op's input for ConvTranspose.
    const cudnnTensorDescriptor_t fwd_in = p_.transpose ? b_ : a_;
    int got[5];
    KILN_CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(conv_, fwd_in, w_, sd + 2, got));
    const int* want = p_.transpose ? a_dims : b_dims;
    for (int i = 0; i < sd + 2; ++i)
      if (got[i] != want[i])
        return unsupported(std::string(p_.transpose ? "ConvTranspose" : "Conv") + ": cuDNN's convolution geometry gives " +
                           join_int(got, sd + 2) + ", the op needs " + join_int(want, sd + 2));
    int64_t buf_elems = 0;
    if (p_.transpose) {
      buf_elems = p_.n * p_.k;
      for (int d = 0; d < nd; ++d) buf_elems *= b_sp_[d];
    } else if (prepad_) {
      buf_elems = p_.n * p_.c;
      for (int d = 0; d < nd; ++d) buf_elems *= a_sp_[d];
    }
    buf_ = align_up(static_cast<size_t>(buf_elems) * storage_bytes(t_));
    op = p_.transpose ? "ConvTranspose" : (p_.has_residual || p_.act != PointwiseOp::kIdentity ? "FusedConv" : "Conv");
    describe();
    return Status::Ok();
  }

  size_t workspace() const override { return buf_ + (tactic_id == kNoTactic ? kMaxConvNdWorkspace : ws_); }

  // IMPLICIT_PRECOMP_GEMM (forward) / ALGO_1 (backward data) first, then the others in enum order.
  // In fp32 only the direct and GEMM-based algorithms: FFT and Winograd round differently
  // enough to miss fp32 tolerances near zero (ONNX's backend tests: rtol 1e-3, atol 1e-7).
  StatusOr<std::vector<TacticId>> candidates(ExecState&) override {
    std::vector<TacticId> c = {make_tactic_id(TacticSource::kCudnn, 1)};
    for (uint32_t a = 0; a < algo_count(); ++a)
      if (a != 1 && allowed(a)) c.push_back(make_tactic_id(TacticSource::kCudnn, a));
    return c;
  }

  Status select(TacticId id, ExecState& s) override {
    const uint32_t a = tactic_id_variant(id);
    if (tactic_id_source(id) != TacticSource::kCudnn || a >= algo_count() || !allowed(a))
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not a cuDNN " + op + " tactic");
    if (s.workspace_bytes < buf_)
      return unsupported("layer '" + name + "': needs " + std::to_string(buf_) +
                         " bytes of workspace for its padded input / full output, the cap is " +
                         std::to_string(s.workspace_bytes));
    const size_t cap = std::min(s.workspace_bytes - buf_, kMaxConvNdWorkspace);
    size_t need = 0;
    cudnnStatus_t st =
        p_.transpose
            ? cudnnGetConvolutionBackwardDataWorkspaceSize(s.cudnn, w_, a_, conv_, b_,
                                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(a), &need)
            : cudnnGetConvolutionForwardWorkspaceSize(s.cudnn, a_, w_, conv_, b_,
                                                      static_cast<cudnnConvolutionFwdAlgo_t>(a), &need);
    if (st == CUDNN_STATUS_SUCCESS && need > cap)
      return Status(StatusCode::kOutOfMemory, "layer '" + name + "': algorithm " + std::to_string(a) + " needs " +
                                                  std::to_string(need) + " bytes of workspace, " +
                                                  std::to_string(cap) + " allowed");
    if (st == CUDNN_STATUS_SUCCESS && s.verify) {
      const Status r = run(s, a, need);
      if (!r.ok()) return unsupported("layer '" + name + "': " + r.message());
    }
    if (st != CUDNN_STATUS_SUCCESS)
      return unsupported("layer '" + name + "': cuDNN " + op + " algorithm " + std::to_string(a) + ": " +
                         cudnnGetErrorString(st));
    algo_ = a;
    ws_ = need;
    tactic_id = id;
    describe();
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override { return run(s, algo_, ws_); }

  std::string signature() const override {
    std::string sig = std::string(p_.transpose ? "conv_transpose_nd" : "conv_nd") + " n=" + std::to_string(p_.n) +
                      " c=" + std::to_string(p_.c) + " k=" + std::to_string(p_.k) + " in=" + join(p_.in, p_.nd) +
                      " out=" + join(p_.out, p_.nd) + " kernel=" + join(p_.kernel, p_.nd) +
                      " stride=" + join(p_.stride, p_.nd) + " dil=" + join(p_.dilation, p_.nd) +
                      " pads=" + join(p_.pad_begin, p_.nd) + "," + join(p_.pad_end, p_.nd) +
                      " groups=" + std::to_string(p_.groups) + " " + storage_name(t_);
    if (t_ == StorageType::kF32) sig += tf32_ ? " tf32" : " fma";
    return sig + (p_.has_bias ? " +bias" : "") + (p_.has_residual ? " +residual" : "") +
           (p_.act != PointwiseOp::kIdentity ? " +act" + std::to_string(static_cast<int>(p_.act)) : "") + " ws<=" + std::to_string(kMaxConvNdWorkspace);
  }

 private:
  uint32_t algo_count() const {
    return p_.transpose ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT : CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  }
  bool allowed(uint32_t a) const {
    if (t_ != StorageType::kF32) return true;
    return p_.transpose ? (a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
                        : (a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
                           a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM ||
                           a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT);
  }
  static std::string join_int(const int* v, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += (i ? "x" : "") + std::to_string(v[i]);
    return s;
  }
  static Status set_packed(cudnnTensorDescriptor_t d, cudnnDataType_t dt, int nb, const int* dims) {
    int strides[5];
    strides[nb - 1] = 1;
    for (int i = nb - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
    KILN_CUDNN_CHECK(cudnnSetTensorNdDescriptor(d, dt, nb, dims, strides));
    return Status::Ok();
  }
  // The op's spatial dims as the window kernel's three (leading 1s).
  void dims3(const int64_t* v, int64_t* o) const {
    for (int i = 0; i < 3; ++i) o[i] = i < 3 - p_.nd ? 1 : v[i - (3 - p_.nd)];
  }

  Status run(ExecState& s, uint32_t algo, size_t ws) const {
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    const float one = 1.f, zero = 0.f;
    char* buf = static_cast<char*>(s.workspace);
    void* alg_ws = buf_ + ws > 0 ? static_cast<void*>(buf + buf_) : nullptr;
    const void* x = s.ptr(ins[0]);
    const void* w = s.ptr(ins[1]);
    const void* bias = p_.has_bias ? s.ptr(ins[2]) : nullptr;
    void* y = s.ptr(outs[0]);
    int64_t in3[3], a3[3], b3[3], out3[3], off[3];
    dims3(p_.in, in3);
    dims3(a_sp_, a3);
    dims3(b_sp_, b3);
    dims3(p_.out, out3);
    if (p_.transpose) {
      KILN_CUDNN_CHECK(cudnnConvolutionBackwardData(s.cudnn, &one, w_, w, a_, x, conv_,
                                                    static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), alg_ws, ws,
                                                    &zero, b_, buf));
      // y[o] = full[o + pad_begin] (zeros past the full output), + bias.
      int64_t pb[3];
      dims3(p_.pad_begin, pb);
      for (int i = 0; i < 3; ++i) off[i] = i < 3 - p_.nd ? 0 : -pb[i];
      KILN_CUDA_CHECK(launch_window_copy(buf, y, t_, p_.n * p_.k, p_.k, b3, out3, off, bias, s.stream));
      return Status::Ok();
    }
    const void* xin = x;
    if (prepad_) {
      int64_t pb[3];
      dims3(p_.pad_begin, pb);
      for (int i = 0; i < 3; ++i) off[i] = i < 3 - p_.nd ? 0 : pb[i];
      KILN_CUDA_CHECK(launch_window_copy(x, buf, t_, p_.n * p_.c, p_.c, in3, a3, off, nullptr, s.stream));
      xin = buf;
    }
    KILN_CUDNN_CHECK(cudnnConvolutionForward(s.cudnn, &one, a_, xin, w_, w, conv_,
                                             static_cast<cudnnConvolutionFwdAlgo_t>(algo), alg_ws, ws, &zero, b_, y));
    if (bias) {
      const int64_t spatial = out3[0] * out3[1] * out3[2];
      const void* z = p_.has_residual ? s.ptr(ins[3]) : nullptr;
      KILN_CUDA_CHECK(launch_bias_act(y, bias, z, t_, p_.n * p_.k * spatial, p_.k, spatial, false, p_.act, p_.act_alpha,
                                      p_.act_beta, s.stream));
    }
    return Status::Ok();
  }

  void describe() {
    tactic = std::string(p_.transpose ? "cudnn.conv_transpose_nd" : "cudnn.conv_nd") + " algo=" + std::to_string(algo_) +
             " " + std::to_string(p_.nd) + "d " + storage_name(t_) + (prepad_ ? " +prepad" : "") +
             (p_.has_bias ? " +bias" : "") + (p_.has_residual ? " +residual" : "") +
             (p_.act != PointwiseOp::kIdentity ? " +act" : "");
  }

  ConvNdParams p_;
  StorageType t_;
  bool tf32_ = true, prepad_ = false;
  int64_t a_sp_[3] = {1, 1, 1}, b_sp_[3] = {1, 1, 1};  // spatial dims of a_ and (transpose) b_
  size_t buf_ = 0;  // workspace bytes for the padded input / the full output (aligned)
  cudnnTensorDescriptor_t a_ = nullptr, b_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  uint32_t algo_ = 1;
  size_t ws_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Layer>> make_conv_nd_layer(const ConvNdParams& p, StorageType t, bool tf32) {
  auto l = std::make_unique<ConvNdLayer>(p, t);
  KILN_RETURN_IF_ERROR(l->init(tf32));
  return std::unique_ptr<Layer>(std::move(l));
}

}  // namespace kiln::cuda
