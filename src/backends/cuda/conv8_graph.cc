// QuantConv's FP8 cuDNN graph (conv8_graph.h): CONVOLUTION_FORWARD (FP8 E4M3 x, w; float32
// compute) -> POINTWISE MUL S -> POINTWISE ADD B -> (POINTWISE ADD Z) -> (POINTWISE RELU_FWD) -> Y.
// Source: cuDNN 9 Backend API reference; cudnn-frontend samples/cpp/convolution/fp8_fprop.cpp for
// the FP8 conv with float scaling after it.
#include "backends/cuda/conv8_graph.h"

#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {
namespace {

enum Uid : int64_t { kX = 1, kW = 2, kS = 3, kB = 4, kZ = 5, kY = 6, kT1 = 7, kT2 = 8, kT3 = 9, kT4 = 10 };

struct Graph8 {
  Desc op_graph;
  std::vector<Desc> configs;
};

StatusOr<Graph8> build(cudnnHandle_t h, const Conv8GraphParams& p) {
  const Conv8Geometry& g = p.g;
  auto act = [&](int64_t uid, cudnnDataType_t dt, bool virt) { return nhwc_tensor(uid, dt, g.n, g.k, g.oh, g.ow, virt); };
  KILN_ASSIGN_OR_RETURN(Desc x, nhwc_tensor(kX, CUDNN_DATA_FP8_E4M3, g.n, g.c, g.h, g.w, false));
  KILN_ASSIGN_OR_RETURN(Desc w, nhwc_tensor(kW, CUDNN_DATA_FP8_E4M3, g.k, g.c, g.r, g.s, false));
  KILN_ASSIGN_OR_RETURN(Desc s, nhwc_tensor(kS, CUDNN_DATA_FLOAT, 1, g.k, 1, 1, false));
  KILN_ASSIGN_OR_RETURN(Desc b, nhwc_tensor(kB, CUDNN_DATA_FLOAT, 1, g.k, 1, 1, false));
  KILN_ASSIGN_OR_RETURN(Desc y, act(kY, p.io, false));
  KILN_ASSIGN_OR_RETURN(Desc t1, act(kT1, CUDNN_DATA_FLOAT, true));
  KILN_ASSIGN_OR_RETURN(Desc t2, act(kT2, CUDNN_DATA_FLOAT, true));
  const int64_t pad[2] = {g.pad_h, g.pad_w}, stride[2] = {g.stride_h, g.stride_w}, dil[2] = {g.dil_h, g.dil_w};
  std::vector<Desc> ops;
  KILN_ASSIGN_OR_RETURN(Desc conv, conv_forward_op(x, w, t1, pad, stride, dil));
  ops.push_back(conv);
  KILN_ASSIGN_OR_RETURN(Desc scale, pointwise_op(CUDNN_POINTWISE_MUL, t1, &s, t2));
  ops.push_back(scale);
  // + B, (+ Z), (ReLU): each step writes the next virtual tensor, the last one Y.
  const int rest = 1 + (p.residual ? 1 : 0) + (p.relu ? 1 : 0);
  Desc cur = t2;
  int64_t next_uid = kT3;
  auto out = [&](int step) -> StatusOr<Desc> {
    if (step == rest) return y;
    return act(next_uid++, CUDNN_DATA_FLOAT, true);
  };
  int step = 1;
  KILN_ASSIGN_OR_RETURN(Desc t, out(step++));
  KILN_ASSIGN_OR_RETURN(Desc bias, pointwise_op(CUDNN_POINTWISE_ADD, cur, &b, t));
  ops.push_back(bias);
  cur = t;
  if (p.residual) {
    KILN_ASSIGN_OR_RETURN(Desc z, act(kZ, p.io, false));
    KILN_ASSIGN_OR_RETURN(Desc t_z, out(step++));
    KILN_ASSIGN_OR_RETURN(Desc zop, pointwise_op(CUDNN_POINTWISE_ADD, cur, &z, t_z));
    ops.push_back(zop);
    cur = t_z;
  }
  if (p.relu) {
    KILN_ASSIGN_OR_RETURN(Desc t_r, out(step++));
    KILN_ASSIGN_OR_RETURN(Desc rop, pointwise_op(CUDNN_POINTWISE_RELU_FWD, cur, nullptr, t_r));
    ops.push_back(rop);
  }
  Graph8 r;
  KILN_ASSIGN_OR_RETURN(r.op_graph, operation_graph(h, ops));
  KILN_ASSIGN_OR_RETURN(r.configs, engine_configs(r.op_graph));
  return r;
}

struct Shared {
  std::mutex mu;
  std::map<std::pair<int, std::string>, std::shared_ptr<Graph8>> graphs;   // (device, signature); null: none
  std::map<std::tuple<int, std::string, int>, GraphPlan> plans;             // (device, signature, rank)
};
Shared& shared() {
  static Shared s;
  return s;
}

// The graph of p on the current device, built once (null when cuDNN refuses it).
std::shared_ptr<Graph8> graph_of(const Conv8GraphParams& p, int dev) {
  Shared& st = shared();
  std::lock_guard<std::mutex> lock(st.mu);
  const auto key = std::make_pair(dev, p.signature());
  auto it = st.graphs.find(key);
  if (it != st.graphs.end()) return it->second;
  std::shared_ptr<Graph8> g;
  if (StatusOr<cudnnHandle_t> h = build_handle(dev); h.ok()) {
    StatusOr<Graph8> built = build(*h, p);
    if (built.ok()) g = std::make_shared<Graph8>(std::move(*built));
  }
  cudaGetLastError();  // a refused graph may leave an error behind
  st.graphs[key] = g;
  return g;
}

}  // namespace

