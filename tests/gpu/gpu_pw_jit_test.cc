// Generated FusedPointwise kernels (backends/cuda/pw_jit.h, docs/decisions/0091).
// Without a GPU: every opcode's generated source compiles with NVRTC for sm_90 and sm_89 with no
// call left in the PTX, and what cannot be generated is refused with its reason. On the GPU: the
// generated kernels compute the interpreter's values bit for bit (all opcodes, fp32 / fp16 / bf16,
// full / periodic / scalar inputs, odd sizes), a plan stores the cubin and its load runs it
// without compiling, and the time of both tactics is printed.
#include <gtest/gtest.h>

#include "gpu/gpu_test_util.h"

#ifdef KILN_HAVE_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cuda/kernels.h"
#include "backends/cuda/pw_jit.h"
#include "builder/build_from_graph.h"
#include "ir/pointwise_program.h"
#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "passes/pass_test_util.h"
#include "plan/plan_format.h"

namespace kiln::cuda {
namespace {

// A program of the opcodes [first, last) chained: r_j = op_j(previous, in1 or an immediate, imm).
PwDeviceProgram chain(int first, int last, int num_inputs) {
  PwDeviceProgram p;
  p.num_inputs = num_inputs;
  p.num_instrs = 0;
  for (int op = first; op < last && p.num_instrs < ir::kMaxPwInstrs; ++op) {
    PwDeviceInstr& in = p.instrs[p.num_instrs];
    in.op = op;
    in.src[0] = p.num_instrs == 0 ? -1 : p.num_instrs - 1;
    in.src[1] = num_inputs > 1 ? -2 : kPwImmediate;
    in.src[2] = kPwImmediate;
    in.imm[1] = 0.75f;
    in.imm[2] = 1.25f;
    ++p.num_instrs;
  }
  return p;
}

// Dims [rows, cols]; input k full ('f'), a [cols] row ('p') or one element ('s').
void set_shape(PwDeviceProgram* p, int64_t rows, int64_t cols, const std::string& modes) {
  p->rank = 2;
  p->out_dims[0] = rows;
  p->out_dims[1] = cols;
  for (int k = 0; k < p->num_inputs; ++k) {
    const char m = modes[k];
    p->in_strides[k][0] = m == 'f' ? cols : 0;
    p->in_strides[k][1] = m == 's' ? 0 : 1;
  }
}

TEST(PwJit, EveryOpcodeCompilesWithoutCalls) {
  REQUIRE_CUDA_BUILD();
  std::string why;
  ASSERT_TRUE(nvrtc_available(&why)) << why;  // the CUDA toolkit ships it with nvcc
  const int count = static_cast<int>(ir::PwOpcode::kCount);
  for (StorageType t : {StorageType::kF32, StorageType::kF16, StorageType::kBF16}) {
    for (int first = 0; first < count; first += ir::kMaxPwInstrs) {
      PwDeviceProgram p = chain(first, std::min(count, first + ir::kMaxPwInstrs), 3);
      set_shape(&p, 4, 64, "fps");
      const PwJitShape sh = pw_jit_shape(p, t);
      ASSERT_TRUE(sh.ok) << sh.why;
      EXPECT_EQ(sh.mode[0], PwJitInput::kFull);
      EXPECT_EQ(sh.mode[1], PwJitInput::kPeriodic);
      EXPECT_EQ(sh.period[1], 64u);
      EXPECT_EQ(sh.mode[2], PwJitInput::kScalar);
      const std::string src = pw_jit_source(p, t, sh.mode);
      for (int arch : {90, 89}) {
        std::string ptx;
        auto cubin = nvrtc_compile_cubin(src, arch, &ptx);
        ASSERT_TRUE(cubin.ok()) << storage_name(t) << " opcodes from " << first << ": " << cubin.status().to_string();
        EXPECT_GT(cubin->size(), 1000u);
        ASSERT_FALSE(ptx.empty());
        // Every opcode inlined with its constant folded: no call into pw_apply or a math routine.
        EXPECT_EQ(ptx.find("call."), std::string::npos) << storage_name(t) << " opcodes from " << first;
      }
    }
  }
}

TEST(PwJit, RefusesWhatItCannotGenerateAndReportsCompilerErrors) {
  REQUIRE_CUDA_BUILD();
  PwDeviceProgram p = chain(0, 2, 2);
  set_shape(&p, 3, 20, "fp");  // a period of 20: not whole fp16 vectors of 8, whole fp32 vectors of 4
  EXPECT_FALSE(pw_jit_shape(p, StorageType::kF16).ok);
  EXPECT_NE(pw_jit_shape(p, StorageType::kF16).why.find("input 1"), std::string::npos);
  EXPECT_TRUE(pw_jit_shape(p, StorageType::kF32).ok);
  EXPECT_FALSE(pw_jit_shape(p, StorageType::kI32).ok);
  // [B, 1, H] under [B, S, H] is not periodic.
  PwDeviceProgram q = chain(0, 1, 2);
  q.rank = 3;
  q.out_dims[0] = 2, q.out_dims[1] = 3, q.out_dims[2] = 8;
  q.in_strides[0][0] = 24, q.in_strides[0][1] = 8, q.in_strides[0][2] = 1;
  q.in_strides[1][0] = 8, q.in_strides[1][1] = 0, q.in_strides[1][2] = 1;
  EXPECT_FALSE(pw_jit_shape(q, StorageType::kF32).ok);
  std::string why;
  if (!nvrtc_available(&why)) GTEST_FAIL() << why;
  auto bad = nvrtc_compile_cubin("extern \"C\" __global__ void kiln_pw() { undefined_thing(); }", 90);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("undefined_thing"), std::string::npos) << bad.status().message();
}

// ---- on the GPU

struct DevBuf {
  void* p = nullptr;
  explicit DevBuf(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(bytes, 16)), cudaSuccess); }
  ~DevBuf() { cudaFree(p); }
};

