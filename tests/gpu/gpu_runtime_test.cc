// The public runtime API on CUDA engines: ExecutionContext::enqueue with device addresses bound
// by tensor name. Several execution contexts of one engine on several threads and streams must
// give exactly the bits of a single context; enqueue must neither allocate nor synchronize
// (checked with cudaMemGetInfo and by capturing it into a CUDA graph). Skips without a GPU.
#include <gtest/gtest.h>

#include "builder/build_from_graph.h"
#include "gpu/gpu_test_util.h"

#include <cstring>
#include <sstream>
#include <thread>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "gpu/builder_graph.h"
#include "passes/pass_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include "backends/cuda/device.h"
#include "backends/cuda/gpu_model.h"
#endif

namespace kiln::testing {
namespace {

using ir::OpKind;

constexpr int64_t kBatch = 2;

// conv 3x3 + bias + relu -> conv 1x1 + residual + relu -> global average pool -> flatten ->
// gemm (transB) -> softmax; outputs: the logits and the softmax.
[[maybe_unused]] ir::Graph conv_gemm_net() {
  TinyGraph t;
  auto x = t.input("x", {kBatch, 8, 12, 12});
  auto w1 = t.constant("w1", random_tensor({16, 8, 3, 3}, 31, -0.3f, 0.3f));
  auto b1 = t.constant("b1", random_tensor({16}, 32));
  auto c1 = t.node(OpKind::kConv, "conv1", {x, w1, b1}, {kBatch, 16, 12, 12},
                   {{"pads", ir::Attribute::of_ints({1, 1, 1, 1})}});
  auto r1 = t.node(OpKind::kRelu, "relu1", {c1}, {kBatch, 16, 12, 12});
  auto w2 = t.constant("w2", random_tensor({16, 16, 1, 1}, 33, -0.3f, 0.3f));
  auto c2 = t.node(OpKind::kConv, "conv2", {r1, w2}, {kBatch, 16, 12, 12});
  auto a2 = t.node(OpKind::kAdd, "add2", {c2, r1}, {kBatch, 16, 12, 12});
  auto r2 = t.node(OpKind::kRelu, "relu2", {a2}, {kBatch, 16, 12, 12});
  auto gp = t.node(OpKind::kGlobalAveragePool, "gap", {r2}, {kBatch, 16, 1, 1});
  auto fl = t.node(OpKind::kFlatten, "flatten", {gp}, {kBatch, 16});
  auto wf = t.constant("wf", random_tensor({10, 16}, 34));
  auto bf = t.constant("bf", random_tensor({10}, 35));
  auto fc = t.node(OpKind::kGemm, "fc", {fl, wf, bf}, {kBatch, 10}, {{"transB", ir::Attribute::of_int(1)}});
  auto sm = t.node(OpKind::kSoftmax, "softmax", {fc}, {kBatch, 10});
  t.g.outputs = {fc, sm};
  return t.g;
}

#ifdef KILN_HAVE_CUDA

std::shared_ptr<Engine> build_engine(bool fp16) {
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = fp16;
  c.tf32 = false;
  auto plan = build_from_graph(conv_gemm_net(), c);
  EXPECT_TRUE(plan.ok()) << "building the " << (fp16 ? "FP16" : "FP32") << " plan: " << plan.status().to_string();
  if (!plan.ok()) return nullptr;
  auto e = Runtime::deserialize_engine(*plan);
  EXPECT_TRUE(e.ok()) << "loading the plan: " << e.status().to_string();
  return e.ok() ? *e : nullptr;
}

// Device memory owned by a test (freed on scope exit).
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess) << "cudaMalloc " << n; }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct Io {
  std::vector<std::string> inputs, outputs;  // names
  std::vector<size_t> out_bytes;
};

Io io_of(const Engine& e, ExecutionContext& ctx) {
  Io io;
  for (const IOTensor& t : e.io_tensors()) {
    (t.is_input ? io.inputs : io.outputs).push_back(t.desc.name);
    if (!t.is_input) {
      auto s = ctx.tensor_shape(t.desc.name);
      EXPECT_TRUE(s.ok()) << s.status().to_string();
      io.out_bytes.push_back(s.ok() ? static_cast<size_t>(shape_numel(*s)) * sizeof(float) : 0);
    }
  }
  return io;
}

