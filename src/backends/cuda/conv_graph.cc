// cuDNN graph-API (backend descriptor) convolution tactic:
//   Y = act(conv(X, W) + b + Z)        X, Z, Y: NHWC fp16; W: KRSC fp16; b: [K] fp16;
//                                      act = ReLU or identity; conv accumulates in fp32
// as one cuDNN operation graph (CONVOLUTION_FORWARD -> POINTWISE ADD bias -> POINTWISE ADD Z ->
// POINTWISE RELU_FWD, intermediates virtual fp32), so cuDNN's runtime-fusion and precompiled
// engines compute the whole epilogue in the conv kernel. cuDNN's heuristics (mode A, then
// FALLBACK) list engine configurations; each is one tactic (source kCudnnGraph, variant = its
// rank), which the builder's selector finalizes and times within its budget (default 4: a
// runtime-fusion engine compiles a kernel when finalized, so each costs build time). With the
// same GPU and cuDNN version (the plan header checks both) the heuristic order is the same, so
// a plan's rank re-selects its engine configuration at load time.
// Layers of equal signature (ResNet repeats blocks) share one execution plan per device.
// The chosen plan is also serialized (CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, supported
// for runtime-compiled engines) into the Kiln plan's tactic data: a load deserializes it instead
// of finalizing the engine configuration again, which for a runtime-fusion engine means
// compiling its kernel (~1 s each on the H200). Data cuDNN refuses falls back to the rank.
// Source: cuDNN 9 Backend API reference (cudnn_graph library: backend descriptor types and
// attributes), "Graph API" / "Supported Graph Patterns" (ConvBiasAct runtime fusion).
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gpu_layers.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxGraphWorkspace = 256u << 20;    // bytes a single plan may use

// Owns one backend descriptor.
struct BackendDesc {
  cudnnBackendDescriptor_t d = nullptr;
  BackendDesc() = default;
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  ~BackendDesc() {
    if (d) cudnnBackendDestroyDescriptor(d);
  }
};
using Desc = std::shared_ptr<BackendDesc>;

StatusOr<Desc> create(cudnnBackendDescriptorType_t type) {
  auto d = std::make_shared<BackendDesc>();
  KILN_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d->d));
  return d;
}

Status set(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v) {
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(d->d, a, t, n, v));
  return Status::Ok();
}
Status set_desc(const Desc& d, cudnnBackendAttributeName_t a, const Desc& v) {
  return set(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v->d);
}

