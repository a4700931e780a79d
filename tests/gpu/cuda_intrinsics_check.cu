// GPU side of cuda_intrinsics_check.h: sweeps inputs through locus's converters and CUDA's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "core/float_convert.h"
#include "cuda_intrinsics_check.h"

namespace locus::gpu_test {
namespace {

constexpr int kEncodeChecks = 7;
constexpr int kChecks = 11;

struct Counters {
  unsigned long long mismatches[kChecks];
  unsigned int first[kChecks];  // smallest mismatching input (f32 bits or code)
};

__device__ bool same_float(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return __float_as_uint(a) == __float_as_uint(b);
}

// Runs check `check` on one input; returns true on a mismatch and both outputs (as bits).
// Encoders of bf16/f16 compare NaN-ness only for NaN inputs: payloads are not part of the contract.
__device__ bool compare(int check, uint32_t input, uint32_t* ours, uint32_t* theirs) {
  const float x = __uint_as_float(input);
  switch (check) {
    case 0: {
      uint16_t o = f32_to_bf16_bits(x), t = __bfloat16_as_ushort(__float2bfloat16_rn(x));
      *ours = o, *theirs = t;
      if (isnan(x)) return !(isnan(bf16_bits_to_f32(o)) && isnan(bf16_bits_to_f32(t)));
      return o != t;
    }
    case 1: {
      uint16_t o = f32_to_f16_bits(x), t = __half_as_ushort(__float2half_rn(x));
      *ours = o, *theirs = t;
      if (isnan(x)) return !(isnan(f16_bits_to_f32(o)) && isnan(f16_bits_to_f32(t)));
      return o != t;
    }
    case 2:
      *ours = f32_to_e4m3(x), *theirs = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
      return *ours != *theirs;
    case 3:
      *ours = f32_to_e5m2(x), *theirs = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2);
      return *ours != *theirs;
    case 4:
      *ours = f32_to_e2m1(x), *theirs = __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) & 0xF;
      return *ours != *theirs;
    case 5:
      *ours = f32_to_ue8m0(x, Ue8m0Rounding::kUp);
      *theirs = __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
      return *ours != *theirs;
    case 6:
      *ours = f32_to_ue8m0(x, Ue8m0Rounding::kDown);
      *theirs = __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero);
      return *ours != *theirs;
    case 7: {
      float o = bf16_bits_to_f32(static_cast<uint16_t>(input));
      float t = __bfloat162float(__ushort_as_bfloat16(static_cast<uint16_t>(input)));
      *ours = __float_as_uint(o), *theirs = __float_as_uint(t);
      return !same_float(o, t);
    }
    case 8: {
      float o = f16_bits_to_f32(static_cast<uint16_t>(input));
      float t = __half2float(__ushort_as_half(static_cast<uint16_t>(input)));
      *ours = __float_as_uint(o), *theirs = __float_as_uint(t);
      return !same_float(o, t);
    }
    case 9:
    case 10: {
      const bool e4 = check == 9;
      auto code = static_cast<__nv_fp8_storage_t>(input);
      float t = __half2float(__half(__nv_cvt_fp8_to_halfraw(code, e4 ? __NV_E4M3 : __NV_E5M2)));
      float o = e4 ? e4m3_to_f32(code) : e5m2_to_f32(code);
      *ours = __float_as_uint(o), *theirs = __float_as_uint(t);
      return !same_float(o, t);
    }
  }
  return true;
}

__global__ void sweep(Counters* c, int first_check, int last_check, uint64_t count) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const auto input = static_cast<uint32_t>(i);
    for (int check = first_check; check <= last_check; ++check) {
      uint32_t ours, theirs;
      if (compare(check, input, &ours, &theirs)) {
        atomicAdd(&c->mismatches[check], 1ull);
        atomicMin(&c->first[check], input);
      }
    }
  }
}

__global__ void explain(const Counters* c, uint32_t* pairs) {
  const int check = threadIdx.x;
  if (check >= kChecks || c->mismatches[check] == 0) return;
  compare(check, c->first[check], &pairs[2 * check], &pairs[2 * check + 1]);
}

}  // namespace

std::vector<FormatCheck> run_exhaustive_conversion_checks(std::string& error) {
  static const char* kNames[kChecks] = {"f32->bf16 (rn)",
                                        "f32->f16 (rn)",
                                        "f32->e4m3 (satfinite)",
                                        "f32->e5m2 (satfinite)",
                                        "f32->e2m1 (rn)",
                                        "f32->ue8m0 (up)",
                                        "f32->ue8m0 (down)",
                                        "bf16->f32",
                                        "f16->f32",
                                        "e4m3->f32",
                                        "e5m2->f32"};
  Counters* counters = nullptr;
  uint32_t* pairs = nullptr;
  auto fail = [&](cudaError_t e, const char* what) {
    error = std::string(what) + ": " + cudaGetErrorString(e);
    cudaFree(counters);
    cudaFree(pairs);
    return std::vector<FormatCheck>{};
  };
  cudaError_t e;
  if ((e = cudaMalloc(&counters, sizeof(Counters))) != cudaSuccess) return fail(e, "cudaMalloc");
  if ((e = cudaMalloc(&pairs, sizeof(uint32_t) * 2 * kChecks)) != cudaSuccess) {
    return fail(e, "cudaMalloc");
  }
  Counters init{};
  for (auto& f : init.first)
    f = ~0u;
  if ((e = cudaMemcpy(counters, &init, sizeof(init), cudaMemcpyHostToDevice)) != cudaSuccess) {
    return fail(e, "cudaMemcpy");
  }
  const uint64_t all_f32 = 1ull << 32;
  sweep<<<132 * 16, 256>>>(counters, 0, kEncodeChecks - 1, all_f32);
  sweep<<<256, 256>>>(counters, 7, 8, 65536);
  sweep<<<1, 256>>>(counters, 9, 10, 256);
  explain<<<1, 32>>>(counters, pairs);
  if ((e = cudaGetLastError()) != cudaSuccess) return fail(e, "launch");
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return fail(e, "kernels");

  Counters result{};
  uint32_t host_pairs[2 * kChecks] = {};
  if ((e = cudaMemcpy(&result, counters, sizeof(result), cudaMemcpyDeviceToHost)) != cudaSuccess ||
      (e = cudaMemcpy(host_pairs, pairs, sizeof(host_pairs), cudaMemcpyDeviceToHost)) !=
          cudaSuccess) {
    return fail(e, "cudaMemcpy back");
  }
  cudaFree(counters);
  cudaFree(pairs);

  std::vector<FormatCheck> checks;
  for (int i = 0; i < kChecks; ++i) {
    FormatCheck c;
    c.name = kNames[i];
    c.inputs = i < kEncodeChecks ? all_f32 : (i < 9 ? 65536 : 256);
    c.mismatches = result.mismatches[i];
    if (c.mismatches > 0) {
      c.first_input = result.first[i];
      c.locus_output = host_pairs[2 * i];
      c.cuda_output = host_pairs[2 * i + 1];
    }
    checks.push_back(c);
  }
  return checks;
}

}  // namespace locus::gpu_test
