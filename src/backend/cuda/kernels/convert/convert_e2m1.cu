// Packed fp4 e2m1 kernels and the format dispatch of the conversion launchers.
#include "backend/cuda/kernels/convert/convert.cuh"
#include "backend/cuda/kernels/convert/convert_launch.h"

namespace locus::cuda {

__global__ void encode_e2m1x2_kernel(const float* __restrict__ src, uint8_t* __restrict__ dst,
                                     size_t n_pairs) {
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < n_pairs;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[j] = f32x2_to_e2m1x2(src[2 * j], src[2 * j + 1]);
  }
}

__global__ void decode_e2m1x2_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst,
                                     size_t n_pairs) {
  for (size_t j = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; j < n_pairs;
       j += static_cast<size_t>(gridDim.x) * blockDim.x) {
    dst[2 * j] = e2m1_to_f32(unpack_e2m1(src[j], 0));
    dst[2 * j + 1] = e2m1_to_f32(unpack_e2m1(src[j], 1));
  }
}

extern template cudaError_t launch_encode<NarrowFormat::kBF16>(const float*, void*, size_t,
                                                               cudaStream_t);
extern template cudaError_t launch_encode<NarrowFormat::kF16>(const float*, void*, size_t,
                                                              cudaStream_t);
extern template cudaError_t launch_encode<NarrowFormat::kF8E4M3>(const float*, void*, size_t,
                                                                 cudaStream_t);
extern template cudaError_t launch_encode<NarrowFormat::kF8E5M2>(const float*, void*, size_t,
                                                                 cudaStream_t);
extern template cudaError_t launch_decode<NarrowFormat::kBF16>(const void*, float*, size_t,
                                                               cudaStream_t);
extern template cudaError_t launch_decode<NarrowFormat::kF16>(const void*, float*, size_t,
                                                              cudaStream_t);
extern template cudaError_t launch_decode<NarrowFormat::kF8E4M3>(const void*, float*, size_t,
                                                                 cudaStream_t);
extern template cudaError_t launch_decode<NarrowFormat::kF8E5M2>(const void*, float*, size_t,
                                                                 cudaStream_t);

cudaError_t convert_from_f32(const float* src, NarrowFormat format, void* dst, size_t n,
                             cudaStream_t stream) {
  switch (format) {
    case NarrowFormat::kBF16:
      return launch_encode<NarrowFormat::kBF16>(src, dst, n, stream);
    case NarrowFormat::kF16:
      return launch_encode<NarrowFormat::kF16>(src, dst, n, stream);
    case NarrowFormat::kF8E4M3:
      return launch_encode<NarrowFormat::kF8E4M3>(src, dst, n, stream);
    case NarrowFormat::kF8E5M2:
      return launch_encode<NarrowFormat::kF8E5M2>(src, dst, n, stream);
    case NarrowFormat::kF4E2M1:
      if (n % 2 != 0) return cudaErrorInvalidValue;
      if (n == 0) return cudaSuccess;
      encode_e2m1x2_kernel<<<grid_for(n / 2, 256), 256, 0, stream>>>(
          src, static_cast<uint8_t*>(dst), n / 2);
      return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

cudaError_t convert_to_f32(const void* src, NarrowFormat format, float* dst, size_t n,
                           cudaStream_t stream) {
  switch (format) {
    case NarrowFormat::kBF16:
      return launch_decode<NarrowFormat::kBF16>(src, dst, n, stream);
    case NarrowFormat::kF16:
      return launch_decode<NarrowFormat::kF16>(src, dst, n, stream);
    case NarrowFormat::kF8E4M3:
      return launch_decode<NarrowFormat::kF8E4M3>(src, dst, n, stream);
    case NarrowFormat::kF8E5M2:
      return launch_decode<NarrowFormat::kF8E5M2>(src, dst, n, stream);
    case NarrowFormat::kF4E2M1:
      if (n % 2 != 0) return cudaErrorInvalidValue;
      if (n == 0) return cudaSuccess;
      decode_e2m1x2_kernel<<<grid_for(n / 2, 256), 256, 0, stream>>>(
          static_cast<const uint8_t*>(src), dst, n / 2);
      return cudaGetLastError();
  }
  return cudaErrorInvalidValue;
}

}  // namespace locus::cuda
