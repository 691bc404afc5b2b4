// The paged KV cache of the LLM runner (issue 13 item 4; docs/decisions/0060-llm-runner.md): a
// pool of fixed-size blocks per layer that the step graph's PagedAttention op reads and appends
// to (layout in docs/decisions/0059 and src/llm/step_graph.h), the block manager that hands
// blocks to sequences (a free list, one block-table row per running sequence), and the pool
// memory itself — host memory for CPU plans, device memory (cudaMalloc) for CUDA plans.
//
// Blocks are reserved for a request's worst case (prompt + max_new_tokens) when it is admitted,
// so a running sequence never runs out mid-generation and is never preempted; vLLM instead
// allocates a block when a sequence crosses into it and preempts (recomputes or swaps) sequences
// when the pool is exhausted. The reservation admits fewer long requests at once when most stop
// early, in exchange for no preemption path; see the decision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "kiln/status.h"
#include "kiln/tensor.h"
#include "kiln/types.h"

namespace kiln::llm {

// The geometry of one layer's pool: [num_blocks, 2 (K then V), num_kv_heads, block_size,
// head_dim] row-major, elements of cache_dtype (PagedAttention's kv_pools contract).
struct KvCacheLayout {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 32;                    // tokens per block
  DataType cache_dtype = DataType::kFloat32;  // kFloat32, kFloat16, kBFloat16 or kFloat8E4M3FN

  // Bytes of one block of one layer: 2 * num_kv_heads * block_size * head_dim * element size.
  size_t block_bytes() const;
  // Bytes of one block id across all layers (what one more block costs): num_layers * block_bytes().
  size_t block_bytes_all_layers() const;
};

// InvalidArgument naming the field: a non-positive size, a cache dtype other than float32 /
// float16 / bfloat16, or a block so large its byte count overflows.
Status validate_kv_layout(const KvCacheLayout& layout);

// Blocks (per layer, all layers alike) that `budget_bytes` holds: floor(budget / block_bytes_all_layers()).
int64_t kv_blocks_for_budget(const KvCacheLayout& layout, size_t budget_bytes);

// Bookkeeping of the pool's blocks: which are free, which row of the block table each running
// sequence has, and the table itself (int32 [max_rows, max_blocks_per_seq], row-major: row r
// lists sequence r's block ids in position order, position p in entry p / block_size). Unused
// entries hold 0, a valid block id, so a kernel that trusts the table never indexes outside the
// pool. No memory of the pool is touched. Not thread-safe (the runner's scheduler owns it).
class KvBlockManager {
 public:
  // InvalidArgument unless every count is >= 1 and num_blocks fits int32 block ids.
  static StatusOr<KvBlockManager> create(int64_t num_blocks, int64_t block_size, int64_t max_rows,
                                         int64_t max_blocks_per_seq);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t max_rows() const { return max_rows_; }
  int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }
  int64_t free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t used_rows() const { return used_rows_; }
  bool row_in_use(int32_t row) const;

  // ceil(tokens / block_size).
  int64_t blocks_needed(int64_t tokens) const;
  // OK when a sequence of `tokens` tokens could ever be admitted (on an empty pool); otherwise
  // InvalidArgument saying which limit it passes (the table's max_blocks_per_seq * block_size
  // tokens per sequence, or the pool's num_blocks).
  Status check_fits(int64_t tokens) const;
  // Reserves a row (the lowest free one) and blocks_needed(tokens) blocks for a sequence that
  // will hold at most `tokens` tokens (tokens >= 1), and writes them into the row. nullopt when
  // no row or too few blocks are free now: the caller queues the request and tries again after a
  // release. Requests that check_fits refuses also get nullopt; check first.
  std::optional<int32_t> try_admit(int64_t tokens);
  // Returns the row's blocks to the free list and zeroes the row. InvalidArgument for a row out
  // of range or not in use (a double release), naming it.
  Status release(int32_t row);
  // The block ids of `row` in position order (empty when not in use).
  std::vector<int32_t> blocks_of(int32_t row) const;
  // The whole table, [max_rows * max_blocks_per_seq] row-major.
  const std::vector<int32_t>& block_table() const { return table_; }

 private:
  int64_t num_blocks_ = 0, block_size_ = 0, max_rows_ = 0, max_blocks_per_seq_ = 0;
  std::vector<int32_t> free_;       // free block ids; the back is handed out next
  std::vector<int32_t> row_count_;  // per row: blocks held (-1 = row free)
  std::vector<int32_t> table_;
  int64_t used_rows_ = 0;
};

// Where a pool's memory lives: host memory for CPU plans, device memory for CUDA plans.
enum class KvPoolMemory : uint8_t { kHost, kDevice };

// The pool memory of every layer: one allocation, layer l at offset l * num_blocks *
// block_bytes() (256-byte aligned), zero-filled at creation. Owns the memory; frees it when
// destroyed.
class KvPool {
 public:
  // Errors: validate_kv_layout's; num_blocks < 1; kDevice without the CUDA backend or a GPU
  // (Unsupported); an allocation that fails (OutOfMemory naming the bytes).
  static StatusOr<std::unique_ptr<KvPool>> create(const KvCacheLayout& layout, int64_t num_blocks, KvPoolMemory memory);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvCacheLayout& layout() const { return layout_; }
  int64_t num_blocks() const { return num_blocks_; }
  KvPoolMemory memory() const { return memory_; }
  size_t bytes() const { return bytes_; }  // all layers
  // Start of layer `layer`'s pool (host or device address, as memory() says).
  void* layer_address(int64_t layer) const;
  // The step graph's kv_pools input: int64 [num_layers, 2], row l = (layer_address(l), num_blocks).
  Tensor pool_pointers() const;

 private:
  KvPool() = default;
  KvCacheLayout layout_;
  int64_t num_blocks_ = 0;
  KvPoolMemory memory_ = KvPoolMemory::kHost;
  size_t bytes_ = 0, layer_stride_ = 0;  // bytes
  void* base_ = nullptr;
};

}  // namespace kiln::llm
