// Hash chain over full KV blocks.
#include "kv/block_hash.h"

#include "core/counter_rng.h"

namespace locus {

namespace {
// Distinct odd constants keep the two lanes independent functions of the same input.
constexpr uint64_t kLaneA = 0xD6E8FEB86659FD93ull;
constexpr uint64_t kLaneB = 0xA0761D6478BD642Full;
}  // namespace

uint64_t cache_salt_key(std::string_view cache_salt) {
  if (cache_salt.empty()) return 0;
  // Keep 0 for "no salt" so that a salt hashing to 0 cannot alias the unsalted cache.
  return fnv1a64(cache_salt.data(), cache_salt.size()) | 1;
}

BlockHash root_block_hash(uint64_t extra_key) {
  return {mix64(extra_key ^ kLaneA), mix64(extra_key * kLaneB + 0x5851F42D4C957F2Dull)};
}

BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                            uint64_t extra_key) {
  uint64_t a = mix64(parent.lo ^ kLaneA ^ extra_key);
  uint64_t b = mix64(parent.hi + kLaneB + mix64(extra_key));
  for (int32_t t : token_ids) {
    const auto u = static_cast<uint64_t>(static_cast<uint32_t>(t));
    a = mix64(a ^ u);
    b = mix64((b + u) * kLaneB);
  }
  // The length is folded in so that blocks of different sizes can never alias.
  const auto n = static_cast<uint64_t>(token_ids.size());
  return {mix64(b ^ n), mix64(a + n)};
}

}  // namespace locus
