// core/parallel.h, core/transpose.h and core/host_memory.h: parallel_for covers every index exactly
// once whatever the thread count; transpose_to_float32 moves every element (F32 / F16 / BF16,
// scaled, tile edges included) and refuses other dtypes; large tensors (their own huge-page
// mappings) are zero-filled, 64-byte aligned, writable, and freed.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/host_memory.h"
#include "core/numerics.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "core/transpose.h"

namespace kiln {
namespace {

TEST(ParallelFor, EveryIndexOnceForSmallAndLargeWork) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
    for (int64_t work : {int64_t{1}, n << 20}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      parallel_for(n, work, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LE(b, e);
        ASSERT_LE(e, n);
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "n " << n << " i " << i;
    }
  }
  int calls = 0;
  parallel_for(0, 1 << 30, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(Transpose, EveryElementOfEveryDtype) {
  // 130 x 67: partial tiles on both axes; 300 x 1000: enough work for several threads.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{130, 67}, {300, 1000}}) {
    std::vector<float> f(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(static_cast<int64_t>(i % 2001) - 1000) / 8.f;
    std::vector<uint16_t> h(f.size()), b(f.size());
    for (size_t i = 0; i < f.size(); ++i) {
      h[i] = float_to_fp16(f[i]);
      b[i] = float_to_bf16(f[i]);
    }
    const std::pair<DataType, const void*> srcs[] = {
        {DataType::kFloat32, f.data()}, {DataType::kFloat16, h.data()}, {DataType::kBFloat16, b.data()}};
    for (const auto& [dt, src] : srcs) {
      std::vector<float> out(f.size(), -1.f);
      ASSERT_TRUE(transpose_to_float32(src, dt, rows, cols, 2.f, out.data()));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const size_t i = static_cast<size_t>(r * cols + c);  // the element as stored, decoded exactly
          const float x = dt == DataType::kFloat16 ? fp16_to_float(h[i]) : dt == DataType::kBFloat16 ? bf16_to_float(b[i]) : f[i];
          ASSERT_EQ(out[static_cast<size_t>(c * rows + r)], 2.f * x) << dtype_name(dt) << " " << r << "," << c;
        }
    }
  }
  std::vector<double> d(4, 1.0);
  std::vector<float> out(4, -1.f);
  EXPECT_FALSE(transpose_to_float32(d.data(), DataType::kFloat64, 2, 2, 1.f, out.data()));
  EXPECT_EQ(out[0], -1.f);  // nothing written
}

TEST(HostMemory, LargeTensorsAreZeroedAlignedAndWritable) {
  const int64_t n = (kHugeAllocationBytes / 4) * 3 + 5;  // ~12 MiB of floats: its own mapping
  for (int round = 0; round < 2; ++round) {  // a second one after the first is freed is zero too
    Tensor t(DataType::kFloat32, {n});
    ASSERT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
    const float* f = t.data<float>();
    for (int64_t i = 0; i < n; i += 4093) ASSERT_EQ(f[i], 0.f) << i;
    ASSERT_EQ(f[n - 1], 0.f);
    std::fill(t.data<float>(), t.data<float>() + n, 1.5f);
    EXPECT_EQ(std::accumulate(f, f + n, 0.0), 1.5 * static_cast<double>(n));
  }
  EXPECT_EQ(huge_mapping_bytes(1), kHugePageBytes);
  EXPECT_EQ(huge_mapping_bytes(kHugePageBytes), kHugePageBytes);
  EXPECT_EQ(huge_mapping_bytes(kHugePageBytes + 1), 2 * kHugePageBytes);
  void* p = map_huge(3 * kHugePageBytes + 1);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
  static_cast<char*>(p)[3 * kHugePageBytes] = 1;  // the last byte's page is mapped
  EXPECT_EQ(::munmap(p, huge_mapping_bytes(3 * kHugePageBytes + 1)), 0);
}

}  // namespace
}  // namespace kiln
