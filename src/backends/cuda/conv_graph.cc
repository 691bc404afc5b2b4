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
#include "backends/cuda/cudnn_backend.h"
#include "backends/cuda/gpu_layers.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMaxGraphWorkspace = 256u << 20;    // bytes a single plan may use

enum Uid : int64_t { kX = 1, kW = 2, kB = 3, kZ = 4, kY = 5, kT1 = 6, kT2 = 7, kT3 = 8 };

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

  const int64_t pad[2] = {p.pad_h, p.pad_w}, stride[2] = {p.stride_h, p.stride_w}, dil[2] = {p.dil_h, p.dil_w};
  // ConvParams carries symmetric padding (the lowering refuses asymmetric pads).
  KILN_ASSIGN_OR_RETURN(Desc cop, conv_forward_op(x, w, t1, pad, stride, dil));

  std::vector<Desc> ops = {cop};
  // conv -> +b -> (+z) -> (relu): each step writes the next virtual tensor, the last one Y.
  Desc zt;
  if (z) {
    KILN_ASSIGN_OR_RETURN(zt, nhwc_tensor(kZ, io, p.n, p.k, p.oh, p.ow, false));
  }
  const Desc& after_bias = (z || relu) ? t2 : y;
  KILN_ASSIGN_OR_RETURN(Desc bias_op, pointwise_op(CUDNN_POINTWISE_ADD, t1, &b, after_bias));
  ops.push_back(bias_op);
  Desc cur = after_bias;
  if (z) {
    const Desc& after_z = relu ? t3 : y;
    KILN_ASSIGN_OR_RETURN(Desc zop, pointwise_op(CUDNN_POINTWISE_ADD, cur, &zt, after_z));
    ops.push_back(zop);
    cur = after_z;
  }
  if (relu) {
    KILN_ASSIGN_OR_RETURN(Desc rop, pointwise_op(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, y));
    ops.push_back(rop);
  }

  KILN_ASSIGN_OR_RETURN(g.op_graph, operation_graph(h, ops));
  KILN_ASSIGN_OR_RETURN(g.configs, engine_configs(g.op_graph));
  return g;
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
  KILN_ASSIGN_OR_RETURN(gp.plan, create_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set_attr(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_RETURN_IF_ERROR(set_attr(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                           static_cast<int64_t>(json.size()), json.data()));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(gp.plan->d));
  int64_t n = 0;
  KILN_CUDNN_CHECK(cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &n, &gp.workspace));
  return gp;
}

Status execute(cudnnHandle_t h, const GraphPlan& gp, const void* x, const void* w, const void* b, const void* z, void* y,
               void* workspace) {
  std::vector<int64_t> uids = {kX, kW, kB, kY};
  std::vector<void*> ptrs = {const_cast<void*>(x), const_cast<void*>(w), const_cast<void*>(b), y};
  if (z) {
    uids.push_back(kZ);
    ptrs.push_back(const_cast<void*>(z));
  }
  return execute_plan(h, gp, uids, ptrs, workspace);
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
      KILN_ASSIGN_OR_RETURN(b.plan, make_plan(bh, g->configs, rank));
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
