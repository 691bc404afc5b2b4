// FusedPointwise programs compiled to their own kernels (docs/decisions/0091): the program's
// instructions become straight-line CUDA C (each one ir::pw_apply with a constant opcode, the
// formula the interpreter and the CPU reference run), NVRTC compiles it at build time for the
// GPU's architecture, the plan stores the cubin as tactic data, and a load runs it through
// cudaLibraryLoadData without NVRTC.
//
// Why: the interpreter (launch_fused_pointwise) inlines ir::pw_apply's whole switch once per
// element of a 16-byte vector; its code is far larger than the instruction cache, so a launch
// pays about 20 us of instruction fetches whatever its size (a decode step's SiLU * mul over
// 14,336 values took 18 us on the H200). A generated kernel is a few hundred instructions.
//
// NVRTC (libnvrtc.so.13, the CUDA toolkit's runtime compiler) is loaded with dlopen when first
// asked for, so a machine without it still runs the interpreter and plans that carry cubins.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/cuda/kernels.h"
#include "kiln/status.h"

namespace kiln::cuda {

// How a generated kernel reads one input (from the program's strides on the output's dims):
// kFull, the output's own dense shape (element i); kPeriodic, element i mod its period (a row
// table, a channel vector: broadcast_period); kScalar, one element.
enum class PwJitInput : uint8_t { kFull, kPeriodic, kScalar };

// The kernel's only parameter; the generated source declares the same struct.
struct PwJitArgs {
  const void* in[ir::kMaxPwInputs] = {};
  void* y = nullptr;
  uint32_t total = 0;                         // output elements (< 2^31)
  uint32_t period[ir::kMaxPwInputs] = {};     // kPeriodic inputs: their period (elements)
};

// What a program's layer needs to run generated code: each input's mode and period. ok = false
// (with `why`) when the program's inputs are not all full, periodic with a period that is a
// multiple of the 16-byte vector (4 fp32 / 8 fp16 or bf16 values) or scalar, when the storage is
// not a float type, or when the output has 2^31 elements or more; the interpreter runs those.
struct PwJitShape {
  bool ok = false;
  std::string why;
  std::array<PwJitInput, ir::kMaxPwInputs> mode{};
  uint32_t period[ir::kMaxPwInputs] = {};
  uint32_t total = 0;
};
PwJitShape pw_jit_shape(const PwDeviceProgram& p, StorageType t);

// The CUDA C source of the kernel `kiln_pw` for program `p` in storage `t` with input modes
// `mode` (no #include: the opcode formulas are ir/pointwise_opcode.h's text, embedded at build).
// Each instruction's result passes an empty asm statement, so no multiply-add is contracted
// across instructions: the values are the interpreter's.
std::string pw_jit_source(const PwDeviceProgram& p, StorageType t, const std::array<PwJitInput, ir::kMaxPwInputs>& mode);

// Whether NVRTC could be loaded (the first call tries libnvrtc.so.13, .so.12, .so and the CUDA
// toolkit's library directory known at build); `why` says what failed.
bool nvrtc_available(std::string* why = nullptr);

// `source` compiled by NVRTC to a cubin for sm_<arch> (e.g. 90): its bytes (and, with `ptx`, the
// PTX NVRTC went through). Errors: NVRTC not available (Unsupported), or the compiler's log
// (Internal).
StatusOr<std::string> nvrtc_compile_cubin(const std::string& source, int arch, std::string* ptx = nullptr);

// A loaded generated kernel (cudaLibraryLoadData; unloaded when the last layer using it goes).
class PwJitKernel {
 public:
  ~PwJitKernel();
  PwJitKernel(const PwJitKernel&) = delete;
  PwJitKernel& operator=(const PwJitKernel&) = delete;
  const std::string& cubin() const { return cubin_; }
  // Vector groups of 16 bytes over grid-stride blocks of 256 threads (the interpreter's grid).
  cudaError_t launch(const PwJitArgs& a, StorageType t, cudaStream_t stream) const;

 private:
  friend StatusOr<std::shared_ptr<const PwJitKernel>> pw_jit_kernel(const std::string&, const std::string&,
                                                                    const std::string*, int);
  PwJitKernel() = default;
  std::string cubin_;
  cudaLibrary_t lib_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

// The kernel of `source` for sm_<arch>, shared by every layer of the process that asks for the
// same key: loaded from `cubin` when given (a plan's tactic data), else compiled by NVRTC (once
// per key and process). Errors: NVRTC unavailable or failing, a cubin the driver refuses.
StatusOr<std::shared_ptr<const PwJitKernel>> pw_jit_kernel(const std::string& key, const std::string& source,
                                                          const std::string* cubin, int arch);

// The tactic-data key of a generated kernel: "kiln.pw_jit sm_<arch> <FNV-1a 64 of the source, hex>".
std::string pw_jit_key(const std::string& source, int arch);

// The current device's architecture as major * 10 + minor (90 on an H100), 0 when none.
int current_arch();

}  // namespace kiln::cuda
