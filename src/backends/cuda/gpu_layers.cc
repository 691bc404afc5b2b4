// CUDA engine layers: cuDNN pooling, cuBLASLt GEMM, the choice between implementations, and
// Kiln's own kernels (the cuDNN convolutions: conv_layer.cc, conv_graph.cc). Each lists its
// tactics and selects one by id; the builder's tactic selector times them.
#include "backends/cuda/gpu_layers.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels_gemv.h"
#include "backends/cuda/kernels_transformer.h"
#include "backends/cuda/kernels_more.h"
#include "backends/cuda/pw_jit.h"

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

cudnnDataType_t cudnn_type(StorageType t) {
  switch (t) {
    case StorageType::kF16: return CUDNN_DATA_HALF;
    case StorageType::kBF16: return CUDNN_DATA_BFLOAT16;
    case StorageType::kI32: return CUDNN_DATA_INT32;
    case StorageType::kI64: return CUDNN_DATA_INT64;
    case StorageType::kBool: return CUDNN_DATA_BOOLEAN;
    case StorageType::kI8: return CUDNN_DATA_INT8;
    case StorageType::kF8E4M3: return CUDNN_DATA_FP8_E4M3;
    case StorageType::kF64: return CUDNN_DATA_DOUBLE;
    case StorageType::kU64: return CUDNN_DATA_INT64;  // not a cuDNN type; no cuDNN layer reads it
    case StorageType::kF32: break;
  }
  return CUDNN_DATA_FLOAT;
}

StatusOr<double> time_runs(ExecState& s, int reps, const std::function<Status()>& run) {
  KILN_RETURN_IF_ERROR(run());  // warm-up (not timed)
  reps = std::max(reps, 1);
  const bool cold = s.l2_flush != nullptr;
  // Warm: one event pair around all runs. Cold: a pair around each run, the flush write between
  // pairs (not timed).
  const int pairs = cold ? reps : 1;
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(pairs), nullptr);
  Status st;
  for (auto& e : ev)
    if (st.ok()) st = cuda_status(cudaEventCreate(&e), "cudaEventCreate", __FILE__, __LINE__);
  for (int r = 0; r < reps && st.ok(); ++r) {
    const int p = cold ? r : 0;
    if (cold)
      st = cuda_status(cudaMemsetAsync(s.l2_flush, r & 0xff, s.l2_flush_bytes, s.stream), "cudaMemsetAsync", __FILE__,
                       __LINE__);
    if (st.ok() && (cold || r == 0))
      st = cuda_status(cudaEventRecord(ev[2 * p], s.stream), "cudaEventRecord", __FILE__, __LINE__);
    if (st.ok()) st = run();
    if (st.ok() && (cold || r == reps - 1))
      st = cuda_status(cudaEventRecord(ev[2 * p + 1], s.stream), "cudaEventRecord", __FILE__, __LINE__);
  }
  if (st.ok()) st = cuda_status(cudaEventSynchronize(ev.back()), "cudaEventSynchronize", __FILE__, __LINE__);
  double total = 0;
  for (int p = 0; p < pairs && st.ok(); ++p) {
    float ms = 0;
    st = cuda_status(cudaEventElapsedTime(&ms, ev[2 * p], ev[2 * p + 1]), "cudaEventElapsedTime", __FILE__, __LINE__);
    total += ms;
  }
  for (auto& e : ev)
    if (e) cudaEventDestroy(e);
  KILN_RETURN_IF_ERROR(st);
  return total / reps;
}

StatusOr<double> TunableCudaLayer::time_ms(int iterations) {
  return time_runs(s_, iterations, [&] { return l_.enqueue(s_); });
}

Status select_first_that_runs(Layer& l, ExecState& s, const TacticSources& sources) {
  KILN_ASSIGN_OR_RETURN(std::vector<TacticId> ids, l.candidates(s));
  std::string reasons;
  for (TacticId id : ids) {
    if (!sources.has(tactic_id_source(id))) continue;
    Status st = l.select(id, s);
    if (st.ok()) return st;
    reasons += "\n    " + std::string(tactic_source_name(tactic_id_source(id))) + "#" +
               std::to_string(tactic_id_variant(id)) + ": " + st.message();
  }
  return unsupported("layer '" + l.name + "': no candidate tactic from the enabled sources (" + sources.to_string() +
                     ") runs" + reasons);
}

