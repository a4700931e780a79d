// Paged attention kernels on the qwen3-30b-a3b attention shape (32 q heads, 4 kv heads,
// head_dim 128, block_size 16, bf16): decode batches at context 1024 + 128 and 1024-token
// prefills. Times each launch with CUDA events (after warm-up), reports the median, and rotates
// among several KV caches so that L2 does not hold them. Prints a SKIP line without a GPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "backend/device.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/attention/attention_launch.h"
#include "core/convert.h"
#endif

namespace {

#ifndef LOCUS_HAS_CUDA

void BM_PagedAttentionGpu(benchmark::State& state) {
  std::printf("attention_gpu_bench: built without CUDA\n");
  state.SkipWithError("built without CUDA");
}
BENCHMARK(BM_PagedAttentionGpu);

#else

constexpr int kQHeads = 32;
constexpr int kKvHeads = 4;
constexpr int kHeadDim = 128;
constexpr int kBlockSize = 16;
constexpr size_t kL2Bytes = 50u << 20;  // H200 L2; the rotation covers three times this

bool gpu_present() {
  static const bool present = !locus::query_devices().gpus.empty();
  return present;
}

// Device allocations of one benchmark, freed on every exit path.
struct DeviceAllocs {
  std::vector<void*> ptrs;
  ~DeviceAllocs() {
    for (void* p : ptrs)
      cudaFree(p);
  }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16)) != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    return p;
  }
};

// Fills `bytes` of device memory with normal bf16 values (a 16 MiB random pattern, repeated):
// real data, never zeros.
bool fill_random_bf16(void* dst, size_t bytes, uint32_t seed) {
  const size_t pattern_elems = (16u << 20) / 2;
  std::vector<float> values(pattern_elems);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : values)
    x = normal(rng);
  std::vector<uint16_t> bits(pattern_elems);
  if (!locus::convert_from_f32(values.data(), locus::DType::kBF16, bits.data(), pattern_elems)
           .is_ok())
    return false;
  for (size_t off = 0; off < bytes; off += pattern_elems * 2) {
    const size_t n = std::min(bytes - off, pattern_elems * 2);
    if (cudaMemcpy(static_cast<char*>(dst) + off, bits.data(), n, cudaMemcpyHostToDevice) !=
        cudaSuccess)
      return false;
  }
  return true;
}

