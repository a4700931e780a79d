// KV-cache manager: block tables, slot allocation, prefix caching.
#include "kv/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>

namespace locus {

KVCacheManager::KVCacheManager(const KVCacheConfig& config)
    : block_size_(config.block_size),
      enable_caching_(config.enable_prefix_caching),
      pool_(config.num_blocks, config.enable_prefix_caching) {}

void KVCacheManager::extend_block_hashes(RequestBlocks& state, const KVRequestView& request,
                                         int num_full_blocks) const {
  auto& hashes = state.block_hashes;
  const auto bs = static_cast<size_t>(block_size_);
  while (static_cast<int>(hashes.size()) < num_full_blocks) {
    const size_t i = hashes.size();
    const BlockHash parent = i == 0 ? root_block_hash(request.cache_salt_key) : hashes[i - 1];
    hashes.push_back(hash_block_tokens(parent, request.token_ids.subspan(i * bs, bs)));
  }
}

ComputedBlocks KVCacheManager::get_computed_blocks(const KVRequestView& request) {
  ComputedBlocks result;
  if (!enable_caching_ || request.skip_cache_reads) return result;
  const int num_tokens = static_cast<int>(request.token_ids.size());
  // The last token must be recomputed to get logits, so a fully cached sequence hits one block
  // less when its length is a multiple of the block size.
  const int max_hit_blocks = std::max(0, num_tokens - 1) / block_size_;
  RequestBlocks& state = requests_[request.request_id];
  extend_block_hashes(state, request, max_hit_blocks);
  for (int i = 0; i < max_hit_blocks; ++i) {
    auto block = pool_.get_cached_block(state.block_hashes[static_cast<size_t>(i)]);
    if (!block) break;
    result.blocks.push_back(*block);
  }
  result.num_computed_tokens = static_cast<int>(result.blocks.size()) * block_size_;
  ++stats_.requests;
  stats_.queries += static_cast<uint64_t>(num_tokens);
  stats_.hits += static_cast<uint64_t>(result.num_computed_tokens);
  return result;
}

const std::vector<BlockId>* KVCacheManager::allocate_slots(const KVRequestView& request,
                                                           int num_new_tokens,
                                                           const ComputedBlocks* new_computed,
                                                           int num_lookahead_tokens) {
  RequestBlocks& state = requests_[request.request_id];
  const int num_hit_blocks = new_computed ? static_cast<int>(new_computed->blocks.size()) : 0;
  const int num_hit_tokens = new_computed ? new_computed->num_computed_tokens : 0;
  const int num_computed = request.num_computed_tokens + num_hit_tokens;
  const int num_slots = num_computed + num_new_tokens + num_lookahead_tokens;
  const int num_required = (num_slots + block_size_ - 1) / block_size_;
  const int num_to_allocate =
      std::max(0, num_required - static_cast<int>(state.blocks.size()) - num_hit_blocks);

  // Hit blocks nobody references sit in the free queue and count as free; touching them takes
  // them out, so they cannot also be handed out as new blocks.
  int num_evictable_hits = 0;
  for (int i = 0; i < num_hit_blocks; ++i) {
    if (pool_.ref_count(new_computed->blocks[static_cast<size_t>(i)]) == 0) ++num_evictable_hits;
  }
  if (num_to_allocate > pool_.num_free_blocks() - num_evictable_hits) return nullptr;

  if (num_hit_blocks > 0) {
    pool_.touch(new_computed->blocks);
    state.blocks.insert(state.blocks.end(), new_computed->blocks.begin(),
                        new_computed->blocks.end());
    state.num_cached_blocks =
        std::max(state.num_cached_blocks, static_cast<int>(state.blocks.size()));
  }
  if (num_to_allocate > 0) pool_.get_new_blocks(num_to_allocate, state.blocks);

  if (enable_caching_) {
    // Blocks whose every token is computed by the end of this step become cacheable now: the
    // engine runs steps in order, so any later hit reads them after they are written.
    const int num_cacheable_tokens =
        std::min(num_computed + num_new_tokens, static_cast<int>(request.token_ids.size()));
    const int num_full_blocks = num_cacheable_tokens / block_size_;
    if (num_full_blocks > state.num_cached_blocks) {
      extend_block_hashes(state, request, num_full_blocks);
      for (int i = state.num_cached_blocks; i < num_full_blocks; ++i) {
        pool_.cache_full_block(state.blocks[static_cast<size_t>(i)],
                               state.block_hashes[static_cast<size_t>(i)]);
      }
      state.num_cached_blocks = num_full_blocks;
    }
  }
  return &state.blocks;
}

void KVCacheManager::free(RequestId request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  std::vector<BlockId>& blocks = it->second.blocks;
  std::reverse(blocks.begin(), blocks.end());
  pool_.free_blocks(blocks);
  requests_.erase(it);
}

std::span<const BlockId> KVCacheManager::block_ids(RequestId request_id) const {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return {};
  return it->second.blocks;
}

Status KVCacheManager::check_invariants() const {
  LOCUS_RETURN_IF_ERROR(pool_.check_invariants());
  std::vector<int32_t> held(static_cast<size_t>(pool_.num_blocks()), 0);
  for (const auto& [id, state] : requests_) {
    for (BlockId b : state.blocks) {
      if (b < 0 || b >= pool_.num_blocks()) {
        return internal_error(fmt::format("request {} holds invalid block {}", id, b));
      }
      ++held[static_cast<size_t>(b)];
    }
  }
  for (BlockId b = 0; b < pool_.num_blocks(); ++b) {
    if (held[static_cast<size_t>(b)] != pool_.ref_count(b)) {
      return internal_error(fmt::format("block {} is held by {} block tables but ref count is {}",
                                        b, held[static_cast<size_t>(b)], pool_.ref_count(b)));
    }
  }
  return Status::ok();
}

}  // namespace locus
