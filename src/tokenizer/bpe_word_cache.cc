// Per-thread BPE word caches; see bpe_word_cache.h.
#include "tokenizer/bpe_word_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

namespace locus::tokenizer {
namespace {

// Words per cache (HF caches 10k). Measured on the mixed benchmark text: 8k thrashes on CJK
// runs and numbers, 32k (1 MB of slots) misses the L2 cache more often than it hits more.
constexpr size_t kWordsPerCache = 16 * 1024;
constexpr size_t kSlots = kWordsPerCache * 2;  // load factor ≤ 1/2
// Models whose caches one thread keeps (a server holds one tokenizer; tests hold several).
constexpr size_t kModelsPerThread = 4;

struct ThreadCaches {
  struct Entry {
    uint64_t owner = 0;
    std::unique_ptr<WordCache> caches[2];
  };
  std::vector<Entry> entries;  // most recently used first
};

}  // namespace

WordCache::WordCache() : slots_(kSlots) {}

bool WordCache::find(std::string_view word, const TokenId*& ids, size_t& count) const {
  uint64_t h = hash_bytes(word);
  auto tag = static_cast<uint32_t>(h >> 32);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.word_length == 0) return false;
    if (slot.hash == tag && slot.word_length == word.size() &&
        std::memcmp(words_.data() + slot.word_offset, word.data(), word.size()) == 0) {
      ids = ids_.data() + slot.ids_offset;
      count = slot.id_count;
      return true;
    }
  }
}

void WordCache::insert(std::string_view word, const TokenId* ids, size_t count) {
  if (word.empty() || word.size() > UINT16_MAX || count > UINT16_MAX) return;
  if (size_ >= kWordsPerCache) {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    words_.clear();
    ids_.clear();
    size_ = 0;
  }
  uint64_t h = hash_bytes(word);
  size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  while (slots_[i].word_length != 0)
    i = (i + 1) & mask;
  slots_[i] = Slot{static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(words_.size()),
                   static_cast<uint32_t>(ids_.size()), static_cast<uint16_t>(word.size()),
                   static_cast<uint16_t>(count)};
  words_.append(word);
  ids_.insert(ids_.end(), ids, ids + count);
  ++size_;
}

uint64_t next_word_cache_owner_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

WordCache& thread_word_cache(uint64_t owner_id, bool byte_level) {
  thread_local ThreadCaches state;
  auto& entries = state.entries;
  size_t found = entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].owner == owner_id) {
      found = i;
      break;
    }
  }
  if (found == entries.size()) {
    if (entries.size() == kModelsPerThread) entries.pop_back();
    entries.insert(entries.begin(), ThreadCaches::Entry{owner_id, {}});
  } else if (found != 0) {
    ThreadCaches::Entry entry = std::move(entries[found]);
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(found));
    entries.insert(entries.begin(), std::move(entry));
  }
  auto& cache = entries.front().caches[byte_level ? 1 : 0];
  if (!cache) cache = std::make_unique<WordCache>();
  return *cache;
}

}  // namespace locus::tokenizer
