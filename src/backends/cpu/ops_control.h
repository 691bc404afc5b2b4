// Internal to the control family (If/Loop/Scan, RNNs, signal and vision ops): the per-file
// registration functions that register_control_kernels calls, and helpers they share.
#pragma once

#include <vector>

#include "backends/cpu/cpu_kernel.h"

namespace kiln::cpu {

void register_control_flow_kernels(KernelRegistry& r);    // ops_control_flow.cc: If, Loop, Scan
void register_control_rnn_kernels(KernelRegistry& r);     // ops_control_rnn.cc: RNN, GRU, LSTM
void register_control_signal_kernels(KernelRegistry& r);  // ops_control_signal.cc: windows, DFT, STFT, MelWeightMatrix
void register_control_vision_kernels(KernelRegistry& r);  // ops_control_vision.cc: NMS, GridSample, RoiAlign, MaxRoiPool

// Every element of `t` as double (any numeric dtype or bool).
std::vector<double> control_doubles(const Tensor& t);
// A tensor of dtype `dt` and `shape` holding `v` (converted with Cast semantics).
Tensor control_tensor_from(DataType dt, const Shape& shape, const std::vector<double>& v);

}  // namespace kiln::cpu
