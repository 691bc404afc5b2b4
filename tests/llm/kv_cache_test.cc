// The paged KV cache's block manager and pool (src/llm/kv_cache.h): reservation for a request's
// worst case, the block table's contents, queueing on exhaustion, reuse without leaks.
#include "llm/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <set>

namespace kiln::llm {
namespace {

KvBlockManager make(int64_t blocks, int64_t bs, int64_t rows, int64_t mb) {
  auto m = KvBlockManager::create(blocks, bs, rows, mb);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(*m);
}

TEST(KvBlockManager, ReservesCeilTokensOverBlockSizeAndWritesTheRow) {
  KvBlockManager m = make(/*blocks=*/10, /*bs=*/4, /*rows=*/3, /*mb=*/5);
  EXPECT_EQ(m.blocks_needed(1), 1);
  EXPECT_EQ(m.blocks_needed(4), 1);
  EXPECT_EQ(m.blocks_needed(5), 2);
  auto a = m.try_admit(9);  // 3 blocks
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, 0);
  auto b = m.try_admit(4);  // 1 block
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, 1);
  EXPECT_EQ(m.free_blocks(), 6);
  EXPECT_EQ(m.used_rows(), 2);
  const std::vector<int32_t> ba = m.blocks_of(*a), bb = m.blocks_of(*b);
  EXPECT_EQ(ba, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(bb, (std::vector<int32_t>{3}));
  // The table: row r, entries in position order, unused entries 0 (a valid id).
  const std::vector<int32_t>& t = m.block_table();
  ASSERT_EQ(t.size(), 15u);
  EXPECT_EQ(std::vector<int32_t>(t.begin(), t.begin() + 5), (std::vector<int32_t>{0, 1, 2, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(t.begin() + 5, t.begin() + 10), (std::vector<int32_t>{3, 0, 0, 0, 0}));
  EXPECT_EQ(std::vector<int32_t>(t.begin() + 10, t.end()), (std::vector<int32_t>(5, 0)));
}

TEST(KvBlockManager, ReleaseReturnsBlocksAndTheRowForTheNextSequence) {
  KvBlockManager m = make(8, 2, 2, 4);
  auto a = m.try_admit(8);  // 4 blocks: 0..3
  auto b = m.try_admit(8);  // 4 blocks: 4..7
  ASSERT_TRUE(a && b);
  EXPECT_EQ(m.free_blocks(), 0);
  ASSERT_TRUE(m.release(*a).ok());
  EXPECT_FALSE(m.row_in_use(*a));
  EXPECT_TRUE(m.blocks_of(*a).empty());
  EXPECT_EQ(m.free_blocks(), 4);
  auto c = m.try_admit(3);  // reuses row 0 and the freed blocks, lowest first
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, 0);
  EXPECT_EQ(m.blocks_of(*c), (std::vector<int32_t>{0, 1}));
  // Double release and out-of-range rows are errors naming the row, not crashes.
  ASSERT_TRUE(m.release(*c).ok());
  Status s = m.release(*c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 0"), std::string::npos) << s.message();
  EXPECT_FALSE(m.release(7).ok());
  EXPECT_FALSE(m.release(-1).ok());
}

TEST(KvBlockManager, ExhaustionWaitsInsteadOfRefusing) {
  KvBlockManager m = make(/*blocks=*/6, /*bs=*/4, /*rows=*/4, /*mb=*/4);
  auto a = m.try_admit(16);  // 4 blocks
  ASSERT_TRUE(a.has_value());
  // 3 blocks wanted, 2 free: not now (nullopt, not an error) — it fits an empty pool.
  EXPECT_TRUE(m.check_fits(12).ok());
  EXPECT_FALSE(m.try_admit(12).has_value());
  EXPECT_EQ(m.free_blocks(), 2);  // a refused admission takes nothing
  ASSERT_TRUE(m.release(*a).ok());
  EXPECT_TRUE(m.try_admit(12).has_value());
  // Rows run out too: 2 rows, then wait.
  KvBlockManager r = make(100, 4, 2, 4);
  ASSERT_TRUE(r.try_admit(1) && r.try_admit(1));
  EXPECT_FALSE(r.try_admit(1).has_value());
  ASSERT_TRUE(r.release(1).ok());
  EXPECT_EQ(r.try_admit(1), std::optional<int32_t>(1));
}

TEST(KvBlockManager, RequestsThatCanNeverFitAreErrors) {
  KvBlockManager m = make(/*blocks=*/3, /*bs=*/4, /*rows=*/2, /*mb=*/5);
  Status per_seq = m.check_fits(21);  // 6 blocks > 5 per sequence
  EXPECT_EQ(per_seq.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(per_seq.message().find("20 tokens"), std::string::npos) << per_seq.message();
  Status pool = m.check_fits(13);  // 4 blocks > the pool's 3
  EXPECT_EQ(pool.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pool.message().find("pool has 3"), std::string::npos) << pool.message();
  EXPECT_FALSE(m.check_fits(0).ok());
  EXPECT_TRUE(m.check_fits(12).ok());
  EXPECT_FALSE(KvBlockManager::create(0, 4, 1, 1).ok());
  EXPECT_FALSE(KvBlockManager::create(4, 0, 1, 1).ok());
  EXPECT_FALSE(KvBlockManager::create(4, 4, 0, 1).ok());
  EXPECT_FALSE(KvBlockManager::create(4, 4, 1, 0).ok());
}

// 10,000 requests of random lengths through a small pool, FIFO queue, random finishing order:
// every block is owned by at most one sequence at a time, and all come back at the end.
TEST(KvBlockManager, NoLeakAfterTenThousandRequests) {
  constexpr int64_t kBlocks = 64, kBs = 8, kRows = 8, kMb = 16;
  KvBlockManager m = make(kBlocks, kBs, kRows, kMb);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> len(1, kMb * kBs);
  std::deque<int64_t> queue;
  std::vector<int32_t> running;
  int admitted = 0, finished = 0;
  for (int i = 0; i < 10000; ++i) queue.push_back(len(rng));
  while (!queue.empty() || !running.empty()) {
    // Admit in FIFO order while the head fits.
    while (!queue.empty()) {
      auto row = m.try_admit(queue.front());
      if (!row) break;
      ASSERT_EQ(static_cast<int64_t>(m.blocks_of(*row).size()), m.blocks_needed(queue.front()));
      running.push_back(*row);
      queue.pop_front();
      ++admitted;
    }
    ASSERT_FALSE(running.empty()) << "the queue's head never fits";  // a request always fits an empty pool
    // Ownership: no block in two rows, and used + free = all.
    std::set<int32_t> owned;
    for (int32_t r : running)
      for (int32_t b : m.blocks_of(r)) {
        ASSERT_GE(b, 0);
        ASSERT_LT(b, kBlocks);
        ASSERT_TRUE(owned.insert(b).second) << "block " << b << " in two rows";
      }
    ASSERT_EQ(static_cast<int64_t>(owned.size()) + m.free_blocks(), kBlocks);
    // Finish one or more random sequences.
    std::uniform_int_distribution<size_t> pick(0, running.size() - 1);
    const size_t k = pick(rng);
    ASSERT_TRUE(m.release(running[k]).ok());
    running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
    ++finished;
  }
  EXPECT_EQ(admitted, 10000);
  EXPECT_EQ(finished, 10000);
  EXPECT_EQ(m.free_blocks(), kBlocks);
  EXPECT_EQ(m.used_rows(), 0);
  EXPECT_EQ(m.block_table(), std::vector<int32_t>(kRows * kMb, 0));
}

TEST(KvPool, HostPoolLayoutAndPointers) {
  KvCacheLayout l;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 8;
  l.block_size = 4;
  l.cache_dtype = DataType::kFloat16;
  EXPECT_EQ(l.block_bytes(), 2u * 2 * 4 * 8 * 2);
  EXPECT_EQ(l.block_bytes_all_layers(), 3u * 256);
  EXPECT_EQ(kv_blocks_for_budget(l, 10 * 768 + 767), 10);
  auto p = KvPool::create(l, 5, KvPoolMemory::kHost);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const KvPool& pool = **p;
  Tensor ptrs = pool.pool_pointers();
  ASSERT_EQ(ptrs.dtype(), DataType::kInt64);
  ASSERT_EQ(ptrs.shape(), (Shape{3, 2}));
  for (int64_t layer = 0; layer < 3; ++layer) {
    const int64_t addr = ptrs.data<int64_t>()[2 * layer];
    EXPECT_EQ(addr, static_cast<int64_t>(reinterpret_cast<uintptr_t>(pool.layer_address(layer))));
    EXPECT_EQ(addr % 256, 0);
    EXPECT_EQ(ptrs.data<int64_t>()[2 * layer + 1], 5);
    // Layers do not overlap: each spans 5 blocks of 256 bytes before the next starts.
    if (layer > 0) {
      EXPECT_GE(addr - ptrs.data<int64_t>()[2 * (layer - 1)], 5 * 256);
    }
    const auto* bytes = static_cast<const uint8_t*>(pool.layer_address(layer));
    EXPECT_TRUE(std::all_of(bytes, bytes + 5 * 256, [](uint8_t b) { return b == 0; }));  // zero-filled
  }
  EXPECT_GE(pool.bytes(), 3u * 5 * 256);
}

TEST(KvPool, BadLayoutsAreErrors) {
  KvCacheLayout l;
  l.num_layers = 1;
  l.num_kv_heads = 1;
  l.head_dim = 4;
  l.block_size = 4;
  l.cache_dtype = DataType::kInt8;
  Status s = KvPool::create(l, 4, KvPoolMemory::kHost).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int8"), std::string::npos) << s.message();
  l.cache_dtype = DataType::kFloat32;
  l.head_dim = 0;
  EXPECT_NE(KvPool::create(l, 4, KvPoolMemory::kHost).status().message().find("head_dim"), std::string::npos);
  l.head_dim = 4;
  EXPECT_FALSE(KvPool::create(l, 0, KvPoolMemory::kHost).ok());
}

}  // namespace
}  // namespace kiln::llm
