// Generated FusedPointwise kernels: source, NVRTC, loading (pw_jit.h, docs/decisions/0091).
#include "backends/cuda/pw_jit.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/launch_config.cuh"
#include "kiln_generated/pw_opcode_text.h"

#ifndef KILN_CUDA_LIB_DIR
#define KILN_CUDA_LIB_DIR "/usr/local/cuda/lib64"
#endif

namespace kiln::cuda {
namespace {

bool is_float(StorageType t) { return t == StorageType::kF32 || t == StorageType::kF16 || t == StorageType::kBF16; }
int vec_of(StorageType t) { return t == StorageType::kF32 ? 4 : 8; }

// An exact float literal: the value's bits.
std::string float_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return "__uint_as_float(" + std::to_string(b) + "u)";
}

// Loads, stores and 16-byte vector lanes of one storage type (conversions as cuda_fp16.h /
// cuda_bf16.h do them on sm_80+: cvt.f32.f16, cvt.rn.f16.f32, a shift, cvt.rn.bf16.f32).
std::string storage_helpers(StorageType t) {
  if (t == StorageType::kF32)
    return R"(__device__ __forceinline__ float kiln_ld(const void* p, unsigned i) { return ((const float*)p)[i]; }
__device__ __forceinline__ void kiln_st(void* p, unsigned i, float v) { ((float*)p)[i] = v; }
__device__ __forceinline__ float kiln_el(const KilnU4& u, int j) { return __uint_as_float(u.w[j]); }
__device__ __forceinline__ void kiln_set(KilnU4& u, int j, float v) { u.w[j] = __float_as_uint(v); }
)";
  // 16-bit storage: the type's two conversions, then the same accessors over them.
  std::string h = t == StorageType::kF16
      ? R"(__device__ __forceinline__ float kiln_cvt(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ unsigned short kiln_rnd(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
)"
      : R"(__device__ __forceinline__ float kiln_cvt(unsigned short h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ unsigned short kiln_rnd(float f) { unsigned short h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
)";
  return h + R"(__device__ __forceinline__ float kiln_ld(const void* p, unsigned i) { return kiln_cvt(((const unsigned short*)p)[i]); }
__device__ __forceinline__ void kiln_st(void* p, unsigned i, float v) { ((unsigned short*)p)[i] = kiln_rnd(v); }
__device__ __forceinline__ float kiln_el(const KilnU4& u, int j) { return kiln_cvt((unsigned short)(u.w[j >> 1] >> ((j & 1) * 16))); }
__device__ __forceinline__ void kiln_set(KilnU4& u, int j, float v) {
  const unsigned sh = (j & 1) * 16;
  u.w[j >> 1] = (u.w[j >> 1] & ~(0xffffu << sh)) | ((unsigned)kiln_rnd(v) << sh);
}
)";
}

// ---- NVRTC through dlopen
struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcGetCUBINSize) cubin_size = nullptr;
  decltype(&nvrtcGetCUBIN) cubin = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error = nullptr;
  std::string why;  // empty when loaded
};

const Nvrtc& nvrtc() {
  static const Nvrtc api = [] {
    Nvrtc a;
    void* h = nullptr;
    std::string tried;
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", KILN_CUDA_LIB_DIR "/libnvrtc.so.13",
                             "/usr/local/cuda/lib64/libnvrtc.so.13"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h) break;
      const char* e = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (e ? e : name);
    }
    if (!h) {
      a.why = "NVRTC (libnvrtc.so.13) could not be loaded: " + tried;
      return a;
    }
    auto sym = [&](const char* s) { return dlsym(h, s); };
    a.create = reinterpret_cast<decltype(a.create)>(sym("nvrtcCreateProgram"));
    a.compile = reinterpret_cast<decltype(a.compile)>(sym("nvrtcCompileProgram"));
    a.log_size = reinterpret_cast<decltype(a.log_size)>(sym("nvrtcGetProgramLogSize"));
    a.log = reinterpret_cast<decltype(a.log)>(sym("nvrtcGetProgramLog"));
    a.cubin_size = reinterpret_cast<decltype(a.cubin_size)>(sym("nvrtcGetCUBINSize"));
    a.cubin = reinterpret_cast<decltype(a.cubin)>(sym("nvrtcGetCUBIN"));
    a.ptx_size = reinterpret_cast<decltype(a.ptx_size)>(sym("nvrtcGetPTXSize"));
    a.ptx = reinterpret_cast<decltype(a.ptx)>(sym("nvrtcGetPTX"));
    a.destroy = reinterpret_cast<decltype(a.destroy)>(sym("nvrtcDestroyProgram"));
    a.error = reinterpret_cast<decltype(a.error)>(sym("nvrtcGetErrorString"));
    if (!a.create || !a.compile || !a.log_size || !a.log || !a.cubin_size || !a.cubin || !a.ptx_size || !a.ptx || !a.destroy || !a.error)
      a.why = "the loaded NVRTC library lacks nvrtcGetCUBIN or another entry point";
    return a;
  }();
  return api;
}

