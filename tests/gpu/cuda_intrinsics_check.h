// Exhaustive checks of core/float_convert.h against CUDA's own conversion routines, run on the
// GPU (tests/gpu/cuda_intrinsics_check.cu). Host-callable; only built with CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace locus::gpu_test {

struct FormatCheck {
  std::string name;     // "f32->e4m3 (satfinite)"
  uint64_t inputs = 0;  // how many inputs were compared
  uint64_t mismatches = 0;
  uint32_t first_input = 0;   // bits of the first mismatching input (when mismatches > 0)
  uint32_t locus_output = 0;  // what locus produced for it
  uint32_t cuda_output = 0;   // what CUDA produced
};

// Every one of the 2^32 f32 bit patterns through locus's encoders and CUDA's
// (__float2bfloat16_rn, __float2half_rn, __nv_cvt_float_to_fp8 SATFINITE e4m3/e5m2,
// __nv_cvt_float_to_fp4 e2m1, __nv_cvt_float_to_e8m0 SATFINITE up/down); then every code of
// the 8- and 16-bit formats through both decoders. NaN outputs compare equal when both are NaN.
// Returns an empty vector and sets `error` when a CUDA call fails.
std::vector<FormatCheck> run_exhaustive_conversion_checks(std::string& error);

}  // namespace locus::gpu_test