namespace {

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
    ceil_output_ = p.ceil_output;
    own_ = ceil_output_;
    describe();
    return Status::Ok();
  }
  // cuDNN's pooling first; Kiln's kernel beside it (the only one for a ceil_mode output).
  StatusOr<std::vector<TacticId>> candidates(ExecState&) override {
    if (ceil_output_) return std::vector<TacticId>{kKilnId};
    return std::vector<TacticId>{kCudnnId, kKilnId};
  }
  Status select(TacticId id, ExecState& s) override {
    if (id == kCudnnId && !ceil_output_) {
      if (s.verify) {
        cudnnStatus_t st = cudnnSetStream(s.cudnn, s.stream);
        if (st == CUDNN_STATUS_SUCCESS) st = run_cudnn(s);
        if (st != CUDNN_STATUS_SUCCESS) {
          cudnn_error_ = std::string("cudnnPoolingForward returned ") + cudnnGetErrorString(st) + " for " +
                         storage_name(t_);
          return unsupported(cudnn_error_);
        }
      }
      own_ = false;
      fallback.clear();
    } else if (id == kKilnId) {
      own_ = true;
      fallback = ceil_output_ ? "ceil_mode output " + std::to_string(d_.oh) + "x" + std::to_string(d_.ow) +
                                    " is larger than cuDNN's floored size; runs Kiln's pool kernel"
                              : (cudnn_error_.empty() ? std::string("Kiln's pool kernel timed faster than cuDNN's")
                                                      : cudnn_error_ + "; runs Kiln's pool kernel");
    } else {
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not a pooling tactic");
    }
    tactic_id = id;
    describe();
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
  static constexpr TacticId kCudnnId = make_tactic_id(TacticSource::kCudnn, 0x200);
  static constexpr TacticId kKilnId = make_tactic_id(TacticSource::kKiln, 0);
  StorageType t_ = StorageType::kF32;
  PoolDesc d_;
  bool own_ = false;  // Kiln's kernel instead of cuDNN
  bool ceil_output_ = false;  // only Kiln's kernel computes this output size
  std::string cudnn_error_;   // why cuDNN's pooling did not run ("" = it did, or was not tried)
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
};

// ---------------------------------------------------------------- GEMM (cuBLASLt)
// Tactic families: the GEMM straight into Y; the padded form (an [M, n_pad] output in the
// workspace, then its first N columns into Y); with out_f32, the padded form in the 16-bit
// storage compacted into Y's float32 (docs/decisions/0071, 0083).
enum class GemmForm { kDirect = 0, kPadded = 1, kPaddedF32 = 2 };

