// Throughput of the host bulk conversions in core/convert.h, which loaders and dummy weights use.
// Bytes processed count both sides (bytes read + bytes written), i.e. the memory traffic.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/convert.h"

namespace locus {
namespace {

constexpr size_t kElements = size_t{16} << 20;  // 16M: far beyond the caches, like a weight

// Values spread over e4m3's range with both signs, so no encoder takes a single branch.
std::vector<float> random_floats() {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-500.0f, 500.0f);
  std::vector<float> values(kElements);
  for (float& v : values)
    v = value(rng);
  return values;
}

void run_from_f32(benchmark::State& state, DType dtype) {
  const std::vector<float> src = random_floats();
  std::vector<uint8_t> dst(dtype_bytes(dtype, kElements));
  for (auto _ : state) {
    if (!convert_from_f32(src.data(), dtype, dst.data(), kElements).is_ok()) std::abort();
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const auto bytes = static_cast<int64_t>(kElements * sizeof(float) + dst.size());
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kElements));
}

void run_to_f32(benchmark::State& state, DType dtype) {
  const std::vector<float> values = random_floats();
  std::vector<uint8_t> src(dtype_bytes(dtype, kElements));
  if (!convert_from_f32(values.data(), dtype, src.data(), kElements).is_ok()) std::abort();
  std::vector<float> dst(kElements);
  for (auto _ : state) {
    if (!convert_to_f32(dtype, src.data(), dst.data(), kElements).is_ok()) std::abort();
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const auto bytes = static_cast<int64_t>(src.size() + kElements * sizeof(float));
  state.SetBytesProcessed(state.iterations() * bytes);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kElements));
}

void BM_F32ToBf16(benchmark::State& state) {
  run_from_f32(state, DType::kBF16);
}
void BM_Bf16ToF32(benchmark::State& state) {
  run_to_f32(state, DType::kBF16);
}
void BM_F32ToE4m3(benchmark::State& state) {
  run_from_f32(state, DType::kF8E4M3);
}
void BM_E4m3ToF32(benchmark::State& state) {
  run_to_f32(state, DType::kF8E4M3);
}

BENCHMARK(BM_F32ToBf16)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Bf16ToF32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_F32ToE4m3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_E4m3ToF32)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace locus
