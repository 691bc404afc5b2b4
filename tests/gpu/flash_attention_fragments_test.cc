// The fused attention kernel's fragment addressing (kernels_flash_attention.h) replayed on the host
// against the documented lane layouts of the two instructions it uses (PTX ISA: "ldmatrix" —
// lane L of an .x4 receives, of matrix i, row L / 4, columns 2 (L % 4) and +1, or with .trans row
// 2 (L % 4) and +1 of column L / 4 —, and "Matrix fragments for mma.m16n8k16 with floating point
// type": A (16 x 16) a0..a3 = (g, 2t), (g + 8, 2t), (g, 2t + 8), (g + 8, 2t + 8); B (16 x 8)
// b0, b1 = rows (2t, 2t + 8) of column g; C (16 x 8) c0, c1 = (g, 2t), (g, 2t + 1), c2, c3 the same
// in row g + 8; g = L / 4, t = L % 4, each register two consecutive elements). One warp's
// S = Q Kᵀ and O = P V over one 64-key tile, wired as the kernel wires them, must equal the
// products computed directly. No GPU needed (CUDA builds).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#ifdef KILN_HAVE_CUDA
#include "backends/cuda/kernels_flash_attention.h"
#endif

namespace kiln::testing {
namespace {

#ifdef KILN_HAVE_CUDA
using cuda::FlashTileRowCol;

using Reg = std::array<float, 2>;           // one 32-bit register: two 16-bit elements (low first)
using Lanes4 = std::array<std::array<Reg, 4>, 32>;  // 4 registers per lane
using Acc = std::array<std::array<float, 4>, 32>;   // a C fragment per lane

struct Tile {
  int rows, cols;
  std::vector<float> v;
  float at(int r, int c) const { return v[static_cast<size_t>(r) * cols + c]; }
};

Tile random_tile(int rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);  // small integers: every product and sum is exact
  Tile t{rows, cols, std::vector<float>(static_cast<size_t>(rows) * cols)};
  for (float& x : t.v) x = static_cast<float>(d(rng));
  return t;
}

// ldmatrix.x4 (optionally .trans) with lane L addressing row L % 8 of matrix L / 8 at addr(L).
Lanes4 ldmatrix_x4(const Tile& tile, const std::function<FlashTileRowCol(int)>& addr, bool trans) {
  Lanes4 out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i)
      for (int e = 0; e < 2; ++e) {
        const int r = trans ? 2 * (lane % 4) + e : lane / 4;  // row / column within matrix i
        const int c = trans ? lane / 4 : 2 * (lane % 4) + e;
        const FlashTileRowCol a = addr(8 * i + r);
        out[lane][i][e] = tile.at(a.row, a.col + c);
      }
  return out;
}

// c += A B for one m16n8k16 with A from registers a[lane][0..3], B from b0[lane], b1[lane].
void mma(Acc& c, const std::array<std::array<Reg, 4>, 32>& a, const std::array<Reg, 32>& b0,
         const std::array<Reg, 32>& b1) {
  auto A = [&](int r, int k) { return a[(r % 8) * 4 + (k % 8) / 2][(r / 8) + 2 * (k / 8)][k % 2]; };
  auto B = [&](int k, int n) { return (k < 8 ? b0 : b1)[n * 4 + (k % 8) / 2][k % 2]; };
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 8; ++n) {
      float s = 0;
      for (int k = 0; k < 16; ++k) s += A(r, k) * B(k, n);
      c[(r % 8) * 4 + n / 2][(r / 8) * 2 + n % 2] += s;
    }
}

// Element (r, n) of a C fragment.
float c_at(const Acc& c, int r, int n) { return c[(r % 8) * 4 + n / 2][(r / 8) * 2 + n % 2]; }

std::array<Reg, 32> reg(const Lanes4& l, int i) {
  std::array<Reg, 32> r{};
  for (int lane = 0; lane < 32; ++lane) r[lane] = l[lane][i];
  return r;
}

void check_one_warp(int d, int warp) {
  const Tile q = random_tile(128, d, 1), k = random_tile(64, d, 2), v = random_tile(64, d, 3);  // Q: 8 warps' rows
  // Q fragments, then S = Q Kᵀ over 8 n-blocks of 8 keys.
  std::vector<Lanes4> qf(d / 16);
  for (int kk = 0; kk < d / 16; ++kk)
    qf[kk] = ldmatrix_x4(q, [&](int l) { return cuda::flash_q_fragment_row(l, warp, kk); }, false);
  std::vector<Acc> s(8, Acc{});
  for (int kk = 0; kk < d / 16; ++kk)
    for (int np = 0; np < 4; ++np) {
      const Lanes4 bf = ldmatrix_x4(k, [&](int l) { return cuda::flash_k_fragment_row(l, np, kk); }, false);
      mma(s[2 * np], qf[kk], reg(bf, 0), reg(bf, 1));
      mma(s[2 * np + 1], qf[kk], reg(bf, 2), reg(bf, 3));
    }
  for (int r = 0; r < 16; ++r)
    for (int j = 0; j < 64; ++j) {
      float want = 0;
      for (int e = 0; e < d; ++e) want += q.at(warp * 16 + r, e) * k.at(j, e);
      ASSERT_EQ(c_at(s[j / 8], r, j % 8), want) << "S row " << r << " key " << j << " (d " << d << ", warp " << warp << ")";
    }
  // P (here S itself) from the S accumulators into A fragments, as the kernel packs them:
  // pf[n / 2][(n % 2) * 2] = row g's pair of n-block n, pf[n / 2][(n % 2) * 2 + 1] = row g + 8's.
  std::vector<Lanes4> pf(4);
  for (int n = 0; n < 8; ++n)
    for (int lane = 0; lane < 32; ++lane) {
      pf[n / 2][lane][(n % 2) * 2 + 0] = {s[n][lane][0], s[n][lane][1]};
      pf[n / 2][lane][(n % 2) * 2 + 1] = {s[n][lane][2], s[n][lane][3]};
    }
  std::vector<Acc> o(d / 8, Acc{});
  for (int ks = 0; ks < 4; ++ks)
    for (int np = 0; np < d / 16; ++np) {
      const Lanes4 bf = ldmatrix_x4(v, [&](int l) { return cuda::flash_v_fragment_row(l, ks, np); }, true);
      mma(o[2 * np], pf[ks], reg(bf, 0), reg(bf, 1));
      mma(o[2 * np + 1], pf[ks], reg(bf, 2), reg(bf, 3));
    }
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < d; ++c) {
      double want = 0;
      for (int j = 0; j < 64; ++j) want += static_cast<double>(c_at(s[j / 8], r, j % 8)) * v.at(j, c);
      ASSERT_EQ(c_at(o[c / 8], r, c % 8), static_cast<float>(want)) << "O row " << r << " col " << c << " (d " << d << ")";
    }
}
#endif

TEST(FlashAttentionFragments, OneWarpsProductsMatchTheDirectOnes) {
#ifndef KILN_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  for (int d : {64, 128})
    for (int warp : {0, 3, 7}) check_one_warp(d, warp);  // blocks of 4 and 8 warps
#endif
}

}  // namespace
}  // namespace kiln::testing