// A 4-D tensor in logical N,C,H,W order with NHWC strides (cuDNN's convention for layouts).
StatusOr<Desc> nhwc_tensor(int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w, bool is_virtual) {
  KILN_ASSIGN_OR_RETURN(Desc d, create(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const int64_t dims[4] = {n, c, h, w};
  const int64_t strides[4] = {c * h * w, 1, w * c, c};
  const int64_t align = 16;
  const bool virt = is_virtual;
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  KILN_RETURN_IF_ERROR(set(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(d->d));
  return d;
}

// Pointwise op y = mode(x[, b]) with fp32 math.
StatusOr<Desc> pointwise(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
  KILN_ASSIGN_OR_RETURN(Desc pw, create(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  KILN_RETURN_IF_ERROR(set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(pw->d));
  KILN_ASSIGN_OR_RETURN(Desc op, create(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  KILN_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b) KILN_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  KILN_RETURN_IF_ERROR(set_desc(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(op->d));
  return op;
}

enum Uid : int64_t { kX = 1, kW = 2, kB = 3, kZ = 4, kY = 5, kT1 = 6, kT2 = 7, kT3 = 8 };

// One finalized execution plan with its workspace size and identity.
struct GraphPlan {
  Desc plan;
  int64_t workspace = 0;
  int heur_rank = -1;    // position in the heuristic list
  int64_t engine = -1;   // cuDNN's global engine index (for the tactic string)
};

// The operation graph of one conv signature; engine configurations are listed once.
struct ConvGraph {
  Desc op_graph;
  std::vector<Desc> configs;  // heuristic order (mode A, then FALLBACK)
};

StatusOr<ConvGraph> build_graph(cudnnHandle_t h, const ConvParams& p, cudnnDataType_t io) {
  ConvGraph g;
  KILN_ASSIGN_OR_RETURN(Desc x, nhwc_tensor(kX, io, p.n, p.c, p.h, p.w, false));
  KILN_ASSIGN_OR_RETURN(Desc w, nhwc_tensor(kW, io, p.k, p.c / p.groups, p.r, p.sk, false));
  KILN_ASSIGN_OR_RETURN(Desc b, nhwc_tensor(kB, io, 1, p.k, 1, 1, false));
  KILN_ASSIGN_OR_RETURN(Desc y, nhwc_tensor(kY, io, p.n, p.k, p.oh, p.ow, false));
  KILN_ASSIGN_OR_RETURN(Desc t1, nhwc_tensor(kT1, CUDNN_DATA_FLOAT, p.n, p.k, p.oh, p.ow, true));
  const bool relu = p.activation == "Relu";
  const bool z = p.has_residual;
  // The last op writes Y; earlier results stay virtual.
  Desc t2, t3;
  if (z || relu) {
    KILN_ASSIGN_OR_RETURN(t2, nhwc_tensor(kT2, CUDNN_DATA_FLOAT, p.n, p.k, p.oh, p.ow, true));
  }
  if (z && relu) {
    KILN_ASSIGN_OR_RETURN(t3, nhwc_tensor(kT3, CUDNN_DATA_FLOAT, p.n, p.k, p.oh, p.ow, true));
  }

  KILN_ASSIGN_OR_RETURN(Desc conv, create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const int64_t pad[2] = {p.pad_h, p.pad_w}, stride[2] = {p.stride_h, p.stride_w}, dil[2] = {p.dil_h, p.dil_w};
  // ConvParams carries symmetric padding (the lowering refuses asymmetric pads).
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride));
  KILN_RETURN_IF_ERROR(set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(conv->d));

  KILN_ASSIGN_OR_RETURN(Desc cop, create(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  const float one = 1.f, zero = 0.f;
  KILN_RETURN_IF_ERROR(set_desc(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x));
  KILN_RETURN_IF_ERROR(set_desc(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w));
  KILN_RETURN_IF_ERROR(set_desc(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, t1));
  KILN_RETURN_IF_ERROR(set_desc(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  KILN_RETURN_IF_ERROR(set(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one));
  KILN_RETURN_IF_ERROR(set(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(cop->d));

  std::vector<Desc> ops = {cop};
  // conv -> +b -> (+z) -> (relu): each step writes the next virtual tensor, the last one Y.
  Desc zt;
  if (z) {
    KILN_ASSIGN_OR_RETURN(zt, nhwc_tensor(kZ, io, p.n, p.k, p.oh, p.ow, false));
  }
  const Desc& after_bias = (z || relu) ? t2 : y;
  KILN_ASSIGN_OR_RETURN(Desc bias_op, pointwise(CUDNN_POINTWISE_ADD, t1, &b, after_bias));
  ops.push_back(bias_op);
  Desc cur = after_bias;
  if (z) {
    const Desc& after_z = relu ? t3 : y;
    KILN_ASSIGN_OR_RETURN(Desc zop, pointwise(CUDNN_POINTWISE_ADD, cur, &zt, after_z));
    ops.push_back(zop);
    cur = after_z;
  }
  if (relu) {
    KILN_ASSIGN_OR_RETURN(Desc rop, pointwise(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, y));
    ops.push_back(rop);
  }

  KILN_ASSIGN_OR_RETURN(g.op_graph, create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Desc& o : ops) raw.push_back(o->d);
  KILN_RETURN_IF_ERROR(set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                           static_cast<int64_t>(raw.size()), raw.data()));
  KILN_RETURN_IF_ERROR(set(g.op_graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(g.op_graph->d));

  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    KILN_ASSIGN_OR_RETURN(Desc heur, create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    KILN_RETURN_IF_ERROR(set_desc(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, g.op_graph));
    KILN_RETURN_IF_ERROR(set(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm));
    if (cudnnBackendFinalize(heur->d) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS || count <= 0)
      continue;
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw_cfgs;
    for (int64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(Desc c, create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw_cfgs.push_back(c->d);
      cfgs.push_back(c);
    }
    int64_t got = 0;
    KILN_CUDNN_CHECK(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, raw_cfgs.data()));
    for (int64_t i = 0; i < got; ++i) g.configs.push_back(cfgs[static_cast<size_t>(i)]);
  }
  return g;
}

// Finalizes an execution plan for configuration `rank`; an error when cuDNN refuses it.
StatusOr<GraphPlan> make_plan(cudnnHandle_t h, const ConvGraph& g, int rank) {
  GraphPlan gp;
  gp.heur_rank = rank;
  const Desc& cfg = g.configs[static_cast<size_t>(rank)];
  KILN_ASSIGN_OR_RETURN(gp.plan, create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_RETURN_IF_ERROR(set_desc(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(gp.plan->d));
  int64_t n = 0;
  KILN_CUDNN_CHECK(cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &n, &gp.workspace));
  // The engine's global index, for the tactic string (informational).
  KILN_ASSIGN_OR_RETURN(Desc eng, create(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  if (cudnnBackendGetAttribute(cfg->d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng->d) ==
      CUDNN_STATUS_SUCCESS) {
    int64_t idx = -1;
    if (cudnnBackendGetAttribute(eng->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) ==
        CUDNN_STATUS_SUCCESS)
      gp.engine = idx;
  }
  return gp;
}

// The plan's serialized form ("" when its engine does not support serialization).
std::string serialize_plan(const GraphPlan& gp) {
  int64_t n = 0;
  if (cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &n,
                               nullptr) != CUDNN_STATUS_SUCCESS || n <= 0)
    return {};
  std::string json(static_cast<size_t>(n), '\0');
  int64_t got = 0;
  if (cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, n, &got,
                               json.data()) != CUDNN_STATUS_SUCCESS || got <= 0 || got > n)
    return {};
  json.resize(static_cast<size_t>(got));
  return json;
}

// An execution plan restored from serialize_plan's bytes; an error when cuDNN refuses them
// (another cuDNN build or GPU than the one that wrote them).
StatusOr<GraphPlan> deserialize_plan(cudnnHandle_t h, const std::string& json, int rank, int64_t engine) {
  GraphPlan gp;
  gp.heur_rank = rank;
  gp.engine = engine;
  KILN_ASSIGN_OR_RETURN(gp.plan, create(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_RETURN_IF_ERROR(set(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                           static_cast<int64_t>(json.size()), json.data()));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(gp.plan->d));
  int64_t n = 0;
  KILN_CUDNN_CHECK(cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &n, &gp.workspace));
  return gp;
}

Status execute(cudnnHandle_t h, const GraphPlan& gp, const void* x, const void* w, const void* b, const void* z, void* y,
               void* workspace) {
  int64_t uids[5] = {kX, kW, kB, kY, kZ};
  void* ptrs[5] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(b), y, const_cast<void*>(z)};
  const int64_t n = z ? 5 : 4;
  BackendDesc vp;
  KILN_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp.d));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(vp.d));
  KILN_CUDNN_CHECK(cudnnBackendExecute(h, gp.plan->d, vp.d));
  return Status::Ok();
}

// Graphs and plans are built with one handle per device that lives as long as the plans it
// finalized (the tuning context's handle is destroyed after the build); execution uses the
// calling context's handle on the same device.
int current_device() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    d = 0;
  }
  return d;
}

StatusOr<cudnnHandle_t> build_handle(int device) {
  static std::mutex mu;
  static std::map<int, cudnnHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  cudnnHandle_t& h = handles[device];
  if (!h) KILN_CUDNN_CHECK(cudnnCreate(&h));
  return h;
}

std::string signature(const ConvParams& p, cudnnDataType_t io) {
  char s[320];
  std::snprintf(s, sizeof s, "dt%d n%lld c%lld h%lld w%lld k%lld r%lld s%lld p%lld,%lld st%lld,%lld d%lld,%lld g%lld z%d a%s",
                static_cast<int>(io), (long long)p.n, (long long)p.c, (long long)p.h, (long long)p.w, (long long)p.k,
                (long long)p.r, (long long)p.sk, (long long)p.pad_h, (long long)p.pad_w, (long long)p.stride_h,
                (long long)p.stride_w, (long long)p.dil_h, (long long)p.dil_w, (long long)p.groups, p.has_residual ? 1 : 0,
                p.activation.c_str());
  return s;
}

// A finalized execution plan of one (signature, rank), shared by the layers of a process on
// one device: ResNet repeats blocks, and finalizing may compile a kernel.
struct BuiltPlan {
  GraphPlan plan;
  std::shared_ptr<const std::string> json;  // the plan serialized (empty: not serializable)
  bool from_data = false;                   // restored from a Kiln plan's tactic data
};
struct SharedState {
  std::mutex mu;
  std::map<std::pair<int, std::string>, std::shared_ptr<ConvGraph>> graphs;  // (device, signature)
  std::map<std::tuple<int, std::string, int>, BuiltPlan> plans;              // (device, signature, rank)
};
SharedState& shared() {
  static SharedState s;
  return s;
}

// The tactic data of a plan: the engine index, a newline, then cuDNN's JSON of the plan.
std::string encode_data(const GraphPlan& gp, const std::string& json) { return std::to_string(gp.engine) + "\n" + json; }
bool decode_data(const std::string& data, int64_t* engine, std::string* json) {
  const auto nl = data.find('\n');
  if (nl == std::string::npos || nl == 0 || nl > 20) return false;
  int64_t e = 0;
  size_t i = data[0] == '-' ? 1 : 0;
  if (i == nl) return false;
  for (; i < nl; ++i) {
    if (data[i] < '0' || data[i] > '9') return false;
    e = e * 10 + (data[i] - '0');
  }
  *engine = data[0] == '-' ? -e : e;
  *json = data.substr(nl + 1);
  return true;
}

class ConvGraphLayer : public Layer {
 public:
  ConvGraphLayer(const ConvParams& p, cudnnDataType_t io) : p_(p), io_(io), sig_(kiln::cuda::signature(p, io)) {
    op = "FusedConv";
    describe();
  }
  size_t workspace() const override { return plan_.plan ? static_cast<size_t>(plan_.workspace) : kMaxGraphWorkspace; }
  std::string signature() const override { return "cudnn.graph " + sig_ + " ws<=" + std::to_string(kMaxGraphWorkspace); }

  // One tactic per engine configuration cuDNN's heuristics list for this graph (rank order).
  StatusOr<std::vector<TacticId>> candidates(ExecState&) override {
    KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvGraph> g, graph());
    std::vector<TacticId> c;
    for (size_t r = 0; r < g->configs.size(); ++r) c.push_back(make_tactic_id(TacticSource::kCudnnGraph, static_cast<uint32_t>(r)));
    return c;
  }

  Status select(TacticId id, ExecState& s) override {
    if (tactic_id_source(id) != TacticSource::kCudnnGraph)
      return invalid_plan("layer '" + name + "': tactic id " + std::to_string(id) + " is not a cuDNN graph tactic");
    const int rank = static_cast<int>(tactic_id_variant(id));
    KILN_ASSIGN_OR_RETURN(BuiltPlan b, built(rank, s));
    const size_t cap = std::min(s.workspace_bytes, kMaxGraphWorkspace);
    if (static_cast<size_t>(b.plan.workspace) > cap)
      return Status(StatusCode::kOutOfMemory, "engine configuration " + std::to_string(rank) + " needs " +
                                                  std::to_string(b.plan.workspace) + " bytes of workspace, " +
                                                  std::to_string(cap) + " allowed");
    if (s.verify) {
      Status st = cudnn_status(cudnnSetStream(s.cudnn, s.stream), "cudnnSetStream", __FILE__, __LINE__);
      if (st.ok()) st = run(s, b.plan);
      if (!st.ok()) {
        cudaGetLastError();  // a refused engine may leave a launch error behind
        return unsupported("engine configuration " + std::to_string(rank) + " does not run: " + st.message());
      }
    }
    plan_ = b.plan;
    json_ = b.json;
    restored = b.from_data;
    tactic_id = id;
    describe();
    return Status::Ok();
  }

  void export_tactic_data(std::map<std::string, std::string>* out) const override {
    if (json_ && !json_->empty() && plan_.heur_rank >= 0) (*out)[data_key(plan_.heur_rank)] = encode_data(plan_, *json_);
  }

  Status enqueue(ExecState& s) override {
    if (!plan_.plan) return internal_error("layer '" + name + "': cuDNN graph plan used before a tactic was selected");
    KILN_CUDNN_CHECK(cudnnSetStream(s.cudnn, s.stream));
    return run(s, plan_);
  }

 private:
  Status run(ExecState& s, const GraphPlan& gp) {
    const void* z = p_.has_residual ? s.ptr(ins[3]) : nullptr;
    return execute(s.cudnn, gp, s.ptr(ins[0]), s.ptr(ins[1]), s.ptr(ins[2]), z, s.ptr(outs[0]), s.workspace);
  }
  std::string data_key(int rank) const { return "cudnn.graph " + sig_ + " heur#" + std::to_string(rank); }

  // The operation graph of this signature on the current device (built once per process).
  StatusOr<std::shared_ptr<ConvGraph>> graph() {
    const int dev = current_device();
    SharedState& st = shared();
    std::lock_guard<std::mutex> lock(st.mu);
    auto& g = st.graphs[{dev, sig_}];
    if (!g) {
      KILN_ASSIGN_OR_RETURN(cudnnHandle_t bh, build_handle(dev));
      KILN_ASSIGN_OR_RETURN(ConvGraph built, build_graph(bh, p_, io_));
      g = std::make_shared<ConvGraph>(std::move(built));
    }
    return g;
  }

  // The finalized plan of `rank`: shared, else from the plan's tactic data, else finalized now.
  StatusOr<BuiltPlan> built(int rank, ExecState& s) {
    const int dev = current_device();
    SharedState& st = shared();
    {
      std::lock_guard<std::mutex> lock(st.mu);
      auto it = st.plans.find({dev, sig_, rank});
      if (it != st.plans.end()) return it->second;
    }
    KILN_ASSIGN_OR_RETURN(cudnnHandle_t bh, build_handle(dev));
    BuiltPlan b;
    if (s.tactic_data) {
      auto data = s.tactic_data->find(data_key(rank));
      int64_t engine = -1;
      std::string json;
      if (data != s.tactic_data->end() && decode_data(data->second, &engine, &json)) {
        StatusOr<GraphPlan> gp = deserialize_plan(bh, json, rank, engine);
        if (gp.ok()) {
          b.plan = std::move(*gp);
          b.json = std::make_shared<const std::string>(std::move(json));
          b.from_data = true;
        } else {
          cudaGetLastError();  // refused data: finalize the configuration from its rank below
        }
      }
    }
    if (!b.plan.plan) {
      KILN_ASSIGN_OR_RETURN(std::shared_ptr<ConvGraph> g, graph());
      if (rank < 0 || rank >= static_cast<int>(g->configs.size()))
        return invalid_plan("layer '" + name + "': cuDNN graph rank " + std::to_string(rank) + " but cuDNN lists " +
                            std::to_string(g->configs.size()) + " configurations");
      KILN_ASSIGN_OR_RETURN(b.plan, make_plan(bh, *g, rank));
      b.json = std::make_shared<const std::string>(serialize_plan(b.plan));
    }
    std::lock_guard<std::mutex> lock(st.mu);
    return st.plans.emplace(std::make_tuple(dev, sig_, rank), b).first->second;
  }

  void describe() {
    tactic = "cudnn.graph" + (plan_.heur_rank >= 0 ? " heur#" + std::to_string(plan_.heur_rank) : std::string()) +
             (plan_.engine >= 0 ? " eng=" + std::to_string(plan_.engine) : std::string()) +
             (io_ == CUDNN_DATA_HALF ? " fp16" : io_ == CUDNN_DATA_BFLOAT16 ? " bf16" : " fp32") + " nhwc" +
             (p_.c_unpadded > 0 ? " cpad=" + std::to_string(p_.c_unpadded) + "->" + std::to_string(p_.c) : "") + " +bias" +
             (p_.has_residual ? " +residual" : "") + (p_.activation == "Relu" ? " +relu" : "");
  }

  ConvParams p_;
  cudnnDataType_t io_;
  std::string sig_;
  GraphPlan plan_;
  std::shared_ptr<const std::string> json_;  // the plan serialized (empty: not serializable)
};

}  // namespace

std::unique_ptr<Layer> make_conv_graph_layer(const ConvParams& p, cudnnDataType_t io) {
  if (!(p.activation.empty() || p.activation == "Relu")) return nullptr;
  if (io != CUDNN_DATA_HALF && io != CUDNN_DATA_BFLOAT16) return nullptr;
  return std::make_unique<ConvGraphLayer>(p, io);
}

void reset_conv_graph_decisions() {
  SharedState& st = shared();
  std::lock_guard<std::mutex> lock(st.mu);
  st.graphs.clear();
  st.plans.clear();
}

}  // namespace kiln::cuda
