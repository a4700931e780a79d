#include "backend/cuda/runtime/device_allocator.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>

namespace locus::cuda {

DeviceAllocator::~DeviceAllocator() {
  release_cache();
}

size_t DeviceAllocator::round_size(size_t bytes) {
  constexpr size_t kSmall = 512;
  constexpr size_t kLarge = 2u << 20;
  if (bytes == 0) bytes = 1;
  if (bytes < (1u << 20)) return (bytes + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

Expected<void*> DeviceAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  std::lock_guard lock(mutex_);
  // Best fit among cached blocks up to twice the size: steps repeat their sizes, so exact hits
  // dominate; the bound stops a small request from pinning a huge block.
  auto it = free_blocks_.lower_bound(size);
  if (it != free_blocks_.end() && it->first <= 2 * size) {
    void* ptr = it->second;
    const size_t got = it->first;
    free_blocks_.erase(it);
    stats_.cached_bytes -= got;
    stats_.in_use_bytes += got;
    stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
    return ptr;
  }
  cudaSetDevice(device_);
  void* ptr = nullptr;
  cudaError_t err = cudaMalloc(&ptr, size);
  if (err == cudaErrorMemoryAllocation && !free_blocks_.empty()) {
    cudaGetLastError();
    for (auto& [s, p] : free_blocks_) {
      cudaFree(p);
      live_.erase(p);
      stats_.reserved_bytes -= s;
    }
    free_blocks_.clear();
    stats_.cached_bytes = 0;
    err = cudaMalloc(&ptr, size);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    return resource_exhausted(fmt::format(
        "cuda:{}: cannot allocate {:.1f} MiB ({}); {:.1f} MiB in use by locus, {:.1f} MiB free "
        "of {:.1f} MiB",
        device_, static_cast<double>(size) / (1 << 20), cudaGetErrorString(err),
        static_cast<double>(stats_.in_use_bytes) / (1 << 20),
        static_cast<double>(free_b) / (1 << 20), static_cast<double>(total_b) / (1 << 20)));
  }
  live_[ptr] = size;
  stats_.reserved_bytes += size;
  stats_.in_use_bytes += size;
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
  return ptr;
}

void DeviceAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  free_blocks_.emplace(it->second, ptr);
  stats_.in_use_bytes -= it->second;
  stats_.cached_bytes += it->second;
}

void DeviceAllocator::release_cache() {
  std::lock_guard lock(mutex_);
  for (auto& [size, ptr] : free_blocks_) {
    cudaFree(ptr);
    live_.erase(ptr);
    stats_.reserved_bytes -= size;
  }
  free_blocks_.clear();
  stats_.cached_bytes = 0;
}

AllocatorStats DeviceAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_in_use_bytes = stats_.in_use_bytes;
}

}  // namespace locus::cuda
