// QuantConv (ops.def; passes/fuse_qdq_conv.cc; docs/decisions/0078): a 2-D convolution in 8 bits,
// NHWC. X (the plan's float storage, NHWC) is quantized per tensor into the workspace (Kiln's
// kernel, ONNX QuantizeLinear rounding, as QuantLinear's), convolved with the stored 8-bit weight
// (uploaded KRSC) into an int32 / float32 accumulator [N*OH*OW, K], and Kiln's epilogue kernel
// applies in one pass the per-channel scale (and the zero-point row-sum correction), the bias,
// the residual and ReLU into Y (NHWC, the plan's float storage). Tactics, timed by the builder:
//   cublaslt  a 1x1, stride-1, unpadded conv with C and K multiples of 16 is the GEMM
//             [N*H*W, C] x [C, K]: cuBLASLt INT8 IMMA (int32) or FP8 E4M3 (float32, sm_89+),
//             "TN", each entry of its heuristic list (as QuantLinear);
//   cudnn     INT8: cudnnConvolutionForward, x / w INT8 NHWC (C % 4 == 0), INT32 compute, FLOAT
//             output ("INT8_EXT_CONFIG", cuDNN's legacy API), IMPLICIT_PRECOMP_GEMM;
//   cudnn_graph  FP8 with C, K multiples of 16: one cuDNN operation graph per engine configuration
//             cuDNN lists (conv8_graph.h), the scale, bias, residual and ReLU fused into the conv
//             kernel (no separate epilogue pass; sm_90);
//   kiln.conv8_igemm  Kiln's implicit-GEMM tensor-core conv (kernels_conv8.h, decision 0080), one
//             tactic per tile variant, the epilogue fused (no accumulator, no separate pass); C % 16
//             == 0, K % 8 == 0, INT8 on sm_80+, FP8 on sm_89+;
//   kiln      the reference direct conv (kernels_quant.h), any shape and GPU.
// The weight is uploaded as 1 byte per element (the plan keeps the graph's 8-bit constant).
// 8-bit activations (passes/requantize_quant_conv.cc; docs/decisions/0081): an X stored as kI8 /
// kF8E4M3 is the quantized input itself (no quantize kernel, no workspace copy), and a node with
// y_scale / y_zero_point / y_type writes Y as those 8-bit codes from the epilogue (Requant8; every
// tactic but cudnn_graph, which writes float only and is not offered then).
#include <cublasLt.h>
#include <cudnn.h>

#include <cmath>
#include <vector>

#include "backends/cuda/conv8_graph.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device.h"
#include "backends/cuda/gemm8.h"
#include "backends/cuda/kernels_conv8.h"
#include "backends/cuda/kernels_quant.h"
#include "backends/cuda/layer_factory.h"

namespace kiln::cuda {
namespace {

struct QuantConvParams {
  Conv8Geometry g{};
  bool fp8 = false;
  float x_scale = 1.f;
  int zero_point = 0;
  bool has_bias = false, has_residual = false, relu = false;
  StorageType x_type = StorageType::kF32, y_type = StorageType::kF32;
  // 8-bit activations (docs/decisions/0081): X already quantized (x_type kI8 / kF8E4M3), and Y
  // written as QuantizeLinear(y, y_scale, y_zero_point) codes (y_type kI8 / kF8E4M3), the
  // residual then read in res_type (the float storage).
  bool x_8bit = false, y_8bit = false;
  float y_scale = 1.f;
  int y_zero_point = 0;
  StorageType res_type = StorageType::kF32;
  int64_t m() const { return g.n * g.oh * g.ow; }  // GEMM rows: output pixels
  bool gemm_like() const {
    return g.r == 1 && g.s == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 && g.pad_w == 0 &&
           g.c % 16 == 0 && g.k % 16 == 0;
  }
};

size_t align256(size_t b) { return (b + 255) / 256 * 256; }

constexpr uint32_t kCudnnIpg = static_cast<uint32_t>(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);

// ins: 0 X (NHWC; float storage, or the 8-bit codes), 1 W [K, R, S, C] 8-bit, 2 w_scale [K] f32,
// 3 weight sums [K] f32 (-1 without a zero point), 4 bias [K] f32 (zeros when the node has none),
// 5 residual (NHWC, the float storage; -1 without), 6 x_scale * w_scale [K] f32 (the cuDNN FP8
// graph's S and Conv8Epilogue::scale).
class QuantConvLayer : public Layer {
 public:
  ~QuantConvLayer() override {
    if (xd_) cudnnDestroyTensorDescriptor(xd_);
    if (yd_) cudnnDestroyTensorDescriptor(yd_);
    if (wd_) cudnnDestroyFilterDescriptor(wd_);
    if (cd_) cudnnDestroyConvolutionDescriptor(cd_);
  }

