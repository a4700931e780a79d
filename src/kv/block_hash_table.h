// The prefix cache's index: block hash -> block id, as a flat open-addressing table sized once
// for the pool (never more entries than blocks). A node-based map costs a malloc per cached
// block and a cache miss per hop; at 1024 running requests it tripled the scheduler step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "kv/block_hash.h"

namespace locus {

class BlockHashTable {
 public:
  // Room for `max_entries` entries at a load factor <= 1/2.
  explicit BlockHashTable(size_t max_entries);

  std::optional<int32_t> find(const BlockHash& hash) const;
  // Inserts when the hash is absent; returns false (and changes nothing) when present.
  bool insert(const BlockHash& hash, int32_t block);
  // Removes the entry if present.
  void erase(const BlockHash& hash);
  void clear();
  size_t size() const { return size_; }

  // Visits every entry (tests and invariant checks).
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.block != kEmpty) f(s.hash, s.block);
    }
  }

 private:
  static constexpr int32_t kEmpty = -1;
  struct Slot {
    BlockHash hash;
    int32_t block = kEmpty;
  };
  size_t home(const BlockHash& h) const { return static_cast<size_t>(h.lo) & mask_; }
  // Index of the slot holding `hash`, or of the empty slot where the probe ended.
  size_t probe(const BlockHash& hash) const;

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace locus