std::string Conv8GraphParams::signature() const {
  auto d = [](int64_t v) { return std::to_string(v); };
  return "conv8 fp8e4m3 x=" + d(g.n) + "x" + d(g.c) + "x" + d(g.h) + "x" + d(g.w) + " w=" + d(g.k) + "x" + d(g.r) + "x" +
         d(g.s) + " y=" + d(g.oh) + "x" + d(g.ow) + " pad=" + d(g.pad_h) + "," + d(g.pad_w) + " stride=" + d(g.stride_h) +
         "," + d(g.stride_w) + " dil=" + d(g.dil_h) + "," + d(g.dil_w) + " io=" + d(static_cast<int>(io)) +
         (residual ? " +residual" : "") + (relu ? " +relu" : "");
}

int conv8_graph_configs(const Conv8GraphParams& p) {
  const std::shared_ptr<Graph8> g = graph_of(p, current_device());
  return g ? static_cast<int>(g->configs.size()) : 0;
}

StatusOr<GraphPlan> conv8_graph_plan(const Conv8GraphParams& p, int rank) {
  const int dev = current_device();
  const std::shared_ptr<Graph8> g = graph_of(p, dev);
  if (!g || rank < 0 || rank >= static_cast<int>(g->configs.size()))
    return invalid_plan("cuDNN FP8 conv graph rank " + std::to_string(rank) + " but cuDNN lists " +
                        std::to_string(g ? g->configs.size() : 0) + " configurations");
  Shared& st = shared();
  const auto key = std::make_tuple(dev, p.signature(), rank);
  {
    std::lock_guard<std::mutex> lock(st.mu);
    auto it = st.plans.find(key);
    if (it != st.plans.end()) return it->second;
  }
  KILN_ASSIGN_OR_RETURN(cudnnHandle_t h, build_handle(dev));
  StatusOr<GraphPlan> gp = make_plan(h, g->configs, rank);
  if (!gp.ok()) {
    cudaGetLastError();
    return gp.status();
  }
  std::lock_guard<std::mutex> lock(st.mu);
  return st.plans.emplace(key, *gp).first->second;
}

Status conv8_graph_run(cudnnHandle_t h, const GraphPlan& gp, const void* xq, const void* w, const float* scale,
                       const float* bias, const void* z, void* y, void* workspace) {
  std::vector<int64_t> uids = {kX, kW, kS, kB, kY};
  std::vector<void*> ptrs = {const_cast<void*>(xq), const_cast<void*>(w), const_cast<float*>(scale),
                             const_cast<float*>(bias), y};
  if (z) {
    uids.push_back(kZ);
    ptrs.push_back(const_cast<void*>(z));
  }
  return execute_plan(h, gp, uids, ptrs, workspace);
}

}  // namespace kiln::cuda