class GemmLayer : public Layer {
 public:
  ~GemmLayer() override {
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    for (auto* l : {a_, b_, c_, a_pad_, c_pad_, c_pad16_})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
  // Row-major Y[M,N] = X[M,K] W is column-major Y^T[N,M] = W^T[N,K] X^T[K,M]:
  // A = W (transposed when stored [N,K]), B = X^T (ld K), C = Y^T (ld N); bias runs along N.
  Status init(const GemmParams& p, StorageType t, bool tf32) {
    p_ = p;
    t_ = t;
    out_t_ = p.out_f32 ? StorageType::kF32 : t;
    tf32_ = tf32;
    if (p.out_f32 && (t == StorageType::kF32 || p.has_bias || p.has_residual))
      return invalid_argument("GEMM with a float32 output: only from 16-bit storage, without bias or residual");
    if (p.patches.on && p.n_pad > p.n) return invalid_argument("GEMM over conv patches with a padded N");
    if (p.patches.on && p.patches.nchw && p.has_residual)
      return invalid_argument("GEMM over NCHW conv patches with a residual");
    if (p.gate && (p.has_residual || p.relu || p.gelu_tanh || p.out_f32 || p.n_pad > p.n || p.n % 2 != 0))
      return invalid_argument("gated GEMM: an even N, no residual, activation, padded N or float32 output");
    if ((p.norm || p.gate) && p.patches.on) return invalid_argument("GEMM over conv patches with a norm or a gate");
    // Where each optional input is: [x, w, bias?, residual?, norm scale?].
    int next = 2;
    bias_in_ = p.has_bias ? next++ : -1;
    res_in_ = p.has_residual ? next++ : -1;
    norm_in_ = p.norm ? next++ : -1;
    const cudaDataType_t dt = cuda_type(t), ot = cuda_type(out_t_);
    // FP32 accumulation and FP32 alpha/beta for every storage type.
    const cublasComputeType_t ct =
        t != StorageType::kF32 ? CUBLAS_COMPUTE_32F : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, ct, CUDA_R_32F));
    const cublasOperation_t ta = p.weight_is_nk ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = p.has_bias ? (p.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                        : (p.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    if (p.gelu_tanh) epi = p.has_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (p.has_bias) {  // the bias vector is stored in D's type (cuBLASLt's default, stated explicitly)
      const int32_t bias_type = static_cast<int32_t>(dt);
      KILN_CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    if (p.has_residual) beta_ = 1.f;
    // The weight's leading dim: N, or n_pad when it is stored padded (the direct form then reads
    // its first N outputs; the padded form computes all n_pad into the workspace).
    const int64_t ldw = p.n_pad > p.n ? p.n_pad : p.n;
    if (p.weight_is_nk) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.k, p.n, p.k));
    else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_, dt, p.n, p.k, ldw));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_, dt, p.k, p.m, p.k));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_, ot, p.n, p.m, p.n));
    if (p.n_pad > p.n) {
      if (p.has_residual) return invalid_argument("GEMM with a padded N and a residual input");
      if (p.weight_is_nk) KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_pad_, dt, p.k, p.n_pad, p.k));
      else KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a_pad_, dt, p.n_pad, p.k, p.n_pad));
      KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_pad_, ot, p.n_pad, p.m, p.n_pad));
      // The padded output in the workspace, then cuBLASLt's own workspace 256-byte aligned after it.
      pad_bytes_[1] = round256(static_cast<size_t>(p.m) * p.n_pad * storage_bytes(out_t_));
      if (p.out_f32) {
        KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_pad16_, dt, p.n_pad, p.m, p.n_pad));
        pad_bytes_[2] = round256(static_cast<size_t>(p.m) * p.n_pad * storage_bytes(t));
      }
    }
    if (p.patches.on) {  // P [M, K] (and, NCHW, the GEMM's output) before everything else
      x_bytes_ = round256(static_cast<size_t>(p.m) * p.k * storage_bytes(t));
      pre_bytes_ = x_bytes_ + (p.patches.nchw ? round256(static_cast<size_t>(p.m) * p.n * storage_bytes(t)) : 0);
    }
    // The norm's X' [M, K], then the gate's product [M, N], before cuBLASLt's workspace.
    if (p.norm) x_bytes_ = round256(static_cast<size_t>(p.m) * p.k * storage_bytes(t));
    if (p.norm || p.gate)
      pre_bytes_ = x_bytes_ + (p.gate ? round256(static_cast<size_t>(p.m) * p.n * storage_bytes(t)) : 0);
    op = p.patches.on ? "Conv" : "Gemm";
    // Kiln's skinny GEMM (kernels_gemv.h) for few rows over a [N, K] weight, beside cuBLASLt's.
    gemv_.m = p.m;
    gemv_.n = p.gate ? p.n / 2 : p.n;
    gemv_.k = p.k;
    gemv_.t = t;
    gemv_.out_f32 = p.out_f32;
    gemv_.relu = p.relu;
    gemv_.norm = p.norm;
    gemv_.norm_eps = p.norm_eps;
    gemv_.gate = p.gate;
    gemv_ok_ = p.weight_is_nk && !p.patches.on && !p.gelu_tanh && gemv_supports(gemv_);
    describe(-1);
    return Status::Ok();
  }
  // Before select: the most a candidate may need (the prologue's buffers, the largest padded
  // output, cuBLASLt's cap); after: the selected tactic's.
  size_t workspace() const override {
    if (gemv_on_) return 0;
    const size_t pad = has_algo_ ? pad_bytes_[static_cast<int>(form_)] : std::max(pad_bytes_[1], pad_bytes_[2]);
    return pre_bytes_ + pad + cap_;
  }

  // One tactic per entry of cuBLASLt's heuristic list for this matmul and workspace cap; with a
  // padded N, also one per entry of each padded form's list (variant kGemmPaddedVariant /
  // kGemmPaddedF32Variant + index), when the workspace allows its [M, n_pad] output.
  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    KILN_RETURN_IF_ERROR(query_heuristics(s));
    std::vector<TacticId> c;
    for (int f = 0; f < 3; ++f)
      for (size_t i = 0; i < heur_[f].size(); ++i)
        c.push_back(make_tactic_id(TacticSource::kCublasLt, kFormBase[f] + static_cast<uint32_t>(i)));
    if (gemv_ok_)
      for (uint32_t r : {1u, 2u, 4u}) {
        GemvDesc d = gemv_;
        d.rows_per_warp = static_cast<int>(r);
        if (gemv_supports(d)) c.push_back(make_tactic_id(TacticSource::kKiln, kGemmGemvVariant + r));
      }
    return c;
  }
  Status select(TacticId id, ExecState& s) override {
    if (tactic_id_source(id) == TacticSource::kKiln) {
      const uint32_t r = tactic_id_variant(id) - kGemmGemvVariant;
      GemvDesc d = gemv_;
      d.rows_per_warp = static_cast<int>(r);
      if (!gemv_ok_ || (r != 1 && r != 2 && r != 4) || !gemv_supports(d))
        return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) +
                            " is not a skinny-GEMM tactic of this layer (" + signature() + ")");
      KILN_CUDA_CHECK(gemv_prepare(d));
      gemv_.rows_per_warp = static_cast<int>(r);
      gemv_on_ = true;
      has_algo_ = false;
      form_ = GemmForm::kDirect;
      tactic_id = id;
      restored = false;
      describe(-1);
      if (s.verify) return enqueue(s);
      return Status::Ok();
    }
    gemv_on_ = false;
    if (tactic_id_source(id) != TacticSource::kCublasLt)
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not a cuBLASLt tactic");
    uint32_t i = tactic_id_variant(id);
    const GemmForm form = i >= kGemmPaddedF32Variant ? GemmForm::kPaddedF32
                          : i >= kGemmPaddedVariant  ? GemmForm::kPadded
                                                     : GemmForm::kDirect;
    i -= kFormBase[static_cast<int>(form)];
    restored = false;
    // A load: the algorithm the build chose, from the plan's tactic data, without asking
    // cuBLASLt's heuristic again (which costs about 0.2 ms per layer and shape).
    if (!queried_ && restore(id, form, s)) {
      tactic_id = id;
      describe(static_cast<int>(i));
      if (s.verify) return enqueue(s);
      return Status::Ok();
    }
    if (!queried_) KILN_RETURN_IF_ERROR(query_heuristics(s));  // same library, same list
    const auto& list = heur_[static_cast<int>(form)];
    if (i >= list.size())
      return invalid_plan("layer '" + name + "': cuBLASLt heuristic #" + std::to_string(i) + form_note(form) +
                          " does not exist here (" + std::to_string(list.size()) + " listed)");
    algo_ = list[i];
    has_algo_ = true;
    form_ = form;
    tactic_id = id;
    describe(static_cast<int>(i));
    if (s.verify) return enqueue(s);
    return Status::Ok();
  }
  // The selected algorithm (cublasLtMatmulAlgo_t, which cublasLt.h documents as trivially
  // serializable for the same cuBLAS version; the plan header checks the version) by the layer's
  // signature and tactic id.
  void export_tactic_data(std::map<std::string, std::string>* out) const override {
    if (has_algo_ && tactic_id != kNoTactic)
      (*out)[data_key(tactic_id)] = std::string(reinterpret_cast<const char*>(&algo_), sizeof algo_);
  }
  void finalize(const std::vector<GVal>& vals) override {
    if (!p_.has_bias) return;
    const void* bias = vals[ins[bias_in_]].weight;  // the bias is always an uploaded weight
    cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
  }

  Status enqueue(ExecState& s) override {
    if (gemv_on_) return enqueue_gemv(s);
    const float alpha = 1.f, beta = beta_;
    char* ws = static_cast<char*>(s.workspace);
    size_t ws_bytes = s.workspace_bytes;
    const void* x = s.ptr(ins[0]);
    void* y = s.ptr(outs[0]);
    void* d = y;  // where the GEMM's dense [M, N] output goes
    const size_t pad = has_algo_ ? pad_bytes_[static_cast<int>(form_)] : 0;
    if (ws_bytes < pre_bytes_ + pad)
      return internal_error("layer '" + name + "': needs " + std::to_string(pre_bytes_ + pad) +
                            " bytes of workspace, " + std::to_string(ws_bytes) + " given");
    if (p_.patches.on) {  // the conv input's windows into P [M, K] (and the NCHW output's staging)
      KILN_CUDA_CHECK(launch_strided_copy(x, ws, static_cast<int>(storage_bytes(t_)), p_.patches.gather, s.stream));
      x = ws;
      if (p_.patches.nchw) d = ws + x_bytes_;
      ws += pre_bytes_;
      ws_bytes -= pre_bytes_;
    }
    if (p_.norm || p_.gate) {  // X' = RMSNorm(X) into the workspace; the gate's product after it
      if (p_.norm) {
        KILN_CUDA_CHECK(launch_rms_norm(x, s.ptr(ins[norm_in_]), p_.k, ws, t_, p_.m, p_.k, p_.norm_eps, s.stream));
        x = ws;
      }
      if (p_.gate) d = ws + x_bytes_;
      ws += pre_bytes_;
      ws_bytes -= pre_bytes_;
    }
    if (has_algo_ && form_ != GemmForm::kDirect) {  // GEMM into the workspace's [M, n_pad], then its first N columns
      void* dp = ws;
      ws += pad;
      ws_bytes -= pad;
      const bool f32 = form_ == GemmForm::kPaddedF32;
      cublasLtMatrixLayout_t cp = f32 ? c_pad16_ : c_pad_;
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &alpha, s.ptr(ins[1]), a_pad_, x, b_, &beta, dp, cp, dp, cp, &algo_,
                                       ws, std::min(ws_bytes, cap_), s.stream));
      if (f32)
        KILN_CUDA_CHECK(launch_compact_rows_to_f32(dp, t_, static_cast<float*>(d), p_.m, p_.n_pad, p_.n, s.stream));
      else
        KILN_CUDA_CHECK(
            launch_compact_rows(dp, d, static_cast<int>(storage_bytes(out_t_)), p_.m, p_.n_pad, p_.n, s.stream));
    } else {
      const void* c = p_.has_residual ? s.ptr(ins[res_in_]) : d;
      KILN_CUBLAS_CHECK(cublasLtMatmul(s.lt, desc_, &alpha, s.ptr(ins[1]), a_, x, b_, &beta, c, c_, d, c_,
                                       has_algo_ ? &algo_ : nullptr, ws, std::min(ws_bytes, cap_), s.stream));
    }
    if (p_.gate) KILN_CUDA_CHECK(launch_silu_gate(d, y, p_.m, p_.n / 2, t_, s.stream));
    if (p_.patches.nchw)
      KILN_CUDA_CHECK(launch_strided_copy(d, y, static_cast<int>(storage_bytes(t_)), p_.patches.scatter, s.stream));
    return Status::Ok();
  }
  Status enqueue_gemv(ExecState& s) {
    const void* bias = p_.has_bias ? s.ptr(ins[bias_in_]) : nullptr;
    const void* r = p_.has_residual ? s.ptr(ins[res_in_]) : nullptr;
    const void* scale = p_.norm ? s.ptr(ins[norm_in_]) : nullptr;
    KILN_CUDA_CHECK(launch_gemv(s.ptr(ins[0]), s.ptr(ins[1]), bias, r, scale, s.ptr(outs[0]), gemv_, s.stream));
    return Status::Ok();
  }

  // Everything the measured time depends on (timing-cache key), with the workspace cap.
  std::string signature() const override {
    std::string sig = "gemm m=" + std::to_string(p_.m) + " n=" + std::to_string(p_.n) + " k=" + std::to_string(p_.k) +
                      (p_.weight_is_nk ? " w=nk " : " w=kn ") + storage_name(t_);
    if (t_ == StorageType::kF32) sig += tf32_ ? " tf32" : " fma";
    return sig + (p_.has_bias ? " +bias" : "") + (p_.relu ? " +relu" : "") + (p_.gelu_tanh ? " +gelu_tanh" : "") +
           (p_.has_residual ? " +residual" : "") + (p_.norm ? " +rms_norm" : "") + (p_.gate ? " +silu_gate" : "") +
           (p_.n_pad > p_.n ? " n_pad=" + std::to_string(p_.n_pad) : "") + (p_.out_f32 ? " out=f32" : "") +
           patches_note() + " ws<=" + std::to_string(cap_);
  }

 private:
  static constexpr size_t kGemmWorkspace = 32u << 20;  // bytes
  static constexpr int kHeuristics = 8;                 // entries asked of the heuristic
  static constexpr uint32_t kFormBase[3] = {0, kGemmPaddedVariant, kGemmPaddedF32Variant};
  static size_t round256(size_t b) { return (b + 255) / 256 * 256; }
  static const char* form_note(GemmForm f) {
    return f == GemmForm::kDirect ? "" : (f == GemmForm::kPadded ? " (padded N)" : " (padded N, 16-bit)");
  }
  // The workspace left after the prologue's buffers (the patch matrix, the NCHW staging).
  size_t room(const ExecState& s) const { return s.workspace_bytes > pre_bytes_ ? s.workspace_bytes - pre_bytes_ : 0; }
  // The output layout of a form.
  cublasLtMatrixLayout_t c_of(GemmForm f) const {
    return f == GemmForm::kDirect ? c_ : (f == GemmForm::kPadded ? c_pad_ : c_pad16_);
  }
  std::string patches_note() const {
    if (!p_.patches.on) return "";
    const StridedDesc& g = p_.patches.gather;
    std::string n = " patches";
    for (int k = 0; k < g.rank; ++k) n += (k ? "x" : "=") + std::to_string(g.out_dims[k]);
    return n + (p_.patches.nchw ? " nchw" : " nhwc");
  }
  std::string data_key(TacticId id) const { return "cublaslt.matmul " + signature() + " id=" + std::to_string(id); }
  // The plan's algorithm for tactic `id`, checked by cublasLtMatmulAlgoCheck for this matmul
  // (and its workspace within the cap): true when restored; false sends select to the heuristic.
  bool restore(TacticId id, GemmForm form, ExecState& s) {
    const int f = static_cast<int>(form);
    if (!s.tactic_data || !c_of(form)) return false;
    const size_t r = room(s);
    cap_ = std::min(r, kGemmWorkspace);  // as query_heuristics sets it (part of the key)
    auto it = s.tactic_data->find(data_key(id));
    if (it == s.tactic_data->end() || it->second.size() != sizeof(cublasLtMatmulAlgo_t)) return false;
    if (form != GemmForm::kDirect && r < pad_bytes_[f] + 256) return false;
    cublasLtMatmulAlgo_t algo;
    std::memcpy(&algo, it->second.data(), sizeof algo);
    cublasLtMatmulHeuristicResult_t check{};
    cublasLtMatrixLayout_t a = form == GemmForm::kDirect ? a_ : a_pad_, c = c_of(form);
    const cublasStatus_t st = cublasLtMatmulAlgoCheck(s.lt, desc_, a, b_, c, c, &algo, &check);
    // The workspace enqueue gives cuBLASLt (after the padded output in the padded forms).
    const size_t avail = std::min(r - pad_bytes_[f], cap_);
    if (st != CUBLAS_STATUS_SUCCESS || check.state != CUBLAS_STATUS_SUCCESS || check.workspaceSize > avail) return false;
    algo_ = algo;
    has_algo_ = true;
    form_ = form;
    restored = true;
    return true;
  }
  // cuBLASLt's list for one form within `cap` bytes of workspace (empty when it has none).
  Status heuristic(GemmForm form, size_t cap, ExecState& s, std::vector<cublasLtMatmulAlgo_t>* out) {
    cublasLtMatmulPreference_t pref;
    KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &cap, sizeof cap);
    cublasLtMatmulHeuristicResult_t res[kHeuristics];
    int returned = 0;
    cublasLtMatrixLayout_t a = form == GemmForm::kDirect ? a_ : a_pad_, c = c_of(form);
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(s.lt, desc_, a, b_, c, c, pref, kHeuristics, res, &returned);
    cublasLtMatmulPreferenceDestroy(pref);
    KILN_CUBLAS_CHECK(st);
    out->clear();
    for (int i = 0; i < returned; ++i) out->push_back(res[i].algo);
    return Status::Ok();
  }
  Status query_heuristics(ExecState& s) {
    const size_t r = room(s);
    if (pre_bytes_ > 0 && r < 256)
      return unsupported("layer '" + name + "': the GEMM's " +
                         (p_.patches.on ? "conv patches need " : "norm / gate buffers need ") +
                         std::to_string(pre_bytes_) + " bytes of workspace besides cuBLASLt's, " +
                         std::to_string(s.workspace_bytes) + " allowed");
    cap_ = std::min(r, kGemmWorkspace);
    KILN_RETURN_IF_ERROR(heuristic(GemmForm::kDirect, cap_, s, &heur_[0]));
    // The padded forms, when the workspace holds their output besides cuBLASLt's own workspace.
    for (GemmForm f : {GemmForm::kPadded, GemmForm::kPaddedF32}) {
      const int i = static_cast<int>(f);
      heur_[i].clear();
      if (c_of(f) && r >= pad_bytes_[i] + 256)
        KILN_RETURN_IF_ERROR(heuristic(f, std::min(r - pad_bytes_[i], kGemmWorkspace), s, &heur_[i]));
    }
    // No form at all: unsupported (a form without algorithms just has no tactics).
    if (heur_[0].empty() && heur_[1].empty() && heur_[2].empty())
      return unsupported("layer '" + name + "': cuBLASLt has no " + storage_name(t_) + " algorithm within " +
                         std::to_string(cap_) + " bytes of workspace for " + signature());
    queried_ = true;
    return Status::Ok();
  }
  void describe(int idx) {
    if (gemv_on_) {
      tactic = "kiln.gemv rows/warp=" + std::to_string(gemv_.rows_per_warp) + " " + storage_name(t_) +
               (p_.out_f32 ? "->f32 out" : "") + (p_.norm ? " rms_norm+" : "") + (p_.has_bias ? " +bias" : "") +
               (p_.relu ? " +relu" : "") + (p_.has_residual ? " +residual" : "") + (p_.gate ? " +silu_gate" : "");
      return;
    }
    std::string form;
    if (has_algo_ && form_ == GemmForm::kPadded) form = " n_pad=" + std::to_string(p_.n_pad) + "+compact";
    if (has_algo_ && form_ == GemmForm::kPaddedF32) form = " n_pad=" + std::to_string(p_.n_pad) + "+compact_to_f32";
    std::string pre;
    if (p_.patches.on) pre = p_.patches.nchw ? " patchify nchw" : " patchify nhwc";
    if (p_.norm) pre += " rms_norm->";
    tactic = std::string("cublaslt.matmul") + (idx >= 0 ? " heuristic#" + std::to_string(idx) : "") + pre + form + " " +
             storage_name(t_) + (p_.out_f32 ? "->f32 out" : "") + (p_.has_bias ? " +bias" : "") +
             (p_.relu ? " +relu" : "") + (p_.gelu_tanh ? " +gelu_tanh" : "") + (p_.has_residual ? " +residual" : "") +
             (p_.gate ? " ->silu_gate" : "");
  }
  GemmParams p_{};
  StorageType t_ = StorageType::kF32;
  StorageType out_t_ = StorageType::kF32;  // Y's storage: t_, or float32 (out_f32)
  bool tf32_ = true;
  float beta_ = 0.f;  // 1 when the residual is cuBLASLt's C
  size_t cap_ = kGemmWorkspace;  // bytes of workspace the algorithms were chosen for
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatrixLayout_t a_pad_ = nullptr, c_pad_ = nullptr;  // the padded form's W and output (n_pad set)
  cublasLtMatrixLayout_t c_pad16_ = nullptr;                   // the padded 16-bit output (out_f32)
  size_t pad_bytes_[3] = {0, 0, 0};  // per form: its [M, n_pad] output in the workspace, 256-byte aligned
  size_t x_bytes_ = 0;    // patches: P [M, K] at the workspace's start, 256-byte aligned
  size_t pre_bytes_ = 0;  // patches: P and (NCHW) the GEMM's output staging; norm / gate: X', the product
  int bias_in_ = -1, res_in_ = -1, norm_in_ = -1;  // positions in ins of the optional inputs
  GemmForm form_ = GemmForm::kDirect;  // the selected tactic's form
  cublasLtMatmulAlgo_t algo_{};
  bool has_algo_ = false;
  bool queried_ = false;  // heur_ holds cuBLASLt's lists
  GemvDesc gemv_{};       // the skinny-GEMM tactics' shapes (rows_per_warp: the selected variant's)
  bool gemv_ok_ = false;  // the layer offers them (weight [N, K], few rows, 16-bit, no GELU or patches)
  bool gemv_on_ = false;  // one of them is selected
  std::vector<cublasLtMatmulAlgo_t> heur_[3];  // cuBLASLt's heuristic list per form
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

