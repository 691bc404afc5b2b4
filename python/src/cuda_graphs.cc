// GraphCache (cuda_graphs.h): capture of one enqueue on a private stream, replay on the caller's.
#include "cuda_graphs.h"

#include <deque>
#include <utility>

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"
#endif

namespace kiln::py {

#ifdef KILN_HAVE_CUDA
struct GraphCache::Impl {
  cudaStream_t capture = nullptr;  // created on first use
  std::deque<std::pair<std::vector<int64_t>, cudaGraphExec_t>> graphs;  // oldest first
  ~Impl() {
    for (auto& g : graphs) cudaGraphExecDestroy(g.second);
    if (capture) cudaStreamDestroy(capture);
  }
};

GraphCache::GraphCache() : impl_(std::make_unique<Impl>()) {}
GraphCache::~GraphCache() = default;

void GraphCache::clear() {
  for (auto& g : impl_->graphs) cudaGraphExecDestroy(g.second);
  impl_->graphs.clear();
}
size_t GraphCache::size() const { return impl_->graphs.size(); }

Status GraphCache::launch(ExecutionContext& ctx, const std::vector<int64_t>& key, uintptr_t stream) {
  auto* user = reinterpret_cast<cudaStream_t>(stream);
  for (auto& g : impl_->graphs)
    if (g.first == key) {
      KILN_CUDA_CHECK(cudaGraphLaunch(g.second, user));
      return Status::Ok();
    }
  if (!impl_->capture) KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->capture, cudaStreamNonBlocking));
  // The capture records work, it runs nothing; the caller's stream may still be using the
  // context, so the graph only launches (in order) on that stream.
  cudaGraph_t graph = nullptr;
  KILN_CUDA_CHECK(cudaStreamBeginCapture(impl_->capture, cudaStreamCaptureModeThreadLocal));
  Status s = ctx.enqueue(impl_->capture);
  cudaError_t err = cudaStreamEndCapture(impl_->capture, &graph);
  KILN_RETURN_IF_ERROR(s.with_context("capturing enqueue into a CUDA graph"));
  KILN_CUDA_CHECK(err);
  cudaGraphExec_t exec = nullptr;
  err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  KILN_CUDA_CHECK(err);
  if (impl_->graphs.size() >= kMaxGraphs) {
    cudaGraphExecDestroy(impl_->graphs.front().second);
    impl_->graphs.pop_front();
  }
  impl_->graphs.emplace_back(key, exec);
  KILN_CUDA_CHECK(cudaGraphLaunch(exec, user));
  return Status::Ok();
}
#else
struct GraphCache::Impl {};
GraphCache::GraphCache() : impl_(std::make_unique<Impl>()) {}
GraphCache::~GraphCache() = default;
void GraphCache::clear() {}
size_t GraphCache::size() const { return 0; }
Status GraphCache::launch(ExecutionContext&, const std::vector<int64_t>&, uintptr_t) {
  return unsupported("CUDA graphs need a Kiln built with the CUDA backend");
}
#endif

}  // namespace kiln::py