// Input k's element count under `modes`.
int64_t input_elems(char m, int64_t rows, int64_t cols) { return m == 'f' ? rows * cols : (m == 'p' ? cols : 1); }

// Runs program p over random inputs with both tactics; the number of elements that differ
// (NaN equals NaN).
int64_t mismatches(const PwDeviceProgram& p, StorageType t, const std::string& modes, uint32_t seed, std::string* first) {
  const int64_t rows = p.out_dims[0], cols = p.out_dims[1], total = rows * cols;
  const size_t eb = storage_bytes(t);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  std::vector<std::unique_ptr<DevBuf>> ins;
  PwDevicePointers ptrs;
  for (int k = 0; k < p.num_inputs; ++k) {
    const int64_t n = input_elems(modes[k], rows, cols);
    std::vector<float> h(n);
    for (auto& v : h) v = d(rng);
    DevBuf f32(n * 4);
    EXPECT_EQ(cudaMemcpy(f32.p, h.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    ins.push_back(std::make_unique<DevBuf>(n * eb));
    if (t == StorageType::kF32) {
      EXPECT_EQ(cudaMemcpy(ins.back()->p, f32.p, n * 4, cudaMemcpyDeviceToDevice), cudaSuccess);
    } else {
      EXPECT_EQ(launch_convert(f32.p, StorageType::kF32, ins.back()->p, t, n, nullptr), cudaSuccess);
    }
    ptrs.in[k] = ins.back()->p;
  }
  DevBuf yi(total * eb), yj(total * eb), fi(total * 4), fj(total * 4);
  EXPECT_EQ(launch_fused_pointwise(p, ptrs, yi.p, t, nullptr), cudaSuccess);
  const PwJitShape sh = pw_jit_shape(p, t);
  EXPECT_TRUE(sh.ok) << sh.why;
  const std::string src = pw_jit_source(p, t, sh.mode);
  const int arch = current_arch();
  auto k = pw_jit_kernel(pw_jit_key(src, arch), src, nullptr, arch);
  EXPECT_TRUE(k.ok()) << k.status().to_string();
  if (!k.ok()) return total;
  PwJitArgs a;
  a.y = yj.p;
  a.total = sh.total;
  for (int i = 0; i < p.num_inputs; ++i) {
    a.in[i] = ptrs.in[i];
    a.period[i] = sh.period[i];
  }
  EXPECT_EQ((*k)->launch(a, t, nullptr), cudaSuccess);
  if (t == StorageType::kF32) {
    cudaMemcpy(fi.p, yi.p, total * 4, cudaMemcpyDeviceToDevice);
    cudaMemcpy(fj.p, yj.p, total * 4, cudaMemcpyDeviceToDevice);
  } else {
    EXPECT_EQ(launch_convert(yi.p, t, fi.p, StorageType::kF32, total, nullptr), cudaSuccess);
    EXPECT_EQ(launch_convert(yj.p, t, fj.p, StorageType::kF32, total, nullptr), cudaSuccess);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> hi(total), hj(total);
  cudaMemcpy(hi.data(), fi.p, total * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hj.data(), fj.p, total * 4, cudaMemcpyDeviceToHost);
  int64_t bad = 0;
  for (int64_t i = 0; i < total; ++i) {
    if (std::isnan(hi[i]) && std::isnan(hj[i])) continue;
    if (std::memcmp(&hi[i], &hj[i], 4) != 0) {
      if (bad++ == 0 && first)
        *first = "element " + std::to_string(i) + ": interpreter " + std::to_string(hi[i]) + ", generated " +
                 std::to_string(hj[i]);
    }
  }
  return bad;
}

TEST(GpuPwJit, GeneratedKernelsComputeTheInterpretersValues) {
  REQUIRE_GPU();
  const int count = static_cast<int>(ir::PwOpcode::kCount);
  struct Dims {
    int64_t rows, cols;
  };
  // Each opcode alone on a full and a periodic input; chains of 8 opcodes on the other input modes.
  // (Kernels are compiled once per program, modes and storage type: the sizes reuse them.)
  struct Case {
    int first, len;
    std::string modes;
  };
  std::vector<Case> cases;
  for (int op = 0; op < count; ++op) cases.push_back({op, 1, "fp"});
  for (int first = 0; first < count; first += 8)
    for (const char* m : {"fs", "sf", "ff"}) cases.push_back({first, 8, m});
  for (StorageType t : {StorageType::kF32, StorageType::kF16, StorageType::kBF16}) {
    for (const Case& c : cases) {
      for (const Dims& dm : {Dims{1, 1}, Dims{1, 13}, Dims{5, 24}, Dims{37, 1024}, Dims{1, 14336}, Dims{3, 1000}}) {
        // A period that is not whole vectors is the interpreter's (RefusesWhatItCannotGenerate).
        if (c.modes.find('p') != std::string::npos && dm.cols % (t == StorageType::kF32 ? 4 : 8) != 0 && dm.rows > 1)
          continue;
        PwDeviceProgram p = chain(c.first, std::min(count, c.first + c.len), 2);
        set_shape(&p, dm.rows, dm.cols, c.modes);
        std::string where;
        const int64_t bad = mismatches(p, t, c.modes, 17 + c.first, &where);
        EXPECT_EQ(bad, 0) << storage_name(t) << " " << dm.rows << "x" << dm.cols << " " << c.modes << " opcodes "
                          << c.first << "+" << c.len << ": " << where;
      }
    }
  }
}

// y = tanh(x) * z + x with x [4, 1024] and z [1024] (a periodic row): one FusedPointwise layer.
ir::Graph tanh_mul_add() {
  testing::TinyGraph t;
  auto x = t.input("x", {4, 1024});
  auto z = t.constant("z", testing::random_tensor({1024}, 5));
  auto th = t.node(ir::OpKind::kTanh, "tanh", {x}, {4, 1024});
  auto m = t.node(ir::OpKind::kMul, "mul", {th, z}, {4, 1024});
  auto y = t.node(ir::OpKind::kAdd, "add", {m, x}, {4, 1024});
  t.g.outputs = {y};
  return t.g;
}

TEST(GpuPwJit, APlanCarriesTheCubinAndItsLoadRunsIt) {
  REQUIRE_GPU();
  BuilderConfig c;
  c.target = TargetDevice::kCuda;
  c.fp16 = true;
  ir::Graph g = tanh_mul_add();
  auto plan = build_from_graph(g, c);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  auto parsed = plan::read_plan(plan->data(), plan->size());
  ASSERT_TRUE(parsed.ok()) << parsed.status().to_string();
  int jit_layers = 0;
  for (const auto& tac : parsed->tactics) jit_layers += tac.name.find("kiln.pw_jit") != std::string::npos;
  EXPECT_EQ(jit_layers, 1) << "the builder timed the generated kernel beside the interpreter and kept it";
  int cubins = 0;
  for (const auto& [key, bytes] : parsed->tactic_data)
    if (key.rfind("kiln.pw_jit sm_", 0) == 0) {
      ++cubins;
      EXPECT_GT(bytes.size(), 1000u);
    }
  EXPECT_EQ(cubins, jit_layers);

  auto engine = Runtime::deserialize_engine(*plan);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_GE((*engine)->tactics_restored(), jit_layers);
  auto ctx = (*engine)->create_execution_context();
  Tensor x = testing::random_tensor({4, 1024}, 9, -2.f, 2.f);
  ASSERT_TRUE(ctx->set_input("x", x).ok());
  ASSERT_TRUE(ctx->execute().ok());
  auto y = ctx->output((*engine)->io_tensors().back().desc.name);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  const Tensor z = testing::random_tensor({1024}, 5);  // the graph's constant
  double worst = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float xv = x.data<float>()[i];
    const float want = std::tanh(xv) * z.data<float>()[i % 1024] + xv;
    worst = std::max(worst, static_cast<double>(std::fabs(y->data<float>()[i] - want)));
  }
  EXPECT_LT(worst, 1e-2) << "fp16 storage between the layers";
}

// Mean us of `reps` back-to-back launches of `f` (after 3 untimed ones).
template <typename F>
double time_us(F f, int reps) {
  for (int i = 0; i < 3; ++i) f();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) f();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 1000.0 * ms / reps;
}

TEST(GpuPwJit, PrintsBothTacticsTimes) {
  REQUIRE_GPU();
  auto prog = ir::parse_pw_program("r0=Sigmoid(in0); r1=Mul(in0,r0); r2=Mul(r1,in1)");
  ASSERT_TRUE(prog.ok());
  for (int64_t n : {int64_t{14336}, int64_t{64} * 14336, int64_t{32} * 128 * 3072}) {
    PwDeviceProgram p;
    p.num_inputs = 2;
    p.num_instrs = 3;
    for (int j = 0; j < 3; ++j) {
      p.instrs[j].op = static_cast<int32_t>(prog->instrs[j].op);
      for (int q = 0; q < 3; ++q) {
        const auto& o = prog->instrs[j].args[q];
        p.instrs[j].src[q] = q >= ir::pw_arity(prog->instrs[j].op) ? kPwImmediate
                             : o.kind == ir::PwOperand::Kind::kInput ? -1 - o.index
                                                                      : o.index;
      }
    }
    set_shape(&p, 1, n, "ff");
    const StorageType t = StorageType::kF16;
    DevBuf a(n * 2), b(n * 2), y(n * 2);
    cudaMemset(a.p, 0, n * 2);
    cudaMemset(b.p, 0, n * 2);
    PwDevicePointers ptrs;
    ptrs.in[0] = a.p;
    ptrs.in[1] = b.p;
    const PwJitShape sh = pw_jit_shape(p, t);
    ASSERT_TRUE(sh.ok);
    const std::string src = pw_jit_source(p, t, sh.mode);
    auto k = pw_jit_kernel(pw_jit_key(src, current_arch()), src, nullptr, current_arch());
    ASSERT_TRUE(k.ok()) << k.status().to_string();
    PwJitArgs args;
    args.in[0] = a.p;
    args.in[1] = b.p;
    args.y = y.p;
    args.total = sh.total;
    const double ti = time_us([&] { launch_fused_pointwise(p, ptrs, y.p, t, nullptr); }, 200);
    const double tj = time_us([&] { (*k)->launch(args, t, nullptr); }, 200);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double gb = 3.0 * n * 2 / 1e9;
    std::printf("silu(a)*b fp16 n=%lld: interpreter %.2f us (%.0f GB/s), generated %.2f us (%.0f GB/s)\n",
                static_cast<long long>(n), ti, gb / (ti * 1e-6), tj, gb / (tj * 1e-6));
    ::testing::Test::RecordProperty("interp_us_" + std::to_string(n), std::to_string(ti));
    ::testing::Test::RecordProperty("jit_us_" + std::to_string(n), std::to_string(tj));
  }
}

}  // namespace
}  // namespace kiln::cuda
#endif