// Runs input `x` (on the device) through `ctx` on `stream` and returns each output's bytes.
std::vector<std::vector<uint8_t>> run_once(ExecutionContext& ctx, const Io& io, void* x,
                                           std::vector<std::unique_ptr<DeviceBuffer>>& outs, cudaStream_t stream) {
  std::vector<std::vector<uint8_t>> r;
  Status s = ctx.set_tensor_address(io.inputs[0], x);
  EXPECT_TRUE(s.ok()) << s.to_string();
  for (size_t k = 0; k < io.outputs.size(); ++k) {
    s = ctx.set_tensor_address(io.outputs[k], outs[k]->p);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  s = ctx.enqueue(stream);
  EXPECT_TRUE(s.ok()) << "enqueue: " << s.to_string();
  for (size_t k = 0; k < io.outputs.size(); ++k) {
    r.emplace_back(io.out_bytes[k]);
    EXPECT_EQ(cudaMemcpyAsync(r.back().data(), outs[k]->p, io.out_bytes[k], cudaMemcpyDeviceToHost, stream), cudaSuccess);
  }
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return r;
}

std::vector<std::unique_ptr<DeviceBuffer>> output_buffers(const Io& io) {
  std::vector<std::unique_ptr<DeviceBuffer>> b;
  for (size_t n : io.out_bytes) b.push_back(std::make_unique<DeviceBuffer>(n));
  return b;
}

Tensor as_tensor(const std::vector<uint8_t>& bytes, const Shape& s) {
  Tensor t(DataType::kFloat32, s);
  std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

// 4 threads x 4 contexts (each on its own stream, created by the thread that uses it) x 40
// iterations, each enqueue on a different random input; every output must equal, bit for bit,
// a single context's output on that input; that output must match the CPU reference.
void concurrent_contexts_match_single_context(bool fp16) {
  constexpr int kThreads = 4, kContexts = 4, kIters = 40, kInputs = 16;
  std::shared_ptr<Engine> engine = build_engine(fp16);
  ASSERT_TRUE(engine);
  const Shape x_shape = {kBatch, 8, 12, 12};
  std::vector<Tensor> xs;
  std::vector<std::unique_ptr<DeviceBuffer>> dx;
  for (int i = 0; i < kInputs; ++i) {
    xs.push_back(random_tensor(x_shape, 100 + i, -2.f, 2.f));
    dx.push_back(std::make_unique<DeviceBuffer>(xs.back().nbytes()));
    ASSERT_EQ(cudaMemcpy(dx.back()->p, xs.back().raw(), xs.back().nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // Reference: one context, one stream, inputs one after another.
  auto ref_ctx = engine->create_execution_context();
  const Io io = io_of(*engine, *ref_ctx);
  ASSERT_EQ(io.inputs.size(), 1u);
  ASSERT_EQ(io.outputs.size(), 2u);
  cudaStream_t s0;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking), cudaSuccess);
  auto ref_out = output_buffers(io);
  std::vector<std::vector<std::vector<uint8_t>>> ref(kInputs);
  ir::Graph g = conv_gemm_net();
  for (int i = 0; i < kInputs; ++i) {
    ref[i] = run_once(*ref_ctx, io, dx[i]->p, ref_out, s0);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "single-context run of input " << i;
    auto cpu = interpret(g, {xs[i]});
    ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
    const std::vector<Tensor> gpu = {as_tensor(ref[i][0], {kBatch, 10}), as_tensor(ref[i][1], {kBatch, 10})};
    EXPECT_LE(relative_diff(*cpu, gpu), fp16 ? 2e-2 : 1e-4) << "input " << i << ": the GPU disagrees with the CPU";
  }
  cudaStreamDestroy(s0);

  std::vector<std::string> errors(kThreads);
  std::vector<int> checked(kThreads, 0);
  auto worker = [&](int t) {
    std::ostringstream err;
    std::vector<std::unique_ptr<ExecutionContext>> ctxs;
    std::vector<cudaStream_t> streams(kContexts, nullptr);
    std::vector<std::vector<std::unique_ptr<DeviceBuffer>>> outs;
    for (int c = 0; c < kContexts; ++c) {
      ctxs.push_back(engine->create_execution_context());
      if (cudaStreamCreateWithFlags(&streams[c], cudaStreamNonBlocking) != cudaSuccess) err << "cudaStreamCreate failed; ";
      outs.push_back(output_buffers(io));
      for (size_t k = 0; k < io.outputs.size(); ++k)
        if (Status s = ctxs[c]->set_tensor_address(io.outputs[k], outs[c][k]->p); !s.ok()) err << s.to_string() << "; ";
    }
    std::vector<std::vector<uint8_t>> host(io.outputs.size());
    for (int it = 0; it < kIters && err.str().empty(); ++it) {
      int which[kContexts];
      for (int c = 0; c < kContexts; ++c) {  // all four in flight at once
        which[c] = (t * 7 + it * 5 + c * 3) % kInputs;
        Status s = ctxs[c]->set_tensor_address(io.inputs[0], dx[which[c]]->p);
        if (s.ok()) s = ctxs[c]->enqueue(streams[c]);
        if (!s.ok()) err << "thread " << t << " iteration " << it << " context " << c << ": " << s.to_string() << "; ";
      }
      for (int c = 0; c < kContexts; ++c) {
        for (size_t k = 0; k < io.outputs.size(); ++k) {
          host[k].resize(io.out_bytes[k]);
          cudaMemcpyAsync(host[k].data(), outs[c][k]->p, io.out_bytes[k], cudaMemcpyDeviceToHost, streams[c]);
        }
        if (cudaError_t e = cudaStreamSynchronize(streams[c]); e != cudaSuccess) {
          err << "thread " << t << " context " << c << ": " << cudaGetErrorString(e) << "; ";
          continue;
        }
        for (size_t k = 0; k < io.outputs.size(); ++k) {
          ++checked[t];
          if (host[k] == ref[which[c]][k]) continue;
          const float* a = reinterpret_cast<const float*>(host[k].data());
          const float* b = reinterpret_cast<const float*>(ref[which[c]][k].data());
          size_t e = 0;
          while (e + 1 < host[k].size() / 4 && a[e] == b[e]) ++e;
          err << "thread " << t << " iteration " << it << " context " << c << " input " << which[c] << " output '"
              << io.outputs[k] << "': element " << e << " is " << a[e] << ", the single context gave " << b[e] << "; ";
        }
      }
    }
    for (cudaStream_t s : streams)
      if (s) cudaStreamDestroy(s);
    errors[t] = err.str();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(errors[t], "") << "thread " << t;
    EXPECT_EQ(checked[t], kIters * kContexts * 2) << "thread " << t << " compared fewer outputs than it enqueued";
  }
}

#endif  // KILN_HAVE_CUDA

TEST(GpuRuntime, ConcurrentContextsMatchSingleContextFp32) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  concurrent_contexts_match_single_context(false);
#endif
}

TEST(GpuRuntime, ConcurrentContextsMatchSingleContextFp16) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  concurrent_contexts_match_single_context(true);
#endif
}

// After one warm-up enqueue, further enqueues leave the free device memory unchanged, and an
// enqueue captured into a CUDA graph (capture forbids synchronization and cudaMalloc) replays to
// the same bits as a direct enqueue.
TEST(GpuRuntime, EnqueueDoesNotAllocateAndCanBeCaptured) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(fp16 ? "FP16" : "FP32");
    std::shared_ptr<Engine> engine = build_engine(fp16);
    ASSERT_TRUE(engine);
    auto ctx = engine->create_execution_context();
    const Io io = io_of(*engine, *ctx);
    auto outs = output_buffers(io);
    Tensor x1 = random_tensor({kBatch, 8, 12, 12}, 7, -2.f, 2.f), x2 = random_tensor({kBatch, 8, 12, 12}, 8, -2.f, 2.f);
    DeviceBuffer d1(x1.nbytes()), d2(x2.nbytes()), dx(x1.nbytes());
    ASSERT_EQ(cudaMemcpy(d1.p, x1.raw(), x1.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(d2.p, x2.raw(), x2.nbytes(), cudaMemcpyHostToDevice), cudaSuccess);
    cudaStream_t s;
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    const auto want1 = run_once(*ctx, io, d1.p, outs, s);  // also the warm-up
    const auto want2 = run_once(*ctx, io, d2.p, outs, s);
    ASSERT_NE(want1[0], want2[0]) << "different inputs gave the same logits";

    size_t free0 = 0, free1 = 0, total = 0;
    ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    for (int i = 0; i < 20; ++i) {
      Status st = ctx->enqueue(s);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    EXPECT_EQ(free0, free1) << "20 enqueues changed the free device memory by " << static_cast<long long>(free0 - free1)
                            << " bytes";

    // Capture with the input bound to dx; then fill dx with x1 or x2 and replay.
    ASSERT_TRUE(ctx->set_tensor_address(io.inputs[0], dx.p).ok());
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    Status st = ctx->enqueue(s);
    const cudaError_t end = cudaStreamEndCapture(s, &graph);
    ASSERT_TRUE(st.ok()) << "enqueue during stream capture: " << st.to_string();
    ASSERT_EQ(end, cudaSuccess) << "cudaStreamEndCapture: " << cudaGetErrorString(end)
                                << " (enqueue made a call that capture forbids)";
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int round = 0; round < 2; ++round) {
      const Tensor& x = round == 0 ? x2 : x1;
      const auto& want = round == 0 ? want2 : want1;
      ASSERT_EQ(cudaMemcpyAsync(dx.p, x.raw(), x.nbytes(), cudaMemcpyHostToDevice, s), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      for (size_t k = 0; k < io.outputs.size(); ++k) {
        std::vector<uint8_t> got(io.out_bytes[k]);
        ASSERT_EQ(cudaMemcpyAsync(got.data(), outs[k]->p, got.size(), cudaMemcpyDeviceToHost, s), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
        EXPECT_EQ(got, want[k]) << "graph replay " << round << ", output '" << io.outputs[k]
                                << "' differs from a direct enqueue on the same input";
      }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(s);
  }
#endif
}

// Models of one engine for two batch sizes share one device copy of each weight.
TEST(GpuRuntime, ModelsForSeveralShapesShareWeights) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = cuda_graph(conv_gemm_net());  // what an FP32 plan lowers (builder_graph.h)
  cuda::GpuBuildOptions o;
  o.tune = false;
  o.precision.tf32 = false;
  o.weight_cache = std::make_shared<cuda::WeightCache>();
  auto vs2 = cuda::infer_value_shapes_by_reference(g, {{kBatch, 8, 12, 12}});
  ASSERT_TRUE(vs2.ok()) << vs2.status().to_string();
  auto m2 = cuda::GpuModel::create(g, *vs2, o);
  ASSERT_TRUE(m2.ok()) << m2.status().to_string();
  const int uploads = o.weight_cache->uploads();
  const size_t bytes = o.weight_cache->device_bytes();
  EXPECT_GT(uploads, 0);
  EXPECT_LE(bytes, (*m2)->weight_bytes());  // the model counts a repeated upload twice, the cache once
  auto vs4 = cuda::infer_value_shapes_by_reference(g, {{4, 8, 12, 12}});
  ASSERT_TRUE(vs4.ok()) << vs4.status().to_string();
  auto m4 = cuda::GpuModel::create(g, *vs4, o);
  ASSERT_TRUE(m4.ok()) << m4.status().to_string();
  EXPECT_EQ(o.weight_cache->uploads(), uploads) << "the batch-4 model uploaded weights again";
  EXPECT_EQ(o.weight_cache->device_bytes(), bytes);
  Tensor x = random_tensor({4, 8, 12, 12}, 9, -2.f, 2.f);
  auto ctx = (*m4)->create_context();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  std::vector<Tensor> out;
  Status s = (*ctx)->run({x}, &out);
  ASSERT_TRUE(s.ok()) << s.to_string();
  auto ref = interpret(conv_gemm_net(), {x});
  ASSERT_TRUE(ref.ok());
  EXPECT_LE(relative_diff(*ref, out), 1e-4) << "the batch-4 model on shared weights disagrees with the CPU";
#endif
}

// Contexts of the batch-4 and batch-2 models on one GpuResources (decision 0079): the smaller
// model reuses the arena, workspace and handles (no growth: the generation stays), each context's
// CUDA graph replays correctly after the other ran on the same arena, and a growth (batch 2 first,
// then 4) makes the earlier context recapture instead of replaying a graph naming freed memory.
TEST(GpuRuntime, ContextsOfSeveralShapesShareOneDeviceState) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  const ir::Graph g = cuda_graph(conv_gemm_net());
  cuda::GpuBuildOptions o;
  o.tune = false;
  o.precision.tf32 = false;
  o.weight_cache = std::make_shared<cuda::WeightCache>();
  auto setup = cuda::GpuResources::create();
  ASSERT_TRUE(setup.ok()) << setup.status().to_string();
  o.setup_resources = *setup;
  std::shared_ptr<cuda::GpuModel> models[2];
  const int64_t batches[2] = {4, 2};
  for (int i = 0; i < 2; ++i) {
    auto vs = cuda::infer_value_shapes_by_reference(g, {{batches[i], 8, 12, 12}});
    ASSERT_TRUE(vs.ok()) << vs.status().to_string();
    auto m = cuda::GpuModel::create(g, *vs, o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    models[i] = *m;
  }
  // The set-up resources keep handles only: their memory went back after each set-up.
  EXPECT_EQ((*setup)->arena_bytes(), 0u);
  EXPECT_LT(models[1]->arena_bytes(), models[0]->arena_bytes());
  const Tensor x4 = random_tensor({4, 8, 12, 12}, 19, -2.f, 2.f);
  const Tensor x2 = random_tensor({2, 8, 12, 12}, 20, -2.f, 2.f);
  auto ref4 = interpret(conv_gemm_net(), {x4});
  auto ref2 = interpret(conv_gemm_net(), {x2});
  ASSERT_TRUE(ref4.ok() && ref2.ok());
  for (int order = 0; order < 2; ++order) {
    // order 0: batch 4 first (the arena fits batch 2 after it); order 1: batch 2 first (grows).
    auto res = cuda::GpuResources::create();
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    const int first = order == 0 ? 0 : 1, second = 1 - first;
    auto c_first = models[first]->create_context(*res);
    ASSERT_TRUE(c_first.ok()) << c_first.status().to_string();
    (*c_first)->use_cuda_graph(true);
    {  // captures its CUDA graph on the arena as it is now
      std::vector<Tensor> out;
      Status st = (*c_first)->run({batches[first] == 4 ? x4 : x2}, &out);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    const uint64_t gen = (*res)->generation();
    auto c_second = models[second]->create_context(*res);
    ASSERT_TRUE(c_second.ok()) << c_second.status().to_string();
    if (order == 0) EXPECT_EQ((*res)->generation(), gen) << "the smaller model grew the shared device state";
    else EXPECT_GT((*res)->generation(), gen) << "the larger model did not grow the shared device state";
    EXPECT_EQ((*res)->arena_bytes(), std::max<size_t>(models[0]->arena_bytes(), 256));
    (*c_second)->use_cuda_graph(true);
    for (int round = 0; round < 3; ++round) {
      for (int which : {first, second}) {
        cuda::GpuContext& c = which == first ? **c_first : **c_second;
        const Tensor& x = batches[which] == 4 ? x4 : x2;
        const auto& ref = batches[which] == 4 ? *ref4 : *ref2;
        std::vector<Tensor> out;
        Status st = c.run({x}, &out);
        ASSERT_TRUE(st.ok()) << st.to_string();
        EXPECT_LE(relative_diff(ref, out), 1e-4)
            << "order " << order << ", round " << round << ", batch " << batches[which] << " disagrees with the CPU";
      }
    }
  }
#endif
}

// Binding errors are Status values naming the tensor.
TEST(GpuRuntime, BindingErrorsNameTheTensor) {
  REQUIRE_GPU();
#ifdef KILN_HAVE_CUDA
  std::shared_ptr<Engine> engine = build_engine(false);
  ASSERT_TRUE(engine);
  auto ctx = engine->create_execution_context();
  Status s = ctx->enqueue(nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("input 'x' has no address"), std::string::npos) << s.to_string();
  std::vector<float> pageable(kBatch * 8 * 12 * 12);
  s = ctx->set_tensor_address("x", pageable.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("pageable host memory"), std::string::npos) << s.to_string();
  s = ctx->set_tensor_address("nope", pageable.data());
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.to_string();
  s = ctx->set_tensor_address("x", nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  auto shape = ctx->tensor_shape("softmax_out");
  ASSERT_TRUE(shape.ok()) << shape.status().to_string();
  EXPECT_EQ(*shape, (Shape{kBatch, 10}));
#endif
}

}  // namespace
}  // namespace kiln::testing
