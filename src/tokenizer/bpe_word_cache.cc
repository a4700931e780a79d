// Per-thread BPE word caches; see bpe_word_cache.h.
#include "tokenizer/bpe_word_cache.h"

#include <atomic>

namespace locus::tokenizer {
namespace {

// Words per cache. HF caches 10k; more helps long multilingual prompts and costs a few MB.
constexpr size_t kWordsPerCache = 32 * 1024;
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

uint64_t next_word_cache_owner_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

WordCache& thread_word_cache(uint64_t owner_id, bool byte_level) {
  thread_local ThreadCaches state;
  auto& entries = state.entries;
  size_t slot = byte_level ? 1 : 0;
  if (!entries.empty() && entries.front().owner == owner_id) {
    auto& cache = entries.front().caches[slot];
    if (!cache) cache = std::make_unique<WordCache>(kWordsPerCache);
    return *cache;
  }
  size_t found = entries.size();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].owner == owner_id) found = i;
  }
  if (found == entries.size()) {
    if (entries.size() == kModelsPerThread) entries.pop_back();
    entries.insert(entries.begin(), ThreadCaches::Entry{owner_id, {}});
  } else {
    ThreadCaches::Entry entry = std::move(entries[found]);
    entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(found));
    entries.insert(entries.begin(), std::move(entry));
  }
  auto& cache = entries.front().caches[slot];
  if (!cache) cache = std::make_unique<WordCache>(kWordsPerCache);
  return *cache;
}

}  // namespace locus::tokenizer
