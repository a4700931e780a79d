// A bounded cache of BPE results per word, one per thread and model: the same words recur all
// through a text, and a hit skips the merge loop entirely. Per-thread caches need no locks on
// the encode hot path (HF shares one behind an RwLock and skips it under contention).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/flat_hash.h"
#include "tokenizer/token_id.h"

namespace locus::tokenizer {

// Open addressing over two arenas (word bytes, ids): no allocation per entry, one probe per hit.
class WordCache {
 public:
  WordCache();

  // The ids cached for `word` (a span into the cache, valid until the next insert), or an empty
  // span with found=false.
  bool find(std::string_view word, const TokenId*& ids, size_t& count) const;
  // When full the cache starts over: cheaper than LRU bookkeeping on every hit, and a text's
  // working vocabulary is re-learned within a few thousand words.
  void insert(std::string_view word, const TokenId* ids, size_t count);

 private:
  // 16 bytes, so probing touches one cache line; word_length 0 marks an empty slot.
  struct Slot {
    uint32_t hash = 0;  // high half of the 64-bit hash (the low half picks the slot)
    uint32_t word_offset = 0;
    uint32_t ids_offset = 0;
    uint16_t word_length = 0;
    uint16_t id_count = 0;
  };
  std::vector<Slot> slots_;
  std::string words_;
  std::vector<TokenId> ids_;
  size_t size_ = 0;
};

// The calling thread's cache for model `owner_id` (a process-unique id, never reused), for
// byte-level or text pre-tokens. A thread keeps caches for its few most recent models.
WordCache& thread_word_cache(uint64_t owner_id, bool byte_level);

// A fresh process-unique owner id.
uint64_t next_word_cache_owner_id();

}  // namespace locus::tokenizer
