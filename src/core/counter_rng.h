// Counter-based random numbers: value i of stream (seed, key) is a pure function of its inputs,
// so any element can be generated independently, in any order, on the host or on the GPU, and
// always comes out the same. Used for dummy weights and reproducible test data; not for sampling.
// Includable from .cu files: no host libraries.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define LOCUS_RNG_HOST_DEVICE __host__ __device__
#else
#define LOCUS_RNG_HOST_DEVICE
#endif

namespace locus {

// splitmix64's finalizer: a bijection on 64-bit integers with full avalanche.
LOCUS_RNG_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The key of a stream: seed and a 64-bit name hash combined so that streams never coincide
// for different (seed, key) pairs in practice.
LOCUS_RNG_HOST_DEVICE inline uint64_t stream_key(uint64_t seed, uint64_t key) {
  return mix64(seed ^ mix64(key + 0x632BE59BD9B4E019ull));
}

// Uniform in [0, 1) with 24 random bits (every value exactly representable in f32).
LOCUS_RNG_HOST_DEVICE inline float counter_uniform(uint64_t stream, uint64_t index) {
  uint64_t bits = mix64(stream ^ mix64(index));
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

// FNV-1a over bytes: the name hash used as a stream key (host side; pass the result to kernels).
inline uint64_t fnv1a64(const char* data, uint64_t size) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (uint64_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 0x100000001B3ull;
  }
  return h;
}

}  // namespace locus
