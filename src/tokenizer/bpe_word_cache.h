// A bounded cache of BPE results per word, one per thread and model: the same words recur all
// through a text, and a hit skips the merge loop entirely. Per-thread caches need no locks on
// the encode hot path (HF uses a shared RwLock and skips the cache under contention).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_hash.h"
#include "tokenizer/token_id.h"

namespace locus::tokenizer {

class WordCache {
 public:
  explicit WordCache(size_t capacity) : capacity_(capacity) { map_.reserve(capacity); }

  const std::vector<TokenId>* find(std::string_view word) const {
    auto it = map_.find(word);
    return it == map_.end() ? nullptr : &it->second;
  }
  // When full the cache starts over: cheaper than LRU bookkeeping per hit, and a long text's
  // vocabulary is re-learned within a few thousand words.
  void insert(std::string_view word, const TokenId* ids, size_t count) {
    if (map_.size() >= capacity_) map_.clear();
    map_.emplace(std::string(word), std::vector<TokenId>(ids, ids + count));
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return hash_bytes(s); }
  };
  size_t capacity_;
  std::unordered_map<std::string, std::vector<TokenId>, Hash, std::equal_to<>> map_;
};

// The calling thread's cache for model `owner_id` (a process-unique id, never reused), for
// byte-level or text pre-tokens. A thread keeps caches for its few most recent models.
WordCache& thread_word_cache(uint64_t owner_id, bool byte_level);

// A fresh process-unique owner id.
uint64_t next_word_cache_owner_id();

}  // namespace locus::tokenizer
