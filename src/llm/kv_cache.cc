// The paged KV cache: block bookkeeping and pool memory (semantics in kv_cache.h).
#include "llm/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "llm/kv_pool_device.h"

namespace kiln::llm {

namespace {

constexpr size_t kPoolAlign = 256;  // bytes: each layer's pool starts on a 256-byte boundary

size_t cache_elem_bytes(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16: return 2;
    case DataType::kFloat8E4M3FN: return 1;
    default: return 0;
  }
}

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

size_t KvCacheLayout::block_bytes() const {
  return 2 * static_cast<size_t>(num_kv_heads) * static_cast<size_t>(block_size) * static_cast<size_t>(head_dim) *
         cache_elem_bytes(cache_dtype);
}

size_t KvCacheLayout::block_bytes_all_layers() const { return static_cast<size_t>(num_layers) * block_bytes(); }

Status validate_kv_layout(const KvCacheLayout& l) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v < 1) return invalid_argument(std::string("KV cache: ") + field + " is " + std::to_string(v) + ", expected >= 1");
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(positive("num_layers", l.num_layers));
  KILN_RETURN_IF_ERROR(positive("num_kv_heads", l.num_kv_heads));
  KILN_RETURN_IF_ERROR(positive("head_dim", l.head_dim));
  KILN_RETURN_IF_ERROR(positive("block_size", l.block_size));
  if (cache_elem_bytes(l.cache_dtype) == 0)
    return invalid_argument(std::string("KV cache: cache dtype ") + dtype_name(l.cache_dtype) +
                            " is not float32, float16 or bfloat16");
  constexpr int64_t kMaxDim = int64_t{1} << 20;  // keeps every product below 2^63
  if (l.num_layers > kMaxDim || l.num_kv_heads > kMaxDim || l.head_dim > kMaxDim || l.block_size > kMaxDim)
    return invalid_argument("KV cache: a size passes 2^20 (layers " + std::to_string(l.num_layers) + ", kv heads " +
                            std::to_string(l.num_kv_heads) + ", head_dim " + std::to_string(l.head_dim) + ", block_size " +
                            std::to_string(l.block_size) + ")");
  const double bytes = 2.0 * l.num_layers * l.num_kv_heads * l.block_size * l.head_dim * cache_elem_bytes(l.cache_dtype);
  if (bytes > static_cast<double>(int64_t{1} << 40))
    return invalid_argument("KV cache: one block takes " + std::to_string(bytes) + " bytes over all layers (limit 2^40)");
  return Status::Ok();
}

int64_t kv_blocks_for_budget(const KvCacheLayout& layout, size_t budget_bytes) {
  const size_t per_block = layout.block_bytes_all_layers();
  if (per_block == 0) return 0;
  return static_cast<int64_t>(budget_bytes / per_block);
}

// ---- KvBlockManager ----

