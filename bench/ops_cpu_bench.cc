// CPU reference ops: how slow the oracle is, so test sizes can be chosen knowingly. Shapes are
// small-model sized; the CPU backend is not meant for full-size models.
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/counter_rng.h"

namespace locus {
namespace {

Tensor random_tensor(const Dims& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape, DType::kF32).value();
  const uint64_t stream = stream_key(seed, 0xBE7C);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = counter_uniform(stream, static_cast<uint64_t>(i)) * 2.0f - 1.0f;
  return t;
}

Tensor i32_tensor(const std::vector<int32_t>& v, const Dims& shape) {
  Tensor t = Tensor::empty(shape, DType::kI32).value();
  std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(int32_t));
  return t;
}

// Rows x 1024 -> 1024, per GEMM engine (0 = OpenBLAS, 1 = batch-invariant).
void BM_Linear(benchmark::State& state) {
  const auto engine =
      state.range(0) == 0 ? cpu::GemmEngine::kOpenBlas : cpu::GemmEngine::kBatchInvariant;
  const int64_t rows = state.range(1);
  CpuBackend backend(CpuBackendOptions{engine, 0, 0});
  LinearWeight w;
  w.weight = random_tensor({1024, 1024}, 1);
  Tensor x = random_tensor({rows, 1024}, 2);
  Tensor out = Tensor::empty({rows, 1024}, DType::kF32).value();
  for (auto _ : state) {
    benchmark::DoNotOptimize(backend.linear(x, w, out));
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows) * 1024 * 1024,
                                                 benchmark::Counter::kIsIterationInvariantRate,
                                                 benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Linear)->ArgsProduct({{0, 1}, {1, 16, 128}})->Unit(benchmark::kMicrosecond);

// Decode: 8 sequences of `context` tokens, 16 query / 4 kv heads of 128.
void BM_PagedAttentionDecode(benchmark::State& state) {
  const int64_t context = state.range(0);
  const int64_t seqs = 8, block_size = 16, q_heads = 16, kv_heads = 4, dim = 128;
  const int64_t blocks_per_seq = (context + block_size - 1) / block_size;
  CpuBackend backend;
  Tensor k_cache = random_tensor({seqs * blocks_per_seq, block_size, kv_heads, dim}, 3);
  Tensor v_cache = random_tensor({seqs * blocks_per_seq, block_size, kv_heads, dim}, 4);
  std::vector<int32_t> qsl, lens, table;
  std::vector<int64_t> slots;
  for (int64_t s = 0; s <= seqs; ++s)
    qsl.push_back(static_cast<int32_t>(s));
  for (int64_t s = 0; s < seqs; ++s) {
    lens.push_back(static_cast<int32_t>(context));
    for (int64_t b = 0; b < blocks_per_seq; ++b)
      table.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
    slots.push_back(s * blocks_per_seq * block_size + context - 1);
  }
  AttentionMetadata m;
  m.block_size = block_size;
  m.query_start_loc = i32_tensor(qsl, {seqs + 1});
  m.seq_lens = i32_tensor(lens, {seqs});
  m.block_table = i32_tensor(table, {seqs, blocks_per_seq});
  m.slot_mapping = Tensor::empty({seqs}, DType::kI64).value();
  std::memcpy(m.slot_mapping.raw_data(), slots.data(), slots.size() * sizeof(int64_t));
  Tensor q = random_tensor({seqs, q_heads, dim}, 5);
  Tensor out = Tensor::empty({seqs, q_heads, dim}, DType::kF32).value();
  AttentionParams params;
  params.scale = 0.088f;
  for (auto _ : state) {
    benchmark::DoNotOptimize(backend.paged_attention(q, k_cache, v_cache, m, params, out));
  }
}
BENCHMARK(BM_PagedAttentionDecode)->Arg(128)->Arg(1024)->Unit(benchmark::kMicrosecond);

// 64 tokens, 32 experts of 512 -> 256 -> 512, top-4.
void BM_MoeExperts(benchmark::State& state) {
  const int64_t tokens = 64, experts = 32, hidden = 512, width = 256, k = 4;
  CpuBackend backend;
  std::vector<ExpertWeights> w(experts);
  for (int64_t e = 0; e < experts; ++e) {
    w[static_cast<size_t>(e)].gate.weight = random_tensor({width, hidden}, 10 + 3 * e);
    w[static_cast<size_t>(e)].up.weight = random_tensor({width, hidden}, 11 + 3 * e);
    w[static_cast<size_t>(e)].down.weight = random_tensor({hidden, width}, 12 + 3 * e);
  }
  std::vector<int32_t> ids;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j)
      ids.push_back(static_cast<int32_t>((t * 7 + j * 5) % experts));
  Tensor topk_ids = i32_tensor(ids, {tokens, k});
  Tensor topk_weights = random_tensor({tokens, k}, 6);
  Tensor x = random_tensor({tokens, hidden}, 7);
  Tensor out = Tensor::empty({tokens, hidden}, DType::kF32).value();
  for (auto _ : state) {
    benchmark::DoNotOptimize(backend.moe_experts(x, topk_ids, topk_weights, w, out));
  }
}
BENCHMARK(BM_MoeExperts)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace locus