// A FusedPointwise program: the interpreter (launch_fused_pointwise; variant 0), or the program
// compiled to its own kernel (pw_jit.h; variant 1) when its inputs are read in whole 16-byte
// vectors and NVRTC or the plan's cubin is there. The builder times both.
class FusedPointwiseLayer : public Layer {
 public:
  static constexpr TacticId kInterpreter = make_tactic_id(TacticSource::kKiln, 0);
  static constexpr TacticId kGenerated = make_tactic_id(TacticSource::kKiln, 1);
  FusedPointwiseLayer(const PwDeviceProgram& p, StorageType t) : p_(p), t_(t), shape_(pw_jit_shape(p, t)) {
    op = "FusedPointwise";
    describe();
  }
  // The program, the output's dims and each input's strides: what the time depends on.
  std::string signature() const override {
    std::string sig = "fused_pointwise " + std::string(storage_name(t_)) + " dims=";
    for (int d = 0; d < p_.rank; ++d) sig += (d ? "x" : "") + std::to_string(p_.out_dims[d]);
    for (int k = 0; k < p_.num_inputs; ++k) {
      sig += " in" + std::to_string(k) + "=";
      for (int d = 0; d < p_.rank; ++d) sig += (d ? "," : "") + std::to_string(p_.in_strides[k][d]);
    }
    sig += " prog=";
    for (int j = 0; j < p_.num_instrs; ++j) {
      const PwDeviceInstr& in = p_.instrs[j];
      sig += (j ? ";" : "") + std::to_string(in.op) + "(";
      for (int q = 0; q < ir::kMaxPwArgs; ++q) {
        uint32_t bits;
        std::memcpy(&bits, &in.imm[q], sizeof bits);
        sig += (q ? "," : "") + (in.src[q] == kPwImmediate ? "#" + std::to_string(bits) : std::to_string(in.src[q]));
      }
      sig += ")";
    }
    return sig;
  }
  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    std::vector<TacticId> c;
    if (shape_.ok && (s.tactic_data || nvrtc_available())) c.push_back(kGenerated);
    c.push_back(kInterpreter);
    return c;
  }
  Status select(TacticId id, ExecState& s) override {
    restored = false;
    if (id == kInterpreter) {
      jit_.reset();
    } else if (id == kGenerated && shape_.ok) {
      const int arch = current_arch();
      const std::string src = pw_jit_source(p_, t_, shape_.mode);
      key_ = pw_jit_key(src, arch);
      const std::string* cubin = nullptr;
      if (s.tactic_data)
        if (auto it = s.tactic_data->find(key_); it != s.tactic_data->end()) cubin = &it->second;
      auto k = pw_jit_kernel(key_, src, cubin, arch);
      if (!k.ok()) return Status(k.status().code(), "layer '" + name + "': " + k.status().message());
      jit_ = *k;
      restored = cubin != nullptr;
    } else {
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not one of its tactics" +
                          (id == kGenerated ? " (" + shape_.why + ")" : ""));
    }
    tactic_id = id;
    describe();
    if (s.verify) return enqueue(s);
    return Status::Ok();
  }
  // The generated kernel's cubin, so a load needs no NVRTC (and compiles nothing).
  void export_tactic_data(std::map<std::string, std::string>* out) const override {
    if (jit_) (*out)[key_] = jit_->cubin();
  }
  Status enqueue(ExecState& s) override {
    PwDevicePointers ptrs;
    for (size_t k = 0; k < ins.size() && k < static_cast<size_t>(ir::kMaxPwInputs); ++k) ptrs.in[k] = s.ptr(ins[k]);
    void* y = s.ptr(outs[0]);
    if (jit_) {
      PwJitArgs a;
      a.y = y;
      a.total = shape_.total;
      bool aligned = reinterpret_cast<uintptr_t>(y) % 16 == 0;
      for (int k = 0; k < p_.num_inputs; ++k) {
        a.in[k] = ptrs.in[k];
        a.period[k] = shape_.period[k];
        aligned &= shape_.mode[k] == PwJitInput::kScalar || reinterpret_cast<uintptr_t>(ptrs.in[k]) % 16 == 0;
      }
      // Arena offsets are 256-byte aligned; a view at an odd offset runs the interpreter.
      if (aligned) {
        KILN_CUDA_CHECK(jit_->launch(a, t_, s.stream));
        return Status::Ok();
      }
    }
    KILN_CUDA_CHECK(launch_fused_pointwise(p_, ptrs, y, t_, s.stream));
    return Status::Ok();
  }

 private:
  void describe() {
    tactic = std::string(jit_ ? "kiln.pw_jit " : "kiln.fused_pointwise ") + storage_name(t_) +
             " instrs=" + std::to_string(p_.num_instrs);
  }
  PwDeviceProgram p_;
  StorageType t_;
  PwJitShape shape_;
  std::string key_;                            // the generated kernel's tactic-data key
  std::shared_ptr<const PwJitKernel> jit_;     // the generated kernel, when selected
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
  explicit ChoiceLayer(std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls) {
    for (auto& [src, layer] : impls) {
      sources_.push_back(src);
      cands_.push_back(std::move(layer));
    }
    op = cands_[0]->op;
    tactic = cands_[0]->tactic;
  }
  // Before a select: the most any implementation may need; after: the selected one's.
  size_t workspace() const override {
    if (tactic_id != kNoTactic) return cands_[chosen_]->workspace();
    size_t w = 0;
    for (const auto& c : cands_) w = std::max(w, c->workspace());
    return w;
  }
  // Every implementation's candidates; one whose listing fails (no heuristic result, say)
  // contributes none, and the error is kept for when no other implementation has any.
  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    sync();
    std::vector<TacticId> all;
    Status first_error = Status::Ok();
    for (auto& c : cands_) {
      auto ids = c->candidates(s);
      if (!ids.ok()) {
        if (first_error.ok()) first_error = ids.status();
        continue;
      }
      all.insert(all.end(), ids->begin(), ids->end());
    }
    if (all.empty() && !first_error.ok()) return first_error;
    return all;
  }
  // Hands `id` to the implementation of its source.
  Status select(TacticId id, ExecState& s) override {
    sync();
    for (size_t i = 0; i < cands_.size(); ++i) {
      if (source(i) != tactic_id_source(id)) continue;
      KILN_RETURN_IF_ERROR(cands_[i]->select(id, s));
      chosen_ = i;
      tactic_id = id;
      op = cands_[i]->op;
      tactic = cands_[i]->tactic;
      fallback = cands_[i]->fallback;
      restored = cands_[i]->restored;
      return Status::Ok();
    }
    return invalid_plan("layer '" + name + "': no implementation has tactic id " + std::to_string(id) + " (source " +
                        tactic_source_name(tactic_id_source(id)) + ")");
  }
  // One signature for the whole choice: the implementations' own, joined.
  std::string signature() const override {
    std::string sig = "choice{";
    for (size_t i = 0; i < cands_.size(); ++i) sig += (i ? " ; " : "") + cands_[i]->signature();
    return sig + "}";
  }
  void finalize(const std::vector<GVal>& vals) override {
    sync();
    for (auto& c : cands_) c->finalize(vals);
  }
  Status enqueue(ExecState& s) override { return cands_[chosen_]->enqueue(s); }
  void export_tactic_data(std::map<std::string, std::string>* out) const override {
    if (tactic_id != kNoTactic) cands_[chosen_]->export_tactic_data(out);
  }

 private:
  void sync() {
    for (auto& c : cands_) {
      c->name = name;
      c->ins = ins;
      c->outs = outs;
    }
  }
  TacticSource source(size_t i) const { return sources_[i]; }
  std::vector<std::unique_ptr<Layer>> cands_;
  std::vector<TacticSource> sources_;  // per implementation: the source of all its tactics
  size_t chosen_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_choice_layer(std::vector<std::pair<TacticSource, std::unique_ptr<Layer>>> impls) {
  return std::make_unique<ChoiceLayer>(std::move(impls));
}