struct JitCache {
  std::mutex mu;
  std::map<std::string, std::weak_ptr<const PwJitKernel>> kernels;
  std::map<std::string, std::string> cubins;  // compiled in this process, by key
};
JitCache& cache() {
  static JitCache* c = new JitCache;  // never destroyed: layers may outlive static destruction order
  return *c;
}

}  // namespace

PwJitShape pw_jit_shape(const PwDeviceProgram& p, StorageType t) {
  PwJitShape s;
  if (!is_float(t)) {
    s.why = std::string("storage ") + storage_name(t) + " is not a float type";
    return s;
  }
  int64_t total = 1;
  for (int k = 0; k < p.rank; ++k) total *= p.out_dims[k];
  if (total >= (int64_t{1} << 31)) {
    s.why = "the output has 2^31 elements or more";
    return s;
  }
  const int v = vec_of(t);
  for (int k = 0; k < p.num_inputs; ++k) {
    const int64_t period = broadcast_period(p.out_dims, p.in_strides[k], p.rank);
    if (period == 1) {
      s.mode[k] = PwJitInput::kScalar;
    } else if (period == total) {
      s.mode[k] = PwJitInput::kFull;
    } else if (period > 0 && period % v == 0) {
      s.mode[k] = PwJitInput::kPeriodic;
      s.period[k] = static_cast<uint32_t>(period);
    } else {
      s.why = "input " + std::to_string(k) + " is not read periodically in whole 16-byte vectors";
      return s;
    }
  }
  s.total = static_cast<uint32_t>(total);
  s.ok = true;
  return s;
}

std::string pw_jit_source(const PwDeviceProgram& p, StorageType t, const std::array<PwJitInput, ir::kMaxPwInputs>& mode) {
  const int v = vec_of(t);
  std::string s;
  s += "// Kiln: a generated FusedPointwise kernel (backends/cuda/pw_jit.h, docs/decisions/0091), ";
  s += storage_name(t);
  s += ".\ntypedef int int32_t;\ntypedef unsigned int uint32_t;\n";
  s += kPwOpcodeSource;
  s += "\nstruct KilnPwArgs { const void* in[" + std::to_string(ir::kMaxPwInputs) + "]; void* y; unsigned total; unsigned period[" +
       std::to_string(ir::kMaxPwInputs) + "]; };\n";
  s += "struct alignas(16) KilnU4 { unsigned w[4]; };\n";
  s += storage_helpers(t);
  // The program: one function of the inputs, straight-line.
  s += "__device__ __forceinline__ float kiln_program(";
  for (int k = 0; k < p.num_inputs; ++k) s += std::string(k ? ", " : "") + "float x" + std::to_string(k);
  if (p.num_inputs == 0) s += "void";
  s += ") {\n";
  for (int j = 0; j < p.num_instrs; ++j) {
    const PwDeviceInstr& in = p.instrs[j];
    std::string args;
    for (int q = 0; q < ir::kMaxPwArgs; ++q) {
      const int32_t src = in.src[q];
      if (q) args += ", ";
      if (src == kPwImmediate) {
        args += float_bits(in.imm[q]);
      } else {
        args += src >= 0 ? 'r' : 'x';
        args += std::to_string(src >= 0 ? src : -1 - src);
      }
    }
    std::string r(1, 'r');
    r += std::to_string(j);
    s += "  float " + r + " = kiln::ir::pw_apply(static_cast<kiln::ir::PwOpcode>(" + std::to_string(in.op) + "), " + args +
         ");\n  asm(\"\" : \"+f\"(" + r + "));\n";
  }
  s += "  return r" + std::to_string(p.num_instrs - 1) + ";\n}\n";
  // The kernel: 16-byte groups by grid stride, then the tail element by element.
  auto call = [&](bool vec) {
    std::string c = "kiln_program(";
    for (int k = 0; k < p.num_inputs; ++k) {
      const std::string ks = std::to_string(k);
      std::string x;
      if (mode[k] == PwJitInput::kScalar) x = "s" + ks;
      else if (vec) x = "kiln_el(u" + ks + ", j)";
      else if (mode[k] == PwJitInput::kFull) x = "kiln_ld(a.in[" + ks + "], i)";
      else x = "kiln_ld(a.in[" + ks + "], i % a.period[" + ks + "])";
      c += (k ? ", " : "") + x;
    }
    return c + ")";
  };
  const std::string vs = std::to_string(v);
  s += "extern \"C\" __global__ void __launch_bounds__(256) kiln_pw(const KilnPwArgs a) {\n";
  s += "  const unsigned groups = a.total / " + vs + ";\n";
  s += "  const unsigned stride = gridDim.x * blockDim.x;\n";
  s += "  const unsigned first = blockIdx.x * blockDim.x + threadIdx.x;\n";
  for (int k = 0; k < p.num_inputs; ++k)
    if (mode[k] == PwJitInput::kScalar)
      s += "  const float s" + std::to_string(k) + " = kiln_ld(a.in[" + std::to_string(k) + "], 0);\n";
  s += "  for (unsigned g = first; g < groups; g += stride) {\n";
  for (int k = 0; k < p.num_inputs; ++k) {
    const std::string ks = std::to_string(k);
    if (mode[k] == PwJitInput::kFull)
      s += "    const KilnU4 u" + ks + " = ((const KilnU4*)a.in[" + ks + "])[g];\n";
    else if (mode[k] == PwJitInput::kPeriodic)
      s += "    const KilnU4 u" + ks + " = ((const KilnU4*)a.in[" + ks + "])[(g * " + vs + "u) % a.period[" + ks + "] / " + vs +
           "u];\n";
  }
  s += "    KilnU4 o;\n#pragma unroll\n    for (int j = 0; j < " + vs + "; ++j) kiln_set(o, j, " + call(true) + ");\n";
  s += "    ((KilnU4*)a.y)[g] = o;\n  }\n";
  s += "  for (unsigned i = groups * " + vs + "u + first; i < a.total; i += stride) kiln_st(a.y, i, " + call(false) + ");\n}\n";
  return s;
}

