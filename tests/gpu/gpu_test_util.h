// Shared by the GPU tests: REQUIRE_GPU() skips a test cleanly where there is no CUDA device or
// Kiln was built without the CUDA backend.
#pragma once

#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#define REQUIRE_GPU() \
  if (!::kiln::cuda::device_info().available) GTEST_SKIP() << "no CUDA device"
#else
#define REQUIRE_GPU() GTEST_SKIP() << "built without CUDA"
#endif
