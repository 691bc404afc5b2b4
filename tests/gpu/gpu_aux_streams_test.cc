// Aux streams on the device (docs/decisions/0011-aux-streams.md): an Inception-like block (four
// conv branches + Concat) and a ResNet bottleneck with a downsample branch, built with
// max_aux_streams 0 and 3 from the same tactics, must give bit-identical outputs: run directly,
// through the context's own CUDA graph, captured by the caller (a fork/join capture of
// enqueue_device), and with four contexts enqueued from four threads on four streams at once.
// Skips cleanly where there is no GPU (or Kiln was built without CUDA).
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#include <cstring>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "gpu/branch_graphs.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA

// Builds without timing (deterministic heuristic tactics); `preset` pins every layer's tactic so
// two builds that differ only in max_aux_streams run the same kernels.
std::shared_ptr<cuda::GpuModel> build(const ir::Graph& g, const Shape& in, int max_aux, bool fp16,
                                      const std::map<std::string, cuda::GpuBuildOptions::PresetTactic>& preset = {}) {
  auto shapes = cuda::infer_value_shapes_by_reference(g, {in});
  EXPECT_TRUE(shapes.ok()) << shapes.status().to_string();
  if (!shapes.ok()) return nullptr;
  cuda::GpuBuildOptions o;
  o.precision.fp16 = fp16;
  o.precision.tf32 = false;
  o.tune = false;
  o.max_aux_streams = max_aux;
  o.preset_tactics = preset;
  auto m = cuda::GpuModel::create(g, *shapes, o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : nullptr;
}

std::map<std::string, cuda::GpuBuildOptions::PresetTactic> tactics_of(const cuda::GpuModel& m) {
  std::map<std::string, cuda::GpuBuildOptions::PresetTactic> r;
  for (const auto& l : m.layers()) r[l.name] = {l.tactic_id, 0};
  return r;
}
std::map<std::string, std::string> tactic_names(const cuda::GpuModel& m) {
  std::map<std::string, std::string> r;
  for (const auto& l : m.layers()) r[l.name] = l.tactic;
  return r;
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  return true;
}

struct DeviceBuffer {
  void* p = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// enqueue_device captured by the caller into a CUDA graph (thread-local capture mode), launched
// once; the outputs as host tensors. The capture ends cleanly only if every aux stream the
// context forked was joined back into `s`.
std::vector<Tensor> run_captured(const cuda::GpuModel& m, cuda::GpuContext& ctx, const Tensor& x) {
  std::vector<Tensor> out;
  DeviceBuffer din(x.nbytes());
  std::vector<std::unique_ptr<DeviceBuffer>> douts;
  std::vector<void*> optrs;
  for (const Shape& s : m.output_shapes()) {
    out.emplace_back(DataType::kFloat32, s);
    douts.push_back(std::make_unique<DeviceBuffer>(out.back().nbytes()));
    optrs.push_back(douts.back()->p);
  }
  cudaStream_t s;
  EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(din.p, x.raw(), x.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  Status st = ctx.enqueue_device({din.p}, optrs, s);
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  EXPECT_TRUE(st.ok()) << "enqueue_device during capture: " << st.to_string();
  EXPECT_EQ(end, cudaSuccess) << "cudaStreamEndCapture: " << cudaGetErrorString(end)
                              << " (an aux stream not joined back, or a call capture forbids)";
  if (end == cudaSuccess && st.ok()) {
    cudaGraphExec_t exec = nullptr;
    EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    EXPECT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    for (size_t i = 0; i < out.size(); ++i)
      EXPECT_EQ(cudaMemcpyAsync(out[i].raw(), optrs[i], out[i].nbytes(), cudaMemcpyDeviceToHost, s), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaGraphExecDestroy(exec);
  }
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  return out;
}

// The 0-aux and 3-aux builds of `g` agree bit for bit in every way of running them.
void check_bit_identical(const ir::Graph& g, const Shape& in, bool fp16, int min_aux) {
  auto base = build(g, in, 0, fp16);
  ASSERT_TRUE(base);
  EXPECT_EQ(base->aux_streams(), 0);
  auto aux = build(g, in, 3, fp16, tactics_of(*base));
  ASSERT_TRUE(aux);
  EXPECT_GE(aux->aux_streams(), min_aux);
  EXPECT_LE(aux->aux_streams(), 3);
  std::set<int> used;
  for (const auto& l : aux->layers()) used.insert(l.stream);
  EXPECT_EQ(static_cast<int>(used.size()), aux->aux_streams() + 1) << "every aux stream runs a layer";
  EXPECT_EQ(tactic_names(*aux), tactic_names(*base));

  const Tensor x = random_tensor(in, 31, -2.f, 2.f);
  auto ref = interpret(g, {x});
  ASSERT_TRUE(ref.ok());
  auto c0 = base->create_context();
  ASSERT_TRUE(c0.ok()) << c0.status().to_string();
  std::vector<Tensor> want;
  ASSERT_TRUE((*c0)->run({x}, &want).ok());
  EXPECT_LE(relative_diff(*ref, want), fp16 ? 2e-2 : 1e-4) << "the sequential build against the CPU reference";

  auto c1 = aux->create_context();
  ASSERT_TRUE(c1.ok()) << c1.status().to_string();
  for (int rep = 0; rep < 3; ++rep) {  // repeated: the arena of one run is the input of the next's hazards
    std::vector<Tensor> got;
    Status st = (*c1)->run({x}, &got);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(same_bits(got, want)) << "direct run " << rep;
  }
  (*c1)->use_cuda_graph(true);
  for (int rep = 0; rep < 2; ++rep) {  // capture, then replay
    std::vector<Tensor> got;
    Status st = (*c1)->run({x}, &got);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(same_bits(got, want)) << "context CUDA graph, run " << rep;
  }
  auto c2 = aux->create_context();
  ASSERT_TRUE(c2.ok());
  EXPECT_TRUE(same_bits(run_captured(*aux, **c2, x), want)) << "caller's capture of enqueue_device";
}

// Four contexts of the aux-stream build, each on its own stream and thread, with different
// inputs, enqueued at once for several iterations: each output equals the sequential build's.
void check_concurrent_contexts(const ir::Graph& g, const Shape& in, bool fp16) {
  auto base = build(g, in, 0, fp16);
  ASSERT_TRUE(base);
  auto aux = build(g, in, 3, fp16, tactics_of(*base));
  ASSERT_TRUE(aux);
  ASSERT_GE(aux->aux_streams(), 1);
  constexpr int kContexts = 4, kIters = 8;
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> want(kContexts);
  auto c0 = base->create_context();
  ASSERT_TRUE(c0.ok());
  for (int c = 0; c < kContexts; ++c) {
    inputs.push_back(random_tensor(in, 40 + static_cast<uint32_t>(c), -2.f, 2.f));
    ASSERT_TRUE((*c0)->run({inputs.back()}, &want[c]).ok());
  }
  std::vector<std::unique_ptr<cuda::GpuContext>> ctxs;
  for (int c = 0; c < kContexts; ++c) {
    auto ctx = aux->create_context();
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    ctxs.push_back(std::move(ctx).value());
  }
  std::vector<std::string> errors(kContexts);
  auto worker = [&](int c) {
    std::ostringstream err;
    cudaStream_t s;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      errors[c] = "cudaStreamCreate failed";
      return;
    }
    void* din = nullptr;
    cudaMalloc(&din, inputs[c].nbytes());
    std::vector<void*> outs;
    for (const Tensor& w : want[c]) {
      void* p = nullptr;
      cudaMalloc(&p, w.nbytes());
      outs.push_back(p);
    }
    cudaMemcpy(din, inputs[c].raw(), inputs[c].nbytes(), cudaMemcpyHostToDevice);
    for (int it = 0; it < kIters; ++it) {
      Status st = ctxs[c]->enqueue_device({din}, outs, s);
      if (!st.ok()) {
        err << "iteration " << it << ": " << st.to_string() << "; ";
        break;
      }
      std::vector<Tensor> got;
      for (size_t k = 0; k < outs.size(); ++k) {
        got.emplace_back(DataType::kFloat32, want[c][k].shape());
        cudaMemcpyAsync(got.back().raw(), outs[k], got.back().nbytes(), cudaMemcpyDeviceToHost, s);
      }
      if (cudaError_t e = cudaStreamSynchronize(s); e != cudaSuccess) {
        err << "iteration " << it << ": " << cudaGetErrorString(e) << "; ";
        break;
      }
      if (!same_bits(got, want[c])) err << "iteration " << it << ": outputs differ from the sequential build; ";
    }
    for (void* p : outs) cudaFree(p);
    cudaFree(din);
    cudaStreamDestroy(s);
    errors[c] = err.str();
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < kContexts; ++c) threads.emplace_back(worker, c);
  for (auto& t : threads) t.join();
  for (int c = 0; c < kContexts; ++c) EXPECT_EQ(errors[c], "") << "context " << c;
}

#endif  // KILN_HAVE_CUDA

TEST(GpuAuxStreams, InceptionBitIdenticalFp32) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  // The four branches are independent after the stem: at least three streams in use.
  check_bit_identical(inception(1, 16, cuda_config(false)), {1, 8, 16, 16}, false, 2);
#endif
}

TEST(GpuAuxStreams, InceptionBitIdenticalFp16) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  check_bit_identical(inception(2, 16, cuda_config(true)), {2, 8, 16, 16}, true, 2);
#endif
}

TEST(GpuAuxStreams, ResNetBlockBitIdentical) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "FP16" : "FP32");
    check_bit_identical(resnet_block(2, 16, cuda_config(fp16)), {2, 16, 16, 16}, fp16, 1);
  }
#endif
}

// The downsample conv runs on an aux stream beside conv1/conv2; the rest on the caller's.
TEST(GpuAuxStreams, ResNetDownsampleOnAuxStream) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  auto m = build(resnet_block(1, 16, cuda_config(false)), {1, 16, 16, 16}, -1, false);  // the builder decides
  ASSERT_TRUE(m);
  EXPECT_EQ(m->aux_streams(), 1);
  for (const auto& l : m->layers()) {
    if (l.name == "down") EXPECT_EQ(l.stream, 1) << l.name;
    else if (l.name.rfind("conv", 0) == 0 || l.name.rfind("stem", 0) == 0) EXPECT_EQ(l.stream, 0) << l.name;
  }
#endif
}

TEST(GpuAuxStreams, FourContextsOnFourStreams) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  check_concurrent_contexts(inception(1, 16, cuda_config(false)), {1, 8, 16, 16}, false);
  check_concurrent_contexts(resnet_block(2, 16, cuda_config(true)), {2, 16, 16, 16}, true);
#endif
}

}  // namespace
}  // namespace kiln::testing
