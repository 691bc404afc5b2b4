// Shared by the GPU tests: REQUIRE_GPU() skips a test cleanly where there is no CUDA device or
// Kiln was built without the CUDA backend; REQUIRE_CUDA_BUILD() only where Kiln was built without
// it (tests of the lowering without a device: cuda::check_gpu_support and dry runs).
#pragma once

#include <gtest/gtest.h>

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/device.h"
#define REQUIRE_GPU() \
  if (!::kiln::cuda::device_info().available) GTEST_SKIP() << "no CUDA device"
#else
#define REQUIRE_GPU() GTEST_SKIP() << "built without CUDA"
#endif

#ifdef KILN_HAVE_CUDA
#define REQUIRE_CUDA_BUILD()
#else
#define REQUIRE_CUDA_BUILD() GTEST_SKIP() << "built without CUDA"
#endif
