// Helpers of the quantization plan tests (quantize_test.cc, qdq_propagation_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/runtime.h"

namespace kiln::testing {

// Builds the model at `path` for the CPU with `c` — input "x" from `min` to `max` (empty: x's
// shape), tuned at x's shape — runs it on x and returns output "y"; appends the plan's layer ops
// to *ops when given. Failures are test failures (and an undefined Tensor).
inline Tensor run_cpu_plan(const std::string& path, BuilderConfig c, const Tensor& x,
                           std::vector<std::string>* ops = nullptr, Shape min = {}, Shape max = {}) {
  c.target = TargetDevice::kCpu;
  OptimizationProfile p;
  EXPECT_TRUE(p.set_dimensions("x", min.empty() ? x.shape() : min, x.shape(), max.empty() ? x.shape() : max).ok());
  c.profiles = {p};
  auto plan = Builder::build(path, c);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  if (!plan.ok()) return {};
  auto e = Runtime::deserialize_engine(*plan);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  if (!e.ok()) return {};
  if (ops)
    for (const LayerInfo& l : (*e)->layers()) ops->push_back(l.op);
  auto ctx = (*e)->create_execution_context();
  EXPECT_TRUE(ctx->set_input("x", x).ok());
  EXPECT_TRUE(ctx->execute().ok());
  auto y = ctx->output("y");
  EXPECT_TRUE(y.ok());
  return y.ok() ? *y : Tensor();
}

// QuantLinear layers against the unfused Q/DQ graph (docs/decisions/0055): the first layer's
// output differs by float summation order only; where that moves a value of the next layer's input
// across a rounding boundary of its quantization, that element moves by one quantization step.
// So: max |got - ref| < 2e-2 * max_ref, and at most a tenth of the elements differ by more than
// 1e-5 * max_ref.
inline void expect_within_one_quantization_step(const Tensor& got, const Tensor& ref, double max_ref) {
  ASSERT_EQ(got.shape(), ref.shape());
  int64_t off = 0;
  double max_err = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double d = std::fabs(got.data<float>()[i] - ref.data<float>()[i]);
    max_err = std::max(max_err, d);
    off += d > 1e-5 * max_ref;
  }
  EXPECT_LT(max_err, 2e-2 * max_ref) << max_err << " of " << max_ref;
  EXPECT_LE(off, ref.numel() / 10) << off << " of " << ref.numel();
}

}  // namespace kiln::testing
