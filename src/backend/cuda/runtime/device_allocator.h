// A caching device allocator: freed blocks go back to per-size free lists instead of
// cudaFree, so the per-op allocations of a model forward cost a map lookup after the first step,
// and a step replays the same sizes (what CUDA-graph capture after a warm-up relies on). One
// compute stream: a block freed on the host may be handed out again at once, because every later
// use is ordered after the earlier one on that stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/status.h"

namespace locus::cuda {

struct AllocatorStats {
  uint64_t in_use_bytes = 0;       // handed out, not yet freed
  uint64_t peak_in_use_bytes = 0;  // since the last reset_peak()
  uint64_t cached_bytes = 0;       // freed, kept for reuse
  uint64_t reserved_bytes = 0;     // in use + cached (what cudaMalloc gave us)
};

class DeviceAllocator {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;
  ~DeviceAllocator();

  // At least `bytes` (rounded up), 256-byte aligned. Out of memory: releases the cache, retries,
  // then reports resource_exhausted with the sizes.
  Expected<void*> allocate(size_t bytes);
  void free(void* ptr);
  // cudaFree of every cached block.
  void release_cache();

  AllocatorStats stats() const;
  void reset_peak();

 private:
  static size_t round_size(size_t bytes);

  int device_;
  mutable std::mutex mutex_;
  std::multimap<size_t, void*> free_blocks_;
  std::unordered_map<void*, size_t> live_;  // every block we own -> its size
  AllocatorStats stats_;
};

}  // namespace locus::cuda