  Status init(const QuantConvParams& p) {
    p_ = p;
    op = "QuantConv";
    const Conv8Geometry& g = p.g;
    // A 1x1 conv is the GEMM Y[M, K] = Xq[M, C] W[K, C]^T (gemm8.h).
    if (p.gemm_like()) KILN_RETURN_IF_ERROR(gemm_.init(p.m(), g.k, g.c, p.fp8));
    if (!p.fp8 && g.c % 4 == 0 && g.k % 4 == 0) {
      KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&xd_));
      KILN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&yd_));
      KILN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&wd_));
      KILN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&cd_));
      KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(xd_, CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8, g.n, g.c, g.h, g.w));
      KILN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(yd_, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, g.n, g.k, g.oh, g.ow));
      KILN_CUDNN_CHECK(cudnnSetFilter4dDescriptor(wd_, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC, g.k, g.c, g.r, g.s));
      KILN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(cd_, g.pad_h, g.pad_w, g.stride_h, g.stride_w, g.dil_h, g.dil_w,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_INT32));
    }
    // The FP8 graph writes float only (conv8_graph.h): not a tactic of an 8-bit Y (the simple
    // choice of docs/decisions/0081; cuDNN's graph could quantize the output in the graph too).
    if (p.fp8 && g.c % 16 == 0 && g.k % 16 == 0 && !p.y_8bit) {
      graph_ = true;
      gp8_.g = g;
      gp8_.io = p.y_type == StorageType::kF16 ? CUDNN_DATA_HALF
                                              : (p.y_type == StorageType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT);
      gp8_.residual = p.has_residual;
      gp8_.relu = p.relu;
    }
    describe("");
    return Status::Ok();
  }

  // Before a select: the scratch plus the most any library may use; after: what the tactic needs.
  // The igemm and cuDNN graph tactics write Y directly and need no accumulator.
  size_t workspace() const override {
    return tactic_id == kNoTactic ? scratch_full() + kLibWorkspace : scratch() + cap_;
  }

  StatusOr<std::vector<TacticId>> candidates(ExecState& s) override {
    std::vector<TacticId> c;
    const DeviceInfo& d = device_info();
    const int igemm = conv8_igemm_variants(p_.g, p_.fp8, d.cc_major * 10 + d.cc_minor);
    if (s.workspace_bytes >= qx_bytes())
      for (int v = 0; v < igemm; ++v)
        c.push_back(make_tactic_id(TacticSource::kKiln, kIgemmBase + static_cast<uint32_t>(v)));
    if (s.workspace_bytes < scratch_full()) {
      if (!c.empty()) return c;
      return unsupported("layer '" + name + "': needs " + std::to_string(scratch_full()) +
                         " bytes of workspace for the quantized input and the accumulator, the cap is " +
                         std::to_string(s.workspace_bytes));
    }
    if (gemm_.ready()) {
      query_heuristics(s);
      for (size_t i = 0; i < heur_.size(); ++i) c.push_back(make_tactic_id(TacticSource::kCublasLt, static_cast<uint32_t>(i)));
    }
    if (cd_) c.push_back(make_tactic_id(TacticSource::kCudnn, kCudnnIpg));
    if (graph_)
      for (int r = 0, n = conv8_graph_configs(gp8_); r < n; ++r)
        c.push_back(make_tactic_id(TacticSource::kCudnnGraph, static_cast<uint32_t>(r)));
    c.push_back(make_tactic_id(TacticSource::kKiln, 0));
    return c;
  }

  Status select(TacticId id, ExecState& s) override {
    const size_t lib_cap = std::min(s.workspace_bytes - std::min(s.workspace_bytes, scratch_full()), kLibWorkspace);
    if (id == make_tactic_id(TacticSource::kKiln, 0)) {
      path_ = Path::kReference;
      cap_ = 0;
      fallback = "no 8-bit library conv selected: Kiln's reference conv";
      describe("kiln.conv8_reference");
    } else if (tactic_id_source(id) == TacticSource::kKiln && tactic_id_variant(id) >= kIgemmBase) {
      const DeviceInfo& d = device_info();
      const int v = static_cast<int>(tactic_id_variant(id) - kIgemmBase);
      if (v >= conv8_igemm_variants(p_.g, p_.fp8, d.cc_major * 10 + d.cc_minor))
        return invalid_plan("layer '" + name + "': Kiln 8-bit conv variant " + std::to_string(v) +
                            " does not run this geometry on this GPU");
      path_ = Path::kIgemm;
      igemm_variant_ = v;
      cap_ = 0;
      fallback.clear();
      describe("kiln.conv8_igemm v" + std::to_string(v));
    } else if (tactic_id_source(id) == TacticSource::kCublasLt && gemm_.ready()) {
      if (heur_.empty()) query_heuristics(s);
      const uint32_t i = tactic_id_variant(id);
      if (i >= heur_.size())
        return invalid_plan("layer '" + name + "': cuBLASLt heuristic #" + std::to_string(i) + " does not exist here (" +
                            std::to_string(heur_.size()) + " listed)");
      algo_ = heur_[i];
      path_ = Path::kGemm;
      cap_ = lt_cap_;
      fallback.clear();
      describe("cublaslt.matmul heuristic#" + std::to_string(i));
    } else if (id == make_tactic_id(TacticSource::kCudnn, kCudnnIpg) && cd_) {
      size_t need = 0;
      const cudnnStatus_t st = cudnnGetConvolutionForwardWorkspaceSize(
          s.cudnn, xd_, wd_, cd_, yd_, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need);
      if (st != CUDNN_STATUS_SUCCESS)
        return unsupported("cuDNN INT8 convolution: " + std::string(cudnnGetErrorString(st)));
      if (need > lib_cap)
        return Status(StatusCode::kOutOfMemory, "cuDNN INT8 convolution needs " + std::to_string(need) +
                                                    " bytes of workspace, " + std::to_string(lib_cap) + " allowed");
      path_ = Path::kCudnn;
      cap_ = need;
      fallback.clear();
      describe("cudnn.conv_int8 algo=" + std::to_string(kCudnnIpg));
    } else if (tactic_id_source(id) == TacticSource::kCudnnGraph && graph_) {
      const int rank = static_cast<int>(tactic_id_variant(id));
      KILN_ASSIGN_OR_RETURN(GraphPlan gp, conv8_graph_plan(gp8_, rank));
      if (static_cast<size_t>(gp.workspace) > lib_cap)
        return Status(StatusCode::kOutOfMemory, "cuDNN FP8 conv configuration " + std::to_string(rank) + " needs " +
                                                    std::to_string(gp.workspace) + " bytes of workspace, " +
                                                    std::to_string(lib_cap) + " allowed");
      gplan_ = gp;
      path_ = Path::kGraph;
      cap_ = static_cast<size_t>(gp.workspace);
      fallback.clear();
      describe("cudnn.graph heur#" + std::to_string(rank) + (gp.engine >= 0 ? " eng=" + std::to_string(gp.engine) : ""));
    } else {
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not one of its tactics");
    }
    tactic_id = id;
    if (s.verify) {
      Status st = enqueue(s);
      if (!st.ok() && path_ == Path::kGraph) {
        cudaGetLastError();  // a refused engine may leave a launch error behind
        return unsupported("cuDNN FP8 conv configuration does not run: " + st.message());
      }
      return st;
    }
    return Status::Ok();
  }

  Status enqueue(ExecState& s) override {
    char* ws = static_cast<char*>(s.workspace);
    // The quantized X: the input itself when it is stored in 8 bits, else the workspace's copy.
    int8_t* qx = p_.x_8bit ? static_cast<int8_t*>(s.ptr(ins[0])) : reinterpret_cast<int8_t*>(ws);
    void* acc = ws + qx_bytes();
    char* lib_ws = ws + scratch();
    if (!p_.x_8bit)
      KILN_CUDA_CHECK(launch_quantize_8bit(p_.x_type, s.ptr(ins[0]), qx, p_.g.n * p_.g.h * p_.g.w * p_.g.c, p_.x_scale,
                                           p_.zero_point, p_.fp8, s.stream));
    const int8_t* w = static_cast<const int8_t*>(s.ptr(ins[1]));
    const void* res = ins.size() > 5 && ins[5] >= 0 ? s.ptr(ins[5]) : nullptr;
    if (path_ == Path::kIgemm) {  // Kiln's implicit-GEMM conv: the whole epilogue inside the kernel
      KILN_CUDA_CHECK(launch_conv8_igemm(qx, w, p_.g, p_.fp8, conv8_epilogue(s), igemm_variant_, s.stream));
      return Status::Ok();
    }
    if (path_ == Path::kGraph) {  // the epilogue runs inside the conv kernel
      KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
      return conv8_graph_run(s.cudnn, gplan_, qx, w, static_cast<const float*>(s.ptr(ins[6])),
                             static_cast<const float*>(s.ptr(ins[4])), res, s.ptr(outs[0]), lib_ws);
    }
    bool acc_int = !p_.fp8;
    switch (path_) {
      case Path::kGemm:
        KILN_RETURN_IF_ERROR(gemm_.run(s.lt, w, qx, acc, algo_, lib_ws, cap_, s.stream));
        break;
      case Path::kCudnn: {
        const float one = 1.f, zero = 0.f;
        KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
        KILN_CUDNN_CHECK(cudnnConvolutionForward(s.cudnn, &one, xd_, qx, wd_, w, cd_,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, lib_ws, cap_, &zero,
                                                 yd_, acc));
        acc_int = false;  // cuDNN's FLOAT output of the int32 sums
        break;
      }
      case Path::kReference:
        KILN_CUDA_CHECK(launch_conv_8bit_reference(qx, w, acc, p_.g, p_.fp8, s.stream));
        break;
      case Path::kGraph:
      case Path::kIgemm:
        break;  // returned above
    }
    const float* wsum = ins[3] >= 0 ? static_cast<const float*>(s.ptr(ins[3])) : nullptr;
    const float* bias = p_.has_bias ? static_cast<const float*>(s.ptr(ins[4])) : nullptr;
    Requant8 r8;
    r8.y_scale = p_.y_scale;
    r8.y_zero_point = p_.y_zero_point;
    r8.res_type = p_.res_type;
    KILN_CUDA_CHECK(launch_dequant_epilogue(acc, acc_int, s.ptr(outs[0]), p_.y_type, p_.m(), p_.g.k, p_.x_scale,
                                            static_cast<const float*>(s.ptr(ins[2])), wsum, p_.zero_point, bias,
                                            p_.relu, s.stream, res, p_.y_8bit ? &r8 : nullptr));
    return Status::Ok();
  }

  // The fused epilogue of Kiln's implicit-GEMM conv (kernels_conv8.h), the same arithmetic as
  // launch_dequant_epilogue's: scale = x_scale * w_scale (ins[6]), the zero-point correction, bias,
  // residual, ReLU, and the float or 8-bit Y.
  Conv8Epilogue conv8_epilogue(ExecState& s) const {
    Conv8Epilogue e;
    e.scale = static_cast<const float*>(s.ptr(ins[6]));
    e.wsum = ins[3] >= 0 ? static_cast<const float*>(s.ptr(ins[3])) : nullptr;
    e.zero_point = p_.zero_point;
    e.bias = p_.has_bias ? static_cast<const float*>(s.ptr(ins[4])) : nullptr;
    e.residual = ins.size() > 5 && ins[5] >= 0 ? s.ptr(ins[5]) : nullptr;
    e.res_type = p_.res_type;
    e.relu = p_.relu;
    e.y = s.ptr(outs[0]);
    e.y_type = p_.y_type;
    e.y_8bit = p_.y_8bit;
    e.y_fp8 = p_.y_type == StorageType::kF8E4M3;
    e.y_scale = p_.y_scale;
    e.y_zero_point = p_.y_zero_point;
    return e;
  }

  std::string signature() const override {
    const Conv8Geometry& g = p_.g;
    auto d = [](int64_t v) { return std::to_string(v); };
    return "quant_conv x=" + d(g.n) + "x" + d(g.c) + "x" + d(g.h) + "x" + d(g.w) + " w=" + d(g.k) + "x" + d(g.r) + "x" +
           d(g.s) + " y=" + d(g.oh) + "x" + d(g.ow) + " pad=" + d(g.pad_h) + "," + d(g.pad_w) + " stride=" +
           d(g.stride_h) + "," + d(g.stride_w) + " dil=" + d(g.dil_h) + "," + d(g.dil_w) +
           (p_.fp8 ? " fp8e4m3" : " int8") + " x=" + storage_name(p_.x_type) + " y=" + storage_name(p_.y_type) +
           (p_.zero_point ? " zp" : "") + (p_.has_bias ? " +bias" : "") + (p_.has_residual ? " +residual" : "") +
           (p_.relu ? " +relu" : "") + " ws<=" + std::to_string(kLibWorkspace);
  }

 private:
  enum class Path { kGemm, kCudnn, kGraph, kReference, kIgemm };
  static constexpr uint32_t kIgemmBase = 1;  // Kiln tactic variants: 0 the reference, 1 + v igemm variant v
  static constexpr size_t kLibWorkspace = 32u << 20;
  static constexpr int kHeuristics = 8;
  // The quantized X's bytes in the workspace (none when X is stored in 8 bits).
  size_t qx_bytes() const { return p_.x_8bit ? 0 : align256(static_cast<size_t>(p_.g.n * p_.g.h * p_.g.w * p_.g.c)); }
  // Bytes before the library's workspace: the quantized X, then (tactics that need it) the [M, K]
  // accumulator; the igemm and cuDNN graph tactics write Y directly.
  size_t scratch_full() const { return qx_bytes() + align256(static_cast<size_t>(p_.m() * p_.g.k) * 4); }
  size_t scratch() const { return path_ == Path::kIgemm || path_ == Path::kGraph ? qx_bytes() : scratch_full(); }
  void query_heuristics(ExecState& s) {
    lt_cap_ = std::min(s.workspace_bytes - std::min(s.workspace_bytes, scratch_full()), kLibWorkspace);
    heur_ = gemm_.algorithms(s.lt, lt_cap_, kHeuristics);
  }
  void describe(const std::string& how) {
    tactic = "quant_conv " + std::string(p_.fp8 ? "fp8e4m3" : "int8") + (how.empty() ? "" : " " + how) +
             (p_.x_8bit ? " x=" + std::string(storage_name(p_.x_type)) : "") + " " +
             (p_.y_8bit ? "y=" : "") + storage_name(p_.y_type) + " nhwc" + (p_.has_bias ? " +bias" : "") +
             (p_.has_residual ? " +residual" : "") + (p_.relu ? " +relu" : "");
  }

  QuantConvParams p_;
  Path path_ = Path::kReference;
  int igemm_variant_ = 0;
  Gemm8 gemm_;  // the 1x1 conv's cuBLASLt GEMM (only when gemm_like)
  cublasLtMatmulAlgo_t algo_{};
  std::vector<cublasLtMatmulAlgo_t> heur_;
  size_t cap_ = 0, lt_cap_ = 0;
  cudnnTensorDescriptor_t xd_ = nullptr, yd_ = nullptr;
  cudnnFilterDescriptor_t wd_ = nullptr;
  cudnnConvolutionDescriptor_t cd_ = nullptr;
  bool graph_ = false;  // the FP8 cuDNN graph applies
  Conv8GraphParams gp8_;
  GraphPlan gplan_;     // the selected configuration's plan (Path::kGraph)
};

}  // namespace