StatusOr<std::unique_ptr<Layer>> make_pool_layer(const PoolParams& p, StorageType t, bool nhwc) {
  auto l = std::make_unique<PoolLayer>();
  KILN_RETURN_IF_ERROR(l->init(p, t, nhwc));
  return std::unique_ptr<Layer>(std::move(l));
}

bool cublaslt_gelu_is_tanh() {
  static std::mutex mu;
  static std::map<int, bool> by_device;
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  std::lock_guard<std::mutex> lock(mu);
  auto it = by_device.find(dev);
  if (it != by_device.end()) return it->second;
  // Y [m, n] = X W + bias with X = 0: Y = GELU(bias), bias a sweep of n values in [-6, 6].
  constexpr int n = 1024, m = 8, k = 8;
  std::vector<float> bias(n), y(static_cast<size_t>(m) * n);
  for (int i = 0; i < n; ++i) bias[i] = -6.f + 12.f * static_cast<float>(i) / (n - 1);
  bool ok = false;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  void *w = nullptr, *x = nullptr, *yd = nullptr, *b = nullptr;
  do {
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) break;
    if (cudaMalloc(&w, sizeof(float) * k * n) != cudaSuccess || cudaMalloc(&x, sizeof(float) * m * k) != cudaSuccess ||
        cudaMalloc(&yd, sizeof(float) * m * n) != cudaSuccess || cudaMalloc(&b, sizeof(float) * n) != cudaSuccess)
      break;
    if (cudaMemset(w, 0, sizeof(float) * k * n) != cudaSuccess || cudaMemset(x, 0, sizeof(float) * m * k) != cudaSuccess ||
        cudaMemcpy(b, bias.data(), sizeof(float) * n, cudaMemcpyHostToDevice) != cudaSuccess)
      break;
    if (cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) break;
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_GELU_BIAS;
    if (cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof b) != CUBLAS_STATUS_SUCCESS)
      break;
    if (cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, n, k, n) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, m, k) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, n, m, n) != CUBLAS_STATUS_SUCCESS)
      break;
    const float alpha = 1.f, beta = 0.f;
    if (cublasLtMatmul(lt, desc, &alpha, w, la, x, lb, &beta, yd, lc, yd, lc, nullptr, nullptr, 0, nullptr) !=
        CUBLAS_STATUS_SUCCESS)
      break;
    if (cudaMemcpy(y.data(), yd, sizeof(float) * m * n, cudaMemcpyDeviceToHost) != cudaSuccess) break;
    double worst = 0;
    for (int r = 0; r < m; ++r)
      for (int i = 0; i < n; ++i) {
        const double t = bias[i];
        const double want = 0.5 * t * (1 + std::tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)));
        worst = std::max(worst, std::fabs(static_cast<double>(y[static_cast<size_t>(r) * n + i]) - want));
      }
    ok = worst <= 2e-5;
  } while (false);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (lc) cublasLtMatrixLayoutDestroy(lc);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (lt) cublasLtDestroy(lt);
  for (void* p : {w, x, yd, b})
    if (p) cudaFree(p);
  cudaGetLastError();  // a failed probe leaves no sticky error for the caller's next check
  by_device[dev] = ok;
  return ok;
}

int64_t gemm_padded_n(int64_t n, StorageType t) {
  const int64_t per16 = 16 / static_cast<int64_t>(storage_bytes(t));  // elements per 16 bytes
  if (n <= 0 || n % per16 == 0) return 0;
  return (n + 63) / 64 * 64;
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
    case StorageType::kBool: return CUDA_R_8U;
    case StorageType::kI8: return CUDA_R_8I;
    case StorageType::kF8E4M3: return CUDA_R_8F_E4M3;
    case StorageType::kF64: return CUDA_R_64F;
    case StorageType::kU64: return CUDA_R_64U;
    case StorageType::kF32: break;
  }
  return CUDA_R_32F;
}

}  // namespace kiln::cuda
