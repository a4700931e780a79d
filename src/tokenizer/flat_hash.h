// Open-addressing hash tables for the vocabulary (string → id) and the merge ranks
// ((id, id) → rank, merged id). Built once at load, then only read: lookups sit on the encode
// hot path (one per pre-token and one per symbol pair), where std::unordered_map's node
// chasing and std::hash<std::string> cost a large share of the time.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace locus::tokenizer {

// A 64-bit hash of a byte string (8 bytes per step with a multiply-xorshift mix); strong enough
// for table placement, not for adversarial inputs (keys are the model's own vocabulary).
inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  uint64_t h = 0xCBF29CE484222325ULL ^ (s.size() * kMul);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p, n);
  h = (h ^ tail) * kMul;
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ULL;
  h ^= h >> 32;
  return h;
}

class StringIdMap {
 public:
  void reserve(size_t count);
  // Inserts or overwrites.
  void insert(std::string_view key, int32_t value);
  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    uint64_t h = hash_bytes(key);
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.length == kEmpty) return std::nullopt;
      if (slot.hash == h && slot.length == key.size() &&
          std::memcmp(arena_.data() + slot.offset, key.data(), key.size()) == 0) {
        return slot.value;
      }
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint32_t kEmpty = 0xFFFFFFFFu;
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0;
    uint32_t length = kEmpty;
    int32_t value = 0;
  };
  void grow();
  std::vector<Slot> slots_;
  std::string arena_;
  size_t size_ = 0;
};

// (left id, right id) → (rank, merged id) for BPE merges.
class MergeMap {
 public:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  void reserve(size_t count);
  void insert(int32_t left, int32_t right, Merge merge);
  const Merge* find(int32_t left, int32_t right) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = make_key(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
      const Slot& slot = slots_[i];
      if (slot.key == key) return &slot.merge;
      if (slot.key == kEmptyKey) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};
  static uint64_t make_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    return k;
  }
  struct Slot {
    uint64_t key = kEmptyKey;
    Merge merge{};
  };
  void grow();
  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace locus::tokenizer
