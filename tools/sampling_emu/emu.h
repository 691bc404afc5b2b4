// A tiny single-OS-thread CUDA emulator: every block's threads are ucontext fibers run round-robin;
// __syncthreads and warp collectives are fiber barriers; blocks run one after another.
#pragma once
#include <ucontext.h>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(x)
#define __shared__ static

typedef int cudaError_t;
typedef void* cudaStream_t;
constexpr int cudaSuccess = 0, cudaErrorInvalidValue = 1;
inline cudaError_t cudaGetLastError() { return 0; }

namespace emu {
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
inline Dim3 block_idx;
inline int cur = 0, nthr = 0;
inline std::vector<ucontext_t> ctx;
inline std::vector<char> stacks;
inline std::vector<char> alive;
inline ucontext_t main_ctx;
inline const std::function<void()>* fn = nullptr;
inline bool progress = false;
constexpr size_t kStack = 256 * 1024;
inline void yield() { swapcontext(&ctx[cur], &main_ctx); }
struct Bar { int n = 0, count = 0; unsigned gen = 0; };
inline void wait(Bar& b) {
  progress = true;
  const unsigned g = b.gen;
  if (++b.count == b.n) {
    b.count = 0;
    ++b.gen;
  } else {
    while (b.gen == g) yield();
  }
}
inline Bar block_bar;
inline Bar warp_bar[32];
inline uint64_t xbuf[1024];
inline void trampoline() {
  (*fn)();
  alive[cur] = 0;
  progress = true;
  swapcontext(&ctx[cur], &main_ctx);
}
inline Dim3 tid() { Dim3 d; d.x = static_cast<unsigned>(cur); return d; }
inline void launch(int64_t grid, int block, const std::function<void()>& f) {
  nthr = block;
  if (ctx.size() < static_cast<size_t>(block)) {
    ctx.resize(block);
    stacks.resize(static_cast<size_t>(block) * kStack);
  }
  alive.assign(block, 0);
  fn = &f;
  for (int64_t b = 0; b < grid; ++b) {
    block_idx.x = static_cast<unsigned>(b);
    block_bar = Bar{block, 0, 0};
    for (int w = 0; w < block / 32; ++w) warp_bar[w] = Bar{32, 0, 0};
    for (int t = 0; t < block; ++t) {
      getcontext(&ctx[t]);
      ctx[t].uc_stack.ss_sp = stacks.data() + static_cast<size_t>(t) * kStack;
      ctx[t].uc_stack.ss_size = kStack;
      ctx[t].uc_link = nullptr;
      makecontext(&ctx[t], trampoline, 0);
      alive[t] = 1;
    }
    int left = block;
    while (left > 0) {
      progress = false;
      for (int t = 0; t < block; ++t)
        if (alive[t]) {
          cur = t;
          swapcontext(&main_ctx, &ctx[t]);
        }
      left = 0;
      for (int t = 0; t < block; ++t) left += alive[t];
      if (left > 0 && !progress) {
        std::fprintf(stderr, "emu: deadlock in block %lld (%d threads left)\n", static_cast<long long>(b), left);
        std::abort();
      }
    }
  }
}
inline int lane() { return cur & 31; }
inline int warp() { return cur >> 5; }
template <class T> inline uint64_t bits(T v) { uint64_t u = 0; std::memcpy(&u, &v, sizeof(T)); return u; }
template <class T> inline T unbits(uint64_t u) { T v; std::memcpy(&v, &u, sizeof(T)); return v; }
template <class T> inline T exch(T v, int src) {
  xbuf[cur] = bits(v);
  wait(warp_bar[warp()]);
  const T r = unbits<T>(xbuf[warp() * 32 + src]);
  wait(warp_bar[warp()]);
  return r;
}
}  // namespace emu

#define threadIdx (emu::tid())
#define blockIdx (emu::block_idx)
inline void __syncthreads() { emu::wait(emu::block_bar); }
inline int __syncthreads_or(int p) {
  emu::xbuf[emu::cur] = p != 0;
  emu::wait(emu::block_bar);
  int r = 0;
  for (int t = 0; t < emu::nthr; ++t) r |= static_cast<int>(emu::xbuf[t]);
  emu::wait(emu::block_bar);
  return r;
}
inline void __threadfence() {}
template <class T> inline T __shfl_xor_sync(unsigned, T v, int o) { return emu::exch(v, emu::lane() ^ o); }
template <class T> inline T __shfl_up_sync(unsigned, T v, int o) { return emu::exch(v, emu::lane() >= o ? emu::lane() - o : emu::lane()); }
template <class T> inline T __shfl_sync(unsigned, T v, int s) { return emu::exch(v, s); }
inline unsigned __ballot_sync(unsigned, int p) {
  emu::xbuf[emu::cur] = p != 0;
  emu::wait(emu::warp_bar[emu::warp()]);
  unsigned m = 0;
  for (int l = 0; l < 32; ++l) m |= static_cast<unsigned>(emu::xbuf[emu::warp() * 32 + l]) << l;
  emu::wait(emu::warp_bar[emu::warp()]);
  return m;
}
template <class T> inline unsigned __match_any_sync(unsigned, T v) {
  emu::xbuf[emu::cur] = emu::bits(v);
  emu::wait(emu::warp_bar[emu::warp()]);
  unsigned m = 0;
  for (int l = 0; l < 32; ++l) m |= static_cast<unsigned>(emu::xbuf[emu::warp() * 32 + l] == emu::bits(v)) << l;
  emu::wait(emu::warp_bar[emu::warp()]);
  return m;
}
inline int __ffs(unsigned x) { return __builtin_ffs(static_cast<int>(x)); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
template <class T, class U> inline T atomicAdd(T* p, U v) { T o = *p; *p = o + static_cast<T>(v); return o; }
template <class T, class U> inline T atomicOr(T* p, U v) { T o = *p; *p = o | static_cast<T>(v); return o; }
inline unsigned long long __ldcg(const unsigned long long* p) { return *p; }
inline unsigned __float_as_uint(float f) { return emu::bits(f) & 0xffffffffu; }
inline float __uint_as_float(unsigned u) { return emu::unbits<float>(u); }
inline unsigned long long __float2ull_rn(float x) { return static_cast<unsigned long long>(std::nearbyint(static_cast<double>(x))); }
template <class A, class B> inline auto min(A a, B b) -> decltype(a + b) { return a < b ? a : b; }
template <class A, class B> inline auto max(A a, B b) -> decltype(a + b) { return a > b ? a : b; }
using std::isfinite;
