// Shared by the libFuzzer harnesses: limits that keep one input cheap and inside libFuzzer's
// memory limit, and a run of an engine on small random inputs.
#pragma once

#include <cstdint>
#include <random>

#include "core/checked_size.h"
#include "core/numerics.h"
#include "kiln/runtime.h"

namespace kiln::fuzz {

// Under libFuzzer's default -rss_limit_mb=2048 (and its malloc limit): tensors past 256 MiB are
// OutOfMemory errors, not fuzzer "crashes".
inline void set_limits() {
  static const bool once = [] {
    set_allocation_limit_bytes(int64_t{256} << 20);
    return true;
  }();
  (void)once;
}

// Runs `engine` once on seeded random inputs at its first profile's min shapes, when every input
// is small (the point is the kernels' checks, not their speed). Errors are fine; crashes are not.
inline void run_small(const Engine& engine) {
  if (engine.profiles().empty()) return;
  auto ctx = engine.create_execution_context();
  std::mt19937 rng(7);
  for (const IOTensor& io : engine.io_tensors()) {
    if (!io.is_input) continue;
    const ShapeRange* r = engine.profiles()[0].find(io.desc.name);
    if (!r) return;
    if (shape_numel(r->min) > 4096) return;
    DataType dt = io.desc.dtype == DataType::kUndefined ? DataType::kFloat32 : io.desc.dtype;
    if (dt == DataType::kString) return;
    auto t = Tensor::allocate(dt, r->min, "fuzz input");
    if (!t.ok()) return;
    for (int64_t i = 0; i < t->numel(); ++i) {
      if (dtype_is_float(dt)) store_from_double(dt, t->raw(), i, static_cast<double>(rng() % 200) / 50.0 - 2.0);
      else store_from_int64(dt, t->raw(), i, static_cast<int64_t>(rng() % 4));
    }
    if (!ctx->set_input(io.desc.name, *t).ok()) return;
  }
  (void)ctx->execute();
}

}  // namespace kiln::fuzz
