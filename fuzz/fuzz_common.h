// Shared by the libFuzzer harnesses: limits that keep one input cheap and inside libFuzzer's
// memory limit, and a run of an engine on small random inputs.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>

#include "core/checked_size.h"
#include "core/numerics.h"
#include "fuzz/run_budget.h"
#include "kiln/runtime.h"
#include "runtime/engine_impl.h"

namespace kiln::fuzz {

// Under libFuzzer's default -rss_limit_mb=2048 (and its malloc limit): tensors past 256 MiB are
// OutOfMemory errors, not fuzzer "crashes".
constexpr int64_t kAllocationLimitBytes = int64_t{256} << 20;
inline void set_limits() {
  static const bool once = [] {
    set_allocation_limit_bytes(kAllocationLimitBytes);
    return true;
  }();
  (void)once;
}

// Runs `engine` once on seeded random inputs at its first profile's min shapes, when every input
// is small and the run fits the harness's work budget (fuzz/run_budget.h): the point is the
// kernels' checks, not their speed. When shape inference refuses the graph (the kernels will
// likely refuse it too) or leaves sizes unknown (data-dependent ops), it still runs, with single
// allocations capped at the budget's largest value. Errors are fine; crashes are not.
inline void run_small(const Engine& engine) {
  if (engine.profiles().empty()) return;
  std::map<std::string, Shape> shapes;
  for (const IOTensor& io : engine.io_tensors()) {
    if (!io.is_input) continue;
    const ShapeRange* r = engine.profiles()[0].find(io.desc.name);
    if (!r) return;
    if (shape_numel(r->min) > 4096) return;
    shapes[io.desc.name] = r->min;
  }
  const RunBudget budget = check_run_budget(engine_impl(engine).graph, shapes);
  if (budget == RunBudget::kOver) return;
  struct LimitScope {  // the tighter allocation cap for this run only
    explicit LimitScope(bool on) : on(on) {
      if (on) set_allocation_limit_bytes(static_cast<int64_t>(kMaxRunValueElements) * 8);
    }
    ~LimitScope() {
      if (on) set_allocation_limit_bytes(kAllocationLimitBytes);
    }
    bool on;
  } limit(budget == RunBudget::kCapped);
  auto ctx = engine.create_execution_context();
  std::mt19937 rng(7);
  for (const IOTensor& io : engine.io_tensors()) {
    if (!io.is_input) continue;
    const ShapeRange* r = engine.profiles()[0].find(io.desc.name);
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
