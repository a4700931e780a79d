// Open-addressing tables; see flat_hash.h.
#include "tokenizer/flat_hash.h"

#include <bit>

namespace locus::tokenizer {
namespace {

// Capacity for `count` entries at a load factor of at most 1/2.
size_t capacity_for(size_t count) {
  return std::bit_ceil(std::max<size_t>(16, count * 2));
}

}  // namespace

void StringIdMap::reserve(size_t count) {
  if (capacity_for(count) <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity_for(count), Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.length == kEmpty) continue;
    size_t i = slot.hash & mask;
    while (slots_[i].length != kEmpty)
      i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

void StringIdMap::grow() {
  reserve(std::max<size_t>(16, size_ * 2));
}

void StringIdMap::insert(std::string_view key, int32_t value) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  uint64_t h = hash_bytes(key);
  size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.length == kEmpty) {
      slot.hash = h;
      slot.offset = static_cast<uint32_t>(arena_.size());
      slot.length = static_cast<uint32_t>(key.size());
      slot.value = value;
      arena_.append(key);
      ++size_;
      return;
    }
    if (slot.hash == h && slot.length == key.size() &&
        std::memcmp(arena_.data() + slot.offset, key.data(), key.size()) == 0) {
      slot.value = value;
      return;
    }
  }
}

void MergeMap::reserve(size_t count) {
  if (capacity_for(count) <= slots_.size()) return;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity_for(count), Slot{});
  size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.key == kEmptyKey) continue;
    size_t i = mix(slot.key) & mask;
    while (slots_[i].key != kEmptyKey)
      i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

void MergeMap::grow() {
  reserve(std::max<size_t>(16, size_ * 2));
}

void MergeMap::insert(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  uint64_t key = make_key(left, right);
  size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.key == kEmptyKey) {
      slot.key = key;
      slot.merge = merge;
      ++size_;
      return;
    }
    if (slot.key == key) {
      slot.merge = merge;  // a later duplicate wins, as in HF's HashMap collect
      return;
    }
  }
}

}  // namespace locus::tokenizer