Status lower_quant_conv(LowerContext& ctx, const ir::Node& n, const std::string& where) {
  const ir::Graph& g = ctx.graph();
  if (n.inputs.size() < 3) return invalid_argument(where + "QuantConv needs X, W and w_scale");
  const auto& wc = g.value(n.inputs[1]).constant;
  const auto& sc = g.value(n.inputs[2]).constant;
  const bool has_bias = n.inputs.size() > 3 && n.inputs[3] != ir::kNoValue;
  const bool has_res = n.inputs.size() > 4 && n.inputs[4] != ir::kNoValue;
  const auto& bc = has_bias ? g.value(n.inputs[3]).constant : nullptr;
  if (!wc || wc->rank() != 4 || (wc->dtype() != DataType::kInt8 && wc->dtype() != DataType::kFloat8E4M3FN))
    return unsupported(where + "the weight must be a constant int8 / fp8e4m3fn [K, C, R, S]");
  const int64_t K = wc->dim(0), C = wc->dim(1), R = wc->dim(2), S = wc->dim(3);
  if (!sc || sc->dtype() != DataType::kFloat32 || sc->numel() != K)
    return unsupported(where + "w_scale must be a constant float32 [K]");
  if (has_bias && (!bc || bc->dtype() != DataType::kFloat32 || bc->numel() != K))
    return unsupported(where + "the bias must be a constant float32 [K]");
  if (n.attr_int("group", 1) != 1) return unsupported(where + "group " + std::to_string(n.attr_int("group", 1)));
  const Shape& x = ctx.shape(n.inputs[0]);
  const Shape& y = ctx.shape(n.outputs[0]);
  if (x.size() != 4 || x[1] != C || y.size() != 4)
    return invalid_argument(where + "input " + shape_str(x) + " is not [N, " + std::to_string(C) + ", H, W]");
  const std::vector<int64_t> s = n.attr_ints("strides", {1, 1}), d = n.attr_ints("dilations", {1, 1});
  QuantConvParams p;
  if (!symmetric_pads(n, x, {R, S}, s, d, &p.g.pad_h, &p.g.pad_w))
    return unsupported(where + "asymmetric pads (fuse_qdq_conv fuses symmetric pads only)");
  p.g.n = x[0]; p.g.c = C; p.g.h = x[2]; p.g.w = x[3];
  p.g.k = K; p.g.r = R; p.g.s = S; p.g.oh = y[2]; p.g.ow = y[3];
  p.g.stride_h = s[0]; p.g.stride_w = s[1]; p.g.dil_h = d[0]; p.g.dil_w = d[1];
  p.fp8 = wc->dtype() == DataType::kFloat8E4M3FN;
  p.x_scale = n.attr_float("x_scale", 0.f);
  p.zero_point = static_cast<int>(n.attr_int("x_zero_point", 0));
  if (!(p.x_scale > 0)) return invalid_argument(where + "x_scale must be > 0");
  if (p.zero_point != 0 && (p.g.pad_h || p.g.pad_w))
    return unsupported(where + "an int8 zero point with padding (fuse_qdq_conv does not fuse it)");
  const std::string act = n.attr_string("activation", "");
  if (!act.empty() && act != "Relu") return unsupported(where + "activation '" + act + "'");
  p.relu = act == "Relu";
  p.has_bias = has_bias;
  p.has_residual = has_res;
  if (ctx.channel_padded(n.inputs[0])) return unsupported(where + "a channel-padded input");
  KILN_ASSIGN_OR_RETURN(int xa, ctx.activation(n.inputs[0]));
  xa = ctx.as_layout(xa, true);
  p.x_type = ctx.value_type(xa);
  const StorageType codes = p.fp8 ? StorageType::kF8E4M3 : StorageType::kI8;
  p.x_8bit = p.x_type == StorageType::kI8 || p.x_type == StorageType::kF8E4M3;
  if (p.x_8bit && p.x_type != codes)
    return unsupported(where + "8-bit input stored as " + storage_name(p.x_type) + ", the weight is " +
                       (p.fp8 ? "fp8e4m3" : "int8"));
  if (!p.x_8bit && !storage_is_float(p.x_type))
    return unsupported(where + "input stored as " + storage_name(p.x_type));
  p.res_type = ctx.storage();
  p.y_type = ctx.storage();
  if (const std::string yt = n.attr_string("y_type", ""); !yt.empty()) {
    const DataType d = dtype_from_name(yt);
    if (d != DataType::kInt8 && d != DataType::kFloat8E4M3FN)
      return invalid_argument(where + "y_type '" + yt + "', expected int8 or fp8e4m3fn");
    p.y_8bit = true;
    p.y_type = d == DataType::kInt8 ? StorageType::kI8 : StorageType::kF8E4M3;
    p.y_scale = n.attr_float("y_scale", 0.f);
    p.y_zero_point = static_cast<int>(n.attr_int("y_zero_point", 0));
    if (!(p.y_scale > 0) || !std::isfinite(p.y_scale)) return invalid_argument(where + "y_scale must be a finite number > 0");
    if (d == DataType::kInt8 ? (p.y_zero_point < -128 || p.y_zero_point > 127) : p.y_zero_point != 0)
      return invalid_argument(where + "y_zero_point " + std::to_string(p.y_zero_point) + " out of range for " + yt);
  }
  // KCRS -> KRSC, byte for byte (the 8-bit codes are not converted).
  std::vector<uint8_t> krsc(static_cast<size_t>(wc->numel()));
  const uint8_t* src = wc->data<uint8_t>();
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t q = 0; q < S; ++q) krsc[((k * R + r) * S + q) * C + c] = src[((k * C + c) * R + r) * S + q];
  KILN_ASSIGN_OR_RETURN(int wv, ctx.upload_raw(n.name + ":weight_q", {K, R, S, C}, krsc.data(), krsc.size(), where + "weight"));
  KILN_ASSIGN_OR_RETURN(int sv, ctx.upload_raw(n.name + ":weight_scale", {K}, sc->raw(), sc->nbytes(), where + "w_scale"));
  int sumv = -1, bv = -1, rv = -1, s8v = -1;
  if (p.zero_point != 0 && !p.fp8) {
    // sum (q - zp) w = sum q w - zp * sum w over the whole window (no padding: checked above).
    std::vector<float> sums(static_cast<size_t>(K), 0.f);
    const int64_t per = C * R * S;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < per; ++j) sums[k] += wc->data<int8_t>()[k * per + j];
    KILN_ASSIGN_OR_RETURN(sumv, ctx.upload_raw(n.name + ":weight_sums", {K}, sums.data(), sums.size() * 4, where + "weight sums"));
  }
  {
    // Always present (zeros without a bias): the FP8 graph's B reads it.
    std::vector<float> zeros(has_bias ? 0 : static_cast<size_t>(K), 0.f);
    const void* src_b = has_bias ? bc->raw() : static_cast<const void*>(zeros.data());
    KILN_ASSIGN_OR_RETURN(bv, ctx.upload_raw(n.name + ":bias", {K}, src_b, static_cast<size_t>(K) * 4, where + "bias"));
  }
  {
    // x_scale * w_scale [K]: the FP8 graph's S and the implicit-GEMM epilogue's scale (kernels_conv8.h).
    std::vector<float> s8(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) s8[k] = p.x_scale * sc->data<float>()[k];
    KILN_ASSIGN_OR_RETURN(s8v, ctx.upload_raw(n.name + ":scale", {K}, s8.data(), s8.size() * 4, where + "scale"));
  }
  if (has_res) {
    KILN_ASSIGN_OR_RETURN(int ra, ctx.activation(n.inputs[4]));
    rv = ctx.as_layout(ra, true);
    if (ctx.value_type(rv) != p.res_type)
      return unsupported(where + "residual stored as " + storage_name(ctx.value_type(rv)) + ", the layer's float storage is " +
                         storage_name(p.res_type));
  }
  auto layer = std::make_unique<QuantConvLayer>();
  KILN_RETURN_IF_ERROR(layer->init(p));
  const int out = ctx.new_value(g.value(n.outputs[0]).name, y, p.y_type, true);
  ctx.add_layer(std::move(layer), n.name, {xa, wv, sv, sumv, bv, rv, s8v}, {out}, n.origin);
  ctx.bind(n.outputs[0], out);
  return Status::Ok();
}

}  // namespace kiln::cuda
