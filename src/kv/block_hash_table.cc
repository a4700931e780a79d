// Linear probing with backward-shift deletion (no tombstones, so lookups stay short however
// many blocks are cached and evicted over the server's life).
#include "kv/block_hash_table.h"

#include <algorithm>

namespace locus {

BlockHashTable::BlockHashTable(size_t max_entries) {
  size_t capacity = 16;
  while (capacity < 2 * max_entries)
    capacity *= 2;
  slots_.resize(capacity);
  mask_ = capacity - 1;
}

size_t BlockHashTable::probe(const BlockHash& hash) const {
  size_t i = home(hash);
  while (slots_[i].block != kEmpty && !(slots_[i].hash == hash))
    i = (i + 1) & mask_;
  return i;
}

std::optional<int32_t> BlockHashTable::find(const BlockHash& hash) const {
  const Slot& s = slots_[probe(hash)];
  if (s.block == kEmpty) return std::nullopt;
  return s.block;
}

bool BlockHashTable::insert(const BlockHash& hash, int32_t block) {
  Slot& s = slots_[probe(hash)];
  if (s.block != kEmpty) return false;
  s.hash = hash;
  s.block = block;
  ++size_;
  return true;
}

void BlockHashTable::erase(const BlockHash& hash) {
  size_t hole = probe(hash);
  if (slots_[hole].block == kEmpty) return;
  --size_;
  // Shift later members of the probe run back into the hole while their home position allows
  // it, so that every entry stays reachable from its home without tombstones.
  size_t j = hole;
  while (true) {
    j = (j + 1) & mask_;
    if (slots_[j].block == kEmpty) break;
    const size_t k = home(slots_[j].hash);
    // Entry j may move to `hole` unless its home lies cyclically in (hole, j].
    const bool home_after_hole = hole <= j ? (k > hole && k <= j) : (k > hole || k <= j);
    if (!home_after_hole) {
      slots_[hole] = slots_[j];
      hole = j;
    }
  }
  slots_[hole].block = kEmpty;
}

void BlockHashTable::clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  size_ = 0;
}

}  // namespace locus