StatusOr<KvBlockManager> KvBlockManager::create(int64_t num_blocks, int64_t block_size, int64_t max_rows,
                                                int64_t max_blocks_per_seq) {
  auto positive = [](const char* field, int64_t v) -> Status {
    if (v < 1) return invalid_argument(std::string("KV block manager: ") + field + " is " + std::to_string(v) + ", expected >= 1");
    return Status::Ok();
  };
  KILN_RETURN_IF_ERROR(positive("num_blocks", num_blocks));
  KILN_RETURN_IF_ERROR(positive("block_size", block_size));
  KILN_RETURN_IF_ERROR(positive("max_rows", max_rows));
  KILN_RETURN_IF_ERROR(positive("max_blocks_per_seq", max_blocks_per_seq));
  constexpr int64_t kMaxId = std::numeric_limits<int32_t>::max();
  if (num_blocks > kMaxId || max_rows > kMaxId || max_blocks_per_seq > kMaxId ||
      max_rows > (int64_t{1} << 40) / max_blocks_per_seq)
    return invalid_argument("KV block manager: " + std::to_string(num_blocks) + " blocks, " + std::to_string(max_rows) +
                            " rows x " + std::to_string(max_blocks_per_seq) + " blocks per sequence pass the int32 block table's limits");
  KvBlockManager m;
  m.num_blocks_ = num_blocks;
  m.block_size_ = block_size;
  m.max_rows_ = max_rows;
  m.max_blocks_per_seq_ = max_blocks_per_seq;
  // Block 0 ends at the back, so the first sequence gets blocks 0, 1, 2, ...
  m.free_.resize(static_cast<size_t>(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) m.free_[static_cast<size_t>(i)] = static_cast<int32_t>(num_blocks - 1 - i);
  m.row_count_.assign(static_cast<size_t>(max_rows), -1);
  m.table_.assign(static_cast<size_t>(max_rows * max_blocks_per_seq), 0);
  return m;
}

bool KvBlockManager::row_in_use(int32_t row) const {
  return row >= 0 && row < max_rows_ && row_count_[static_cast<size_t>(row)] >= 0;
}

int64_t KvBlockManager::blocks_needed(int64_t tokens) const {
  return tokens <= 0 ? 0 : (tokens + block_size_ - 1) / block_size_;
}

Status KvBlockManager::check_fits(int64_t tokens) const {
  if (tokens < 1) return invalid_argument("KV cache: a sequence of " + std::to_string(tokens) + " tokens");
  const int64_t need = blocks_needed(tokens);
  if (need > max_blocks_per_seq_)
    return invalid_argument("KV cache: a sequence of " + std::to_string(tokens) + " tokens needs " + std::to_string(need) +
                            " blocks of " + std::to_string(block_size_) + ", past the block table's " +
                            std::to_string(max_blocks_per_seq_) + " per sequence (" +
                            std::to_string(max_blocks_per_seq_ * block_size_) + " tokens: the engine's max sequence length)");
  if (need > num_blocks_)
    return invalid_argument("KV cache: a sequence of " + std::to_string(tokens) + " tokens needs " + std::to_string(need) +
                            " blocks, the whole pool has " + std::to_string(num_blocks_));
  return Status::Ok();
}

std::optional<int32_t> KvBlockManager::try_admit(int64_t tokens) {
  if (!check_fits(tokens).ok()) return std::nullopt;
  const int64_t need = blocks_needed(tokens);
  if (used_rows_ >= max_rows_ || need > free_blocks()) return std::nullopt;
  int32_t row = 0;
  while (row_count_[static_cast<size_t>(row)] >= 0) ++row;
  int32_t* entries = table_.data() + static_cast<size_t>(row) * static_cast<size_t>(max_blocks_per_seq_);
  for (int64_t i = 0; i < need; ++i) {
    entries[i] = free_.back();
    free_.pop_back();
  }
  row_count_[static_cast<size_t>(row)] = static_cast<int32_t>(need);
  ++used_rows_;
  return row;
}

Status KvBlockManager::release(int32_t row) {
  if (!row_in_use(row))
    return invalid_argument("KV cache: release of block-table row " + std::to_string(row) +
                            (row >= 0 && row < max_rows_ ? ", which holds no sequence" : ", outside [0, " + std::to_string(max_rows_) + ")"));
  int32_t* entries = table_.data() + static_cast<size_t>(row) * static_cast<size_t>(max_blocks_per_seq_);
  const int32_t n = row_count_[static_cast<size_t>(row)];
  // Pushed in reverse so the next sequence gets them back in the same order.
  for (int32_t i = n - 1; i >= 0; --i) free_.push_back(entries[i]);
  std::fill(entries, entries + max_blocks_per_seq_, 0);
  row_count_[static_cast<size_t>(row)] = -1;
  --used_rows_;
  return Status::Ok();
}

std::vector<int32_t> KvBlockManager::blocks_of(int32_t row) const {
  if (!row_in_use(row)) return {};
  const int32_t* entries = table_.data() + static_cast<size_t>(row) * static_cast<size_t>(max_blocks_per_seq_);
  return std::vector<int32_t>(entries, entries + row_count_[static_cast<size_t>(row)]);
}

// ---- KvPool ----

StatusOr<std::unique_ptr<KvPool>> KvPool::create(const KvCacheLayout& layout, int64_t num_blocks, KvPoolMemory memory) {
  KILN_RETURN_IF_ERROR(validate_kv_layout(layout));
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    return invalid_argument("KV pool: " + std::to_string(num_blocks) + " blocks, expected 1 .. 2^31-1");
  const size_t per_layer = layout.block_bytes() * static_cast<size_t>(num_blocks);
  if (per_layer / static_cast<size_t>(num_blocks) != layout.block_bytes() || per_layer > (size_t{1} << 46))
    return invalid_argument("KV pool: " + std::to_string(num_blocks) + " blocks of " + std::to_string(layout.block_bytes()) +
                            " bytes per layer pass 2^46 bytes");
  std::unique_ptr<KvPool> p(new KvPool());
  p->layout_ = layout;
  p->num_blocks_ = num_blocks;
  p->memory_ = memory;
  p->layer_stride_ = round_up(per_layer, kPoolAlign);
  p->bytes_ = p->layer_stride_ * static_cast<size_t>(layout.num_layers);
  const std::string what = "the KV cache pool (" + std::to_string(layout.num_layers) + " layers x " +
                           std::to_string(num_blocks) + " blocks of " + std::to_string(layout.block_bytes()) + " bytes)";
  if (memory == KvPoolMemory::kHost) {
    p->base_ = std::aligned_alloc(kPoolAlign, p->bytes_);
    if (!p->base_) return Status(StatusCode::kOutOfMemory, "out of host memory for " + what + ": " + std::to_string(p->bytes_) + " bytes");
    std::memset(p->base_, 0, p->bytes_);
  } else {
    KILN_ASSIGN_OR_RETURN(p->base_, kv_device_alloc_zeroed(p->bytes_, what));
  }
  return p;
}

KvPool::~KvPool() {
  if (!base_) return;
  if (memory_ == KvPoolMemory::kHost)
    std::free(base_);
  else
    kv_device_free(base_);
}

void* KvPool::layer_address(int64_t layer) const {
  return static_cast<char*>(base_) + static_cast<size_t>(layer) * layer_stride_;
}

Tensor KvPool::pool_pointers() const {
  Tensor t(DataType::kInt64, {layout_.num_layers, 2});
  int64_t* d = t.data<int64_t>();
  for (int64_t l = 0; l < layout_.num_layers; ++l) {
    d[2 * l] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(layer_address(l)));
    d[2 * l + 1] = num_blocks_;
  }
  return t;
}

}  // namespace kiln::llm
