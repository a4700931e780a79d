// Host-side bulk conversion between float dtypes, for checkpoint loaders, dummy weights and the
// CPU reference. Every element goes through the exact scalar routines of core/float_convert.h, so
// results agree bit for bit with the GPU conversions. Never touches device memory.
//
// Layout and rounding rules:
//  - f4_e2m1 is packed two per byte, element 2i in the low nibble; n elements take (n + 1) / 2
//    bytes. For odd n the high nibble of the last byte is written as 0 and ignored on reading.
//  - Narrowing rounds to nearest even and saturates fp8/fp4 as described in float_convert.h;
//    f32 -> ue8m0 rounds up (Ue8m0Rounding::kUp), the DeepSeek/DeepGEMM rule for scales, which
//    is exact for values that are already powers of two.
//  - f64 -> f32 rounds to nearest even. f64 -> a format narrower than f32 rounds once (through an
//    f32 rounded to odd, which keeps the final nearest-even rounding exact), never twice.
#pragma once

#include <cstddef>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace locus {

// Dtypes the functions below accept: f32, f16, bf16, f8_e4m3, f8_e5m2, f4_e2m1, ue8m0, f64.
bool is_convertible_dtype(DType dtype);

// Decodes `n` elements of `src_dtype` at `src` into `dst`. Exact for every dtype except f64.
Status convert_to_f32(DType src_dtype, const void* src, float* dst, size_t n);

// Encodes `n` floats into `dst_dtype` at `dst` (dtype_bytes(dst_dtype, n) bytes).
Status convert_from_f32(const float* src, DType dst_dtype, void* dst, size_t n);

// Converts every element of `src` into `dst`: both contiguous host tensors of the same shape and
// convertible dtypes. Same dtype copies the bytes.
Status convert_tensor(const Tensor& src, Tensor& dst);

}  // namespace locus