bool nvrtc_available(std::string* why) {
  const Nvrtc& n = nvrtc();
  if (why) *why = n.why;
  return n.why.empty();
}

StatusOr<std::string> nvrtc_compile_cubin(const std::string& source, int arch, std::string* ptx) {
  const Nvrtc& n = nvrtc();
  if (!n.why.empty()) return unsupported(n.why);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.create(&prog, source.c_str(), "kiln_pw.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return internal_error(std::string("nvrtcCreateProgram: ") + n.error(r));
  const std::string arch_opt = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17"};
  r = n.compile(prog, 2, opts);
  std::string log;
  size_t log_bytes = 0;
  if (n.log_size(prog, &log_bytes) == NVRTC_SUCCESS && log_bytes > 1) {
    log.resize(log_bytes);
    n.log(prog, log.data());
    log.resize(log_bytes - 1);
  }
  if (r != NVRTC_SUCCESS) {
    n.destroy(&prog);
    if (log.size() > 4000) log.resize(4000);
    return internal_error(std::string("NVRTC could not compile a FusedPointwise kernel for sm_") + std::to_string(arch) +
                          " (" + n.error(r) + "): " + log);
  }
  size_t bytes = 0;
  std::string cubin;
  if (n.cubin_size(prog, &bytes) == NVRTC_SUCCESS && bytes > 0) {
    cubin.resize(bytes);
    if (n.cubin(prog, cubin.data()) != NVRTC_SUCCESS) cubin.clear();
  }
  if (ptx) {
    ptx->clear();
    size_t pb = 0;
    if (n.ptx_size(prog, &pb) == NVRTC_SUCCESS && pb > 1) {
      ptx->resize(pb);
      if (n.ptx(prog, ptx->data()) == NVRTC_SUCCESS) ptx->resize(pb - 1);
      else ptx->clear();
    }
  }
  n.destroy(&prog);
  if (cubin.empty()) return internal_error("NVRTC compiled the FusedPointwise kernel but returned no cubin");
  return cubin;
}

PwJitKernel::~PwJitKernel() {
  if (lib_) cudaLibraryUnload(lib_);
}

cudaError_t PwJitKernel::launch(const PwJitArgs& a, StorageType t, cudaStream_t stream) const {
  const int v = vec_of(t);
  const unsigned grid = blocks_for_sms(std::max<int64_t>(a.total / v, 1), 256);
  void* params[] = {const_cast<PwJitArgs*>(&a)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(kernel_), dim3(grid), dim3(256), params, 0, stream);
}

StatusOr<std::shared_ptr<const PwJitKernel>> pw_jit_kernel(const std::string& key, const std::string& source,
                                                          const std::string* cubin, int arch) {
  JitCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.kernels.find(key);
  if (it != c.kernels.end())
    if (auto k = it->second.lock()) return k;
  std::string bytes;
  if (cubin) {
    bytes = *cubin;
  } else if (auto hit = c.cubins.find(key); hit != c.cubins.end()) {
    bytes = hit->second;
  } else {
    KILN_ASSIGN_OR_RETURN(bytes, nvrtc_compile_cubin(source, arch));
    c.cubins[key] = bytes;
  }
  std::shared_ptr<PwJitKernel> k(new PwJitKernel);
  k->cubin_ = std::move(bytes);
  cudaError_t e = cudaLibraryLoadData(&k->lib_, k->cubin_.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e != cudaSuccess) {
    cudaGetLastError();
    k->lib_ = nullptr;
    return internal_error(std::string("cudaLibraryLoadData refused a generated FusedPointwise kernel: ") +
                          cudaGetErrorString(e));
  }
  e = cudaLibraryGetKernel(&k->kernel_, k->lib_, "kiln_pw");
  if (e != cudaSuccess) {
    cudaGetLastError();
    return internal_error(std::string("cudaLibraryGetKernel(kiln_pw): ") + cudaGetErrorString(e));
  }
  c.kernels[key] = k;
  return std::shared_ptr<const PwJitKernel>(std::move(k));
}

std::string pw_jit_key(const std::string& source, int arch) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64 (Fowler, Noll, Vo)
  for (unsigned char ch : source) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return "kiln.pw_jit sm_" + std::to_string(arch) + " " + hex;
}

int current_arch() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

}  // namespace kiln::cuda
