// transpose_to_float32 (see transpose.h).
#include "core/transpose.h"

#include <algorithm>
#include <cstring>

#include "core/numerics.h"
#include "core/parallel.h"

namespace kiln {

bool transpose_to_float32(const void* src, DataType from, int64_t rows, int64_t cols, float scale, float* dst) {
  if (from != DataType::kFloat32 && from != DataType::kFloat16 && from != DataType::kBFloat16) return false;
  // Tiles of 64 x 64 keep both sides in cache; the output's tile rows are split over threads.
  constexpr int64_t kBlock = 64;
  const int64_t col_blocks = (cols + kBlock - 1) / kBlock;
  parallel_for(col_blocks, rows * cols, [&](int64_t jb0, int64_t jb1) {
    float tile[kBlock];
    for (int64_t j0 = jb0 * kBlock; j0 < std::min(cols, jb1 * kBlock); j0 += kBlock)
      for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
        for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i) {
          const int64_t w = std::min(cols, j0 + kBlock) - j0;
          if (from == DataType::kFloat16)
            fp16_to_float_n(static_cast<const uint16_t*>(src) + i * cols + j0, tile, w);
          else if (from == DataType::kBFloat16)
            bf16_to_float_n(static_cast<const uint16_t*>(src) + i * cols + j0, tile, w);
          else
            std::memcpy(tile, static_cast<const float*>(src) + i * cols + j0, static_cast<size_t>(w) * sizeof(float));
          for (int64_t j = 0; j < w; ++j) dst[(j0 + j) * rows + i] = tile[j] * scale;
        }
  });
  return true;
}

}  // namespace kiln
