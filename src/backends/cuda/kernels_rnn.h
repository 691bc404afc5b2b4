// Kiln's kernel for the recurrent layers ONNX RNN, GRU and LSTM (Operators.md "RNN" / "GRU" /
// "LSTM", versions 7 and 14), written as the CPU reference computes them
// (src/backends/cpu/ops_control_rnn.cc: the same gate equations, activation list, clip, GRU's
// linear_before_reset, LSTM's peepholes and input_forget, sequence_lens, layout 0 / 1), in
// float32 where the reference uses double. One thread block per (direction, batch entry) walks
// that sequence's time steps; the block's threads share the gate rows of a step (Wx + Wb and
// Rh + Rb, one dot product per thread and row) and the state lives in shared memory. Fine for
// the small recurrent layers of ONNX test and speech graphs; not tuned (no GEMM batching across
// the batch or the time steps). Every launcher enqueues on `stream`, never allocates and never
// synchronizes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/kernels.h"

namespace kiln::cuda {

// One activation of the spec's list with its alpha / beta (defaults resolved on the host).
struct RnnActivation {
  enum Kind : int { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                    kSoftsign, kSoftplus };
  Kind kind = kTanh;
  float alpha = 0, beta = 0;
};

enum class RnnCell : int { kRnn, kGru, kLstm };

// A recurrent layer at concrete shapes. Tensors (row-major): X [seq, batch, input] (layout 1:
// [batch, seq, input]); W [dirs, G*H, input], R [dirs, G*H, H], B [dirs, 2*G*H] (Wb then Rb),
// P [dirs, 3*H] (LSTM peepholes i, o, f), initial_h / initial_c / Y_h / Y_c [dirs, batch, H]
// (layout 1: [batch, dirs, H]), Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]),
// sequence_lens [batch] int64. G = 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c).
struct RnnDesc {
  RnnCell cell = RnnCell::kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1;
  bool batch_major = false;   // layout 1
  bool reverse_only = false;  // direction "reverse" (direction 0 runs backwards)
  bool has_clip = false;
  float clip = 0;
  bool linear_before_reset = false;  // GRU
  bool input_forget = false;         // LSTM
  RnnActivation acts[6];  // per direction: f (RNN), f g (GRU), f g h (LSTM)
  int acts_per_dir = 1;
};

// The dynamic shared memory a block uses (floats: xw and hr [G*H], h, c, hn, rh [H]).
inline size_t rnn_shared_bytes(const RnnDesc& d) {
  return static_cast<size_t>(2 * d.gates * d.hidden + 4 * d.hidden) * sizeof(float);
}
// The most dynamic shared memory launch_rnn asks for (it opts in above 48 KiB; sm_90 has 227 KiB).
inline constexpr size_t kRnnMaxSharedBytes = 200 * 1024;

// Runs the layer. x, w, r float32; b, p, h0, c0 float32 or null (zeros); lens int64 or null (every
// sequence is `seq` long; run-time lengths outside [0, seq] are clamped into it, constant ones
// are refused by the factory); y, yh,
// yc in storage `t` or null (not wanted). Steps past a sequence's length leave zeros in Y (it is
// cleared first). Errors: shared memory above kRnnMaxSharedBytes (cudaErrorInvalidValue),
// launch errors.
cudaError_t launch_rnn(const RnnDesc& d, const float* x, const float* w, const float* r, const float* b, const int64_t* lens,
                       const float* h0, const float* c0, const float* p, void* y, void* yh, void* yc, StorageType t,
                       cudaStream_t stream);

}  // namespace kiln::cuda
