// Block pool: ref counts, LRU free queue, hash → block map.
#include "kv/block_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "core/logging.h"

namespace locus {

BlockPool::BlockPool(int num_blocks, bool enable_caching)
    : num_blocks_(num_blocks),
      enable_caching_(enable_caching),
      ref_count_(static_cast<size_t>(num_blocks), 0),
      prev_(static_cast<size_t>(num_blocks) + 1),
      next_(static_cast<size_t>(num_blocks) + 1),
      has_hash_(static_cast<size_t>(num_blocks), 0),
      hash_(static_cast<size_t>(num_blocks)),
      cached_(enable_caching ? static_cast<size_t>(num_blocks) : 0) {
  const BlockId sentinel = num_blocks_;
  prev_[static_cast<size_t>(sentinel)] = sentinel;
  next_[static_cast<size_t>(sentinel)] = sentinel;
  // Initially free in id order, so a fresh pool hands out 0, 1, 2, ...
  for (BlockId b = 0; b < num_blocks_; ++b)
    queue_push_back(b);
}

double BlockPool::usage() const {
  if (num_blocks_ == 0) return 0.0;
  return 1.0 - static_cast<double>(num_free_) / static_cast<double>(num_blocks_);
}

void BlockPool::queue_remove(BlockId b) {
  const auto i = static_cast<size_t>(b);
  next_[static_cast<size_t>(prev_[i])] = next_[i];
  prev_[static_cast<size_t>(next_[i])] = prev_[i];
  --num_free_;
}

void BlockPool::queue_push_back(BlockId b) {
  const auto s = static_cast<size_t>(num_blocks_);
  const BlockId last = prev_[s];
  prev_[static_cast<size_t>(b)] = last;
  next_[static_cast<size_t>(b)] = num_blocks_;
  next_[static_cast<size_t>(last)] = b;
  prev_[s] = b;
  ++num_free_;
}

BlockId BlockPool::queue_pop_front() {
  const BlockId b = next_[static_cast<size_t>(num_blocks_)];
  queue_remove(b);
  return b;
}

void BlockPool::evict_hash(BlockId b) {
  const auto i = static_cast<size_t>(b);
  if (!has_hash_[i]) return;
  cached_.erase(hash_[i]);
  has_hash_[i] = 0;
  ++num_evictions_;
}

void BlockPool::get_new_blocks(int n, std::vector<BlockId>& out) {
  if (n > num_free_) {
    // The manager checks capacity before allocating; getting here means the check is wrong.
    log::critical("BlockPool: asked for {} blocks with {} free", n, num_free_);
    std::abort();
  }
  for (int k = 0; k < n; ++k) {
    const BlockId b = queue_pop_front();
    evict_hash(b);
    ref_count_[static_cast<size_t>(b)] = 1;
    out.push_back(b);
  }
}

std::optional<BlockId> BlockPool::get_cached_block(const BlockHash& hash) const {
  return cached_.find(hash);
}

void BlockPool::touch(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    int32_t& rc = ref_count_[static_cast<size_t>(b)];
    if (rc == 0) queue_remove(b);
    ++rc;
  }
}

void BlockPool::free_blocks(std::span<const BlockId> blocks) {
  for (BlockId b : blocks) {
    int32_t& rc = ref_count_[static_cast<size_t>(b)];
    if (rc <= 0) {
      log::critical("BlockPool: freeing block {} whose ref count is {}", b, rc);
      std::abort();
    }
    if (--rc == 0) queue_push_back(b);
  }
}

void BlockPool::cache_full_block(BlockId block, const BlockHash& hash) {
  if (!enable_caching_) return;
  const auto i = static_cast<size_t>(block);
  if (has_hash_[i]) return;                  // already cached (a prefix hit being re-registered)
  if (!cached_.insert(hash, block)) return;  // first block with this content wins
  has_hash_[i] = 1;
  hash_[i] = hash;
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_ != num_blocks_) return false;
  cached_.clear();
  std::fill(has_hash_.begin(), has_hash_.end(), 0);
  return true;
}

std::optional<BlockHash> BlockPool::block_hash(BlockId block) const {
  const auto i = static_cast<size_t>(block);
  if (!has_hash_[i]) return std::nullopt;
  return hash_[i];
}

Status BlockPool::check_invariants() const {
  std::vector<uint8_t> in_queue(static_cast<size_t>(num_blocks_), 0);
  int count = 0;
  BlockId prev = num_blocks_;
  for (BlockId b = next_[static_cast<size_t>(num_blocks_)]; b != num_blocks_;
       b = next_[static_cast<size_t>(b)]) {
    if (b < 0 || b >= num_blocks_) return internal_error(fmt::format("free queue holds id {}", b));
    if (in_queue[static_cast<size_t>(b)])
      return internal_error(fmt::format("block {} queued twice", b));
    if (prev_[static_cast<size_t>(b)] != prev)
      return internal_error(fmt::format("bad prev link at {}", b));
    in_queue[static_cast<size_t>(b)] = 1;
    prev = b;
    if (++count > num_blocks_) return internal_error("free queue has a cycle");
  }
  if (count != num_free_) {
    return internal_error(fmt::format("free queue length {} != num_free {}", count, num_free_));
  }
  for (BlockId b = 0; b < num_blocks_; ++b) {
    const auto i = static_cast<size_t>(b);
    if (ref_count_[i] < 0)
      return internal_error(fmt::format("block {} ref count {}", b, ref_count_[i]));
    if ((ref_count_[i] == 0) != (in_queue[i] != 0)) {
      return internal_error(
          fmt::format("block {} ref count {} but in_free_queue={}", b, ref_count_[i], in_queue[i]));
    }
    if (has_hash_[i] && cached_.find(hash_[i]) != b) {
      return internal_error(fmt::format("block {} has a hash the cache map does not give it", b));
    }
  }
  Status status;
  cached_.for_each([&](const BlockHash& h, BlockId b) {
    if (status.is_ok() &&
        (!has_hash_[static_cast<size_t>(b)] || !(hash_[static_cast<size_t>(b)] == h))) {
      status =
          internal_error(fmt::format("cache map names block {} for a hash it does not hold", b));
    }
  });
  return status;
}

}  // namespace locus
