// Host entry points of the conversion kernels: device pointers in, launch status out.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace locus::cuda {

enum class NarrowFormat : int { kBF16, kF16, kF8E4M3, kF8E5M2, kF4E2M1 };

// dst/src hold n elements of `format` (packed e2m1: n/2 bytes, n even).
cudaError_t convert_from_f32(const float* src, NarrowFormat format, void* dst, size_t n,
                             cudaStream_t stream);
cudaError_t convert_to_f32(const void* src, NarrowFormat format, float* dst, size_t n,
                           cudaStream_t stream);

}  // namespace locus::cuda
