// CpuBackend's bf16-activation emulation: op inputs rounded to bf16 where the CUDA backend reads
// bf16 activations, so the reference computes on the same values the GPU sees (see
// CpuBackendOptions::bf16_activations).
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace locus {
namespace {

float round_bf16(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7F800000u) == 0x7F800000u) return v;  // inf and NaN stay as they are
  u += 0x7FFFu + ((u >> 16) & 1u);                 // round to nearest even
  u &= 0xFFFF0000u;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// Calls fn on every element of an f32 tensor of any strides, in row-major order.
template <typename Fn>
void for_each_f32(const Tensor& t, Fn&& fn) {
  const int nd = t.ndim();
  if (t.numel() == 0) return;
  std::vector<int64_t> index(static_cast<size_t>(nd), 0);
  float* base = t.data<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < nd; ++d)
      offset += index[static_cast<size_t>(d)] * t.stride(d);
    fn(base[offset]);
    for (int d = nd - 1; d >= 0; --d) {
      if (++index[static_cast<size_t>(d)] < t.size(d)) break;
      index[static_cast<size_t>(d)] = 0;
    }
  }
}

}  // namespace

Tensor CpuBackend::act(const Tensor& t) const {
  if (!options_.bf16_activations || !t.defined() || t.dtype() != DType::kF32) return t;
  auto copy = Tensor::empty(t.shape(), DType::kF32);
  if (!copy) return t;
  float* dst = copy->data<float>();
  for_each_f32(t, [&](float& v) { *dst++ = round_bf16(v); });
  return *copy;
}

void CpuBackend::round_act_in_place(Tensor& t) const {
  if (!options_.bf16_activations || !t.defined() || t.dtype() != DType::kF32) return;
  for_each_f32(t, [](float& v) { v = round_bf16(v); });
}

}  // namespace locus
