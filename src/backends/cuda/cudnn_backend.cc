// cuDNN graph-API helpers (cudnn_backend.h).
#include "backends/cuda/cudnn_backend.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "backends/cuda/cuda_check.h"

namespace kiln::cuda {

StatusOr<Desc> create_desc(cudnnBackendDescriptorType_t type) {
  auto d = std::make_shared<BackendDesc>();
  KILN_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d->d));
  return d;
}

Status set_attr(const Desc& d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n, const void* v) {
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(d->d, a, t, n, v));
  return Status::Ok();
}

Status set_desc_attr(const Desc& d, cudnnBackendAttributeName_t a, const Desc& v) {
  return set_attr(d, a, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &v->d);
}

StatusOr<Desc> nhwc_tensor(int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t h, int64_t w, bool is_virtual) {
  KILN_ASSIGN_OR_RETURN(Desc d, create_desc(CUDNN_BACKEND_TENSOR_DESCRIPTOR));
  const int64_t dims[4] = {n, c, h, w};
  const int64_t strides[4] = {c * h * w, 1, w * c, c};
  const int64_t align = 16;
  const bool virt = is_virtual;
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt));
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides));
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align));
  KILN_RETURN_IF_ERROR(set_attr(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(d->d));
  return d;
}

StatusOr<Desc> pointwise_op(cudnnPointwiseMode_t mode, const Desc& x, const Desc* b, const Desc& y) {
  KILN_ASSIGN_OR_RETURN(Desc pw, create_desc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR));
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  KILN_RETURN_IF_ERROR(set_attr(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(set_attr(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(pw->d));
  KILN_ASSIGN_OR_RETURN(Desc op, create_desc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set_desc_attr(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  KILN_RETURN_IF_ERROR(set_desc_attr(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b) KILN_RETURN_IF_ERROR(set_desc_attr(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  KILN_RETURN_IF_ERROR(set_desc_attr(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(op->d));
  return op;
}

StatusOr<GraphPlan> make_plan(cudnnHandle_t h, const std::vector<Desc>& configs, int rank) {
  GraphPlan gp;
  gp.heur_rank = rank;
  const Desc& cfg = configs[static_cast<size_t>(rank)];
  KILN_ASSIGN_OR_RETURN(gp.plan, create_desc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR));
  KILN_RETURN_IF_ERROR(set_attr(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_RETURN_IF_ERROR(set_desc_attr(gp.plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfg));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(gp.plan->d));
  int64_t n = 0;
  KILN_CUDNN_CHECK(cudnnBackendGetAttribute(gp.plan->d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                            &n, &gp.workspace));
  // The engine's global index, for the tactic string (informational).
  KILN_ASSIGN_OR_RETURN(Desc eng, create_desc(CUDNN_BACKEND_ENGINE_DESCRIPTOR));
  if (cudnnBackendGetAttribute(cfg->d, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng->d) ==
      CUDNN_STATUS_SUCCESS) {
    int64_t idx = -1;
    if (cudnnBackendGetAttribute(eng->d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &idx) ==
        CUDNN_STATUS_SUCCESS)
      gp.engine = idx;
  }
  return gp;
}

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

StatusOr<Desc> conv_forward_op(const Desc& x, const Desc& w, const Desc& y, const int64_t pad[2], const int64_t stride[2],
                               const int64_t dil[2]) {
  KILN_ASSIGN_OR_RETURN(Desc conv, create_desc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR));
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pad));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride));
  KILN_RETURN_IF_ERROR(set_attr(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(conv->d));
  KILN_ASSIGN_OR_RETURN(Desc cop, create_desc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR));
  const float one = 1.f, zero = 0.f;
  KILN_RETURN_IF_ERROR(set_desc_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x));
  KILN_RETURN_IF_ERROR(set_desc_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w));
  KILN_RETURN_IF_ERROR(set_desc_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y));
  KILN_RETURN_IF_ERROR(set_desc_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  KILN_RETURN_IF_ERROR(set_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one));
  KILN_RETURN_IF_ERROR(set_attr(cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(cop->d));
  return cop;
}

Status execute_plan(cudnnHandle_t h, const GraphPlan& gp, const std::vector<int64_t>& uids, const std::vector<void*>& ptrs,
                    void* workspace) {
  BackendDesc vp;
  KILN_CUDNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp.d));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                                            static_cast<int64_t>(uids.size()), uids.data()));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                                            static_cast<int64_t>(ptrs.size()), ptrs.data()));
  KILN_CUDNN_CHECK(cudnnBackendSetAttribute(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(vp.d));
  KILN_CUDNN_CHECK(cudnnBackendExecute(h, gp.plan->d, vp.d));
  return Status::Ok();
}

StatusOr<Desc> operation_graph(cudnnHandle_t h, const std::vector<Desc>& ops) {
  KILN_ASSIGN_OR_RETURN(Desc g, create_desc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR));
  std::vector<cudnnBackendDescriptor_t> raw;
  for (const Desc& o : ops) raw.push_back(o->d);
  KILN_RETURN_IF_ERROR(set_attr(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                static_cast<int64_t>(raw.size()), raw.data()));
  KILN_RETURN_IF_ERROR(set_attr(g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h));
  KILN_CUDNN_CHECK(cudnnBackendFinalize(g->d));
  return g;
}

StatusOr<std::vector<Desc>> engine_configs(const Desc& op_graph) {
  std::vector<Desc> out;
  for (cudnnBackendHeurMode_t hm : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    KILN_ASSIGN_OR_RETURN(Desc heur, create_desc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR));
    KILN_RETURN_IF_ERROR(set_desc_attr(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, op_graph));
    KILN_RETURN_IF_ERROR(set_attr(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &hm));
    if (cudnnBackendFinalize(heur->d) != CUDNN_STATUS_SUCCESS) continue;
    int64_t count = 0;
    if (cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS || count <= 0)
      continue;
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw_cfgs;
    for (int64_t i = 0; i < count; ++i) {
      KILN_ASSIGN_OR_RETURN(Desc c, create_desc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw_cfgs.push_back(c->d);
      cfgs.push_back(c);
    }
    int64_t got = 0;
    KILN_CUDNN_CHECK(cudnnBackendGetAttribute(heur->d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                              count, &got, raw_cfgs.data()));
    for (int64_t i = 0; i < got; ++i) out.push_back(cfgs[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace kiln::cuda
