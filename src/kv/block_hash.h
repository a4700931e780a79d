// Prefix-cache keys: the hash chain over FULL blocks. A block's hash covers its parent's hash and
// its own token ids, so equal hashes mean equal whole prefixes (up to collisions). Never hash a
// partial block: its contents still change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace locus {

// 128 bits from two independent 64-bit lanes. Not cryptographic: with N cached blocks an
// accidental collision has probability about N^2 / 2^129, but a tenant who can choose prompts
// should be separated by cache_salt, not by the hash.
struct BlockHash {
  uint64_t hi = 0;
  uint64_t lo = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const { return static_cast<size_t>(h.lo ^ (h.hi >> 7)); }
};

// The key of a cache salt (0 for no salt); equal salts share cached blocks, different ones never.
uint64_t cache_salt_key(std::string_view cache_salt);

// The "parent" of a request's first block. Extra keys that apply to the whole sequence (the cache
// salt; later a LoRA id) go in here, and the chain carries them into every block hash.
BlockHash root_block_hash(uint64_t extra_key);

// Hash of one full block. `extra_key` is for per-block inputs that are not token ids (e.g. the
// hash of an image whose placeholder tokens fall in this block); 0 when there are none.
BlockHash hash_block_tokens(const BlockHash& parent, std::span<const int32_t> token_ids,
                            uint64_t extra_key = 0);

}  // namespace locus