// batch sequences of seq_len tokens each, q_len of them new (1 = decode, seq_len = prefill).
void BM_PagedAttention(benchmark::State& state, int batch, int seq_len, int q_len) {
  if (!gpu_present()) {
    std::printf("SKIP attention_gpu_bench: no CUDA GPU\n");
    state.SkipWithError("no CUDA GPU");
    return;
  }
  const int blocks_per_seq = (seq_len + kBlockSize - 1) / kBlockSize;
  const size_t kv_row_bytes = static_cast<size_t>(kKvHeads) * kHeadDim * 2;
  const size_t set_bytes =
      static_cast<size_t>(batch) * blocks_per_seq * kBlockSize * kv_row_bytes * 2;  // K + V
  const int rotations = static_cast<int>(
      std::clamp<size_t>((3 * kL2Bytes + set_bytes - 1) / set_bytes, size_t{2}, size_t{64}));
  const int64_t total_blocks = static_cast<int64_t>(rotations) * batch * blocks_per_seq;
  const size_t cache_bytes = static_cast<size_t>(total_blocks) * kBlockSize * kv_row_bytes;
  const int num_tokens = batch * q_len;

  DeviceAllocs mem;
  void* k_cache = mem.alloc(cache_bytes);
  void* v_cache = mem.alloc(cache_bytes);
  void* q = mem.alloc(static_cast<size_t>(num_tokens) * kQHeads * kHeadDim * 2);
  void* out = mem.alloc(static_cast<size_t>(num_tokens) * kQHeads * kHeadDim * 2);
  auto* qsl = static_cast<int32_t*>(mem.alloc((static_cast<size_t>(batch) + 1) * 4));
  auto* seq_lens = static_cast<int32_t*>(mem.alloc(static_cast<size_t>(batch) * 4));
  auto* tables =
      static_cast<int32_t*>(mem.alloc(static_cast<size_t>(rotations) * batch * blocks_per_seq * 4));
  if (!k_cache || !v_cache || !q || !out || !qsl || !seq_lens || !tables) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }
  if (!fill_random_bf16(k_cache, cache_bytes, 1) || !fill_random_bf16(v_cache, cache_bytes, 2) ||
      !fill_random_bf16(q, static_cast<size_t>(num_tokens) * kQHeads * kHeadDim * 2, 3)) {
    state.SkipWithError("filling inputs failed");
    return;
  }
  std::vector<int32_t> h_qsl(static_cast<size_t>(batch) + 1), h_lens(static_cast<size_t>(batch));
  for (int s = 0; s <= batch; ++s)
    h_qsl[static_cast<size_t>(s)] = s * q_len;
  std::fill(h_lens.begin(), h_lens.end(), seq_len);
  // Rotation r gives sequence s its own run of blocks, so successive launches read new memory.
  std::vector<int32_t> h_tables(static_cast<size_t>(rotations) * batch * blocks_per_seq);
  for (size_t i = 0; i < h_tables.size(); ++i)
    h_tables[i] = static_cast<int32_t>(i);
  cudaMemcpy(qsl, h_qsl.data(), h_qsl.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(seq_lens, h_lens.data(), h_lens.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(tables, h_tables.data(), h_tables.size() * 4, cudaMemcpyHostToDevice);

  locus::cuda::PagedAttentionArgs a;
  a.q = q;
  a.q_head_stride = kHeadDim;
  a.q_token_stride = static_cast<int64_t>(kQHeads) * kHeadDim;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.k_head_stride = a.v_head_stride = kHeadDim;
  a.k_token_stride = a.v_token_stride = static_cast<int64_t>(kKvHeads) * kHeadDim;
  a.k_block_stride = a.v_block_stride = a.k_token_stride * kBlockSize;
  a.out = out;
  a.query_start_loc = qsl;
  a.seq_lens = seq_lens;
  a.block_table_stride = blocks_per_seq;
  a.num_seqs = batch;
  a.num_tokens = num_tokens;
  a.num_q_heads = kQHeads;
  a.num_kv_heads = kKvHeads;
  a.head_dim = kHeadDim;
  a.v_head_dim = kHeadDim;
  a.block_size = kBlockSize;
  a.scale = 0.08838834764831845f;  // 1 / sqrt(128)
  a.max_query_len = q_len;
  a.max_seq_len = seq_len;
  a.workspace_bytes = locus::cuda::paged_attention_workspace_bytes(a);
  a.workspace = mem.alloc(a.workspace_bytes);
  if (!a.workspace) {
    state.SkipWithError("cudaMalloc failed");
    return;
  }

  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto launch = [&](int rotation) {
    a.block_table = tables + static_cast<size_t>(rotation) * batch * blocks_per_seq;
    return locus::cuda::launch_paged_attention(a, nullptr);
  };
  for (int i = 0; i < 3; ++i) {
    if (launch(i % rotations) != cudaSuccess) {
      state.SkipWithError("launch_paged_attention failed");
      return;
    }
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {
    state.SkipWithError("kernel failed");
    return;
  }

  std::vector<double> seconds;
  int iteration = 0;
  for (auto _ : state) {
    cudaEventRecord(start, nullptr);
    const cudaError_t err = launch(iteration++ % rotations);
    cudaEventRecord(stop, nullptr);
    cudaEventSynchronize(stop);
    if (err != cudaSuccess) {
      state.SkipWithError("launch_paged_attention failed");
      break;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    seconds.push_back(ms * 1e-3);
    state.SetIterationTime(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (seconds.empty()) return;
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  state.counters["median_us"] = median * 1e6;
  state.counters["rotations"] = rotations;
  if (q_len == 1) {
    const double kv_bytes = static_cast<double>(batch) * seq_len * kv_row_bytes * 2;
    state.counters["GB/s"] = kv_bytes / median * 1e-9;
  } else {
    // Causal: new token i of a fresh prefill sees i + 1 keys; QK^T and PV are 2 * 128 flops each.
    const double scores =
        static_cast<double>(batch) * kQHeads * (static_cast<double>(q_len) * (q_len + 1) / 2.0);
    state.counters["TFLOP/s"] = scores * 4.0 * kHeadDim / median * 1e-12;
  }
  if (cudaGetLastError() != cudaSuccess) state.SkipWithError("CUDA error");
}

#define LOCUS_ATTENTION_BENCH(name, batch, seq_len, q_len)          \
  BENCHMARK_CAPTURE(BM_PagedAttention, name, batch, seq_len, q_len) \
      ->UseManualTime()                                             \
      ->Iterations(30)                                              \
      ->Unit(benchmark::kMicrosecond)

LOCUS_ATTENTION_BENCH(decode_b1_ctx1152, 1, 1152, 1);
LOCUS_ATTENTION_BENCH(decode_b8_ctx1152, 8, 1152, 1);
LOCUS_ATTENTION_BENCH(decode_b64_ctx1152, 64, 1152, 1);
LOCUS_ATTENTION_BENCH(decode_b256_ctx1152, 256, 1152, 1);
LOCUS_ATTENTION_BENCH(prefill_1x1024, 1, 1024, 1024);
LOCUS_ATTENTION_BENCH(prefill_8x1024, 8, 1024, 1024);

#endif  // LOCUS_HAS_CUDA

}  // namespace
