// Emulator shim: enough of the CUDA runtime API for kernels_sampling.cu on the host.
#pragma once
#include "emu.h"
