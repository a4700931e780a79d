// Elementwise f32 <-> narrow-float conversion kernels. They call the same scalar functions as
// the CPU (core/float_convert.h), so GPU and CPU results agree bit for bit by construction; the
// GPU test checks those functions against CUDA's own conversion instructions on every f32 input.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels/convert/convert_launch.h"
#include "core/float_convert.h"

namespace locus::cuda {

template <NarrowFormat kFormat>
struct FormatTraits;

template <>
struct FormatTraits<NarrowFormat::kBF16> {
  using Storage = uint16_t;
  static __device__ Storage encode(float x) { return f32_to_bf16_bits(x); }
  static __device__ float decode(Storage v) { return bf16_bits_to_f32(v); }
};
template <>
struct FormatTraits<NarrowFormat::kF16> {
  using Storage = uint16_t;
  static __device__ Storage encode(float x) { return f32_to_f16_bits(x); }
  static __device__ float decode(Storage v) { return f16_bits_to_f32(v); }
};
template <>
struct FormatTraits<NarrowFormat::kF8E4M3> {
  using Storage = uint8_t;
  static __device__ Storage encode(float x) { return f32_to_e4m3(x); }
  static __device__ float decode(Storage v) { return e4m3_to_f32(v); }
};
template <>
struct FormatTraits<NarrowFormat::kF8E5M2> {
  using Storage = uint8_t;
  static __device__ Storage encode(float x) { return f32_to_e5m2(x); }
  static __device__ float decode(Storage v) { return e5m2_to_f32(v); }
};

template <NarrowFormat kFormat>
__global__ void encode_kernel(const float* __restrict__ src,
                              typename FormatTraits<kFormat>::Storage* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = FormatTraits<kFormat>::encode(src[i]);
  }
}

template <NarrowFormat kFormat>
__global__ void decode_kernel(const typename FormatTraits<kFormat>::Storage* __restrict__ src,
                              float* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[i] = FormatTraits<kFormat>::decode(src[i]);
  }
}

// Packed e2m1: element 2j in the low nibble of byte j. n must be even.
__global__ void encode_e2m1x2_kernel(const float* __restrict__ src, uint8_t* __restrict__ dst,
                                     size_t n_pairs);
__global__ void decode_e2m1x2_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                     size_t n_pairs);

inline unsigned grid_for(size_t n, unsigned threads) {
  size_t blocks = (n + threads - 1) / threads;
  // Grid-stride loops cover the rest; 65535 blocks of 256 threads keep every SM busy.
  return static_cast<unsigned>(blocks < 65535 ? (blocks == 0 ? 1 : blocks) : 65535);
}

template <NarrowFormat kFormat>
cudaError_t launch_encode(const float* src, void* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  encode_kernel<kFormat><<<grid_for(n, 256), 256, 0, stream>>>(
      src, static_cast<typename FormatTraits<kFormat>::Storage*>(dst), n);
  return cudaGetLastError();
}

template <NarrowFormat kFormat>
cudaError_t launch_decode(const void* src, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  decode_kernel<kFormat><<<grid_for(n, 256), 256, 0, stream>>>(
      static_cast<const typename FormatTraits<kFormat>::Storage*>(src), dst, n);
  return cudaGetLastError();
}

}  // namespace locus::cuda
