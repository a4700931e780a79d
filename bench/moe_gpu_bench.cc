// One MoE layer on the GPU at the qwen3-30b-a3b shape (hidden 2048, moe_intermediate 768, 128
// experts, top-8, softmax + renormalize): route random router logits, then run the routed
// experts; timed with CUDA events around both. Counters: expert weight bytes actually touched
// (distinct active experts x 3 matrices) per second, and the useful matrix rate
// (2 * T * k * 3 * hidden * inter FLOPs). Skipped where no GPU is present.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backend/device.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/moe/moe_launch.h"
#include "core/float_convert.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

void BM_MoeLayerQwen3(benchmark::State& state) {
  state.SkipWithError("built without CUDA");
  for (auto _ : state) {
  }
}

#else

constexpr int kHidden = 2048;
constexpr int kInter = 768;
constexpr int kExperts = 128;
constexpr int kTopK = 8;
constexpr int kMaxTokens = 4096;
// Iterations rotate through several routings so that consecutive runs touch different experts
// (at small T one routing's experts would otherwise stay in the 50 MB L2).
constexpr int kRoutingSets = 8;
constexpr int64_t kMatrixElems = int64_t{kHidden} * kInter;

// Device state shared by every benchmark size; built once, freed at process exit.
struct MoeLayer {
  std::string error;
  const void* const* gate_w = nullptr;
  const void* const* up_w = nullptr;
  const void* const* down_w = nullptr;
  void* x = nullptr;
  float* logits = nullptr;   // [kRoutingSets][kMaxTokens][kExperts]
  int32_t* ids = nullptr;    // [kRoutingSets][kMaxTokens][kTopK]
  float* weights = nullptr;  // [kRoutingSets][kMaxTokens][kTopK]
  void* out = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

bool cuda_ok(cudaError_t err, const char* what, std::string& error) {
  if (err == cudaSuccess) return true;
  error = std::string(what) + ": " + cudaGetErrorString(err);
  return false;
}

void* device_alloc(size_t bytes, std::string& error) {
  void* p = nullptr;
  if (!cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc", error)) return nullptr;
  return p;
}

cuda::MoeRouteArgs route_args(const MoeLayer& layer, int set, int tokens) {
  cuda::MoeRouteArgs args;
  args.logits = layer.logits + static_cast<int64_t>(set) * kMaxTokens * kExperts;
  args.topk_ids = layer.ids + static_cast<int64_t>(set) * kMaxTokens * kTopK;
  args.topk_weights = layer.weights + static_cast<int64_t>(set) * kMaxTokens * kTopK;
  args.num_tokens = tokens;
  args.num_experts = kExperts;
  args.top_k = kTopK;
  args.scoring = cuda::MoeScoring::kSoftmax;
  args.topk_method = cuda::MoeTopk::kGreedy;
  args.renormalize = true;
  return args;
}

cuda::MoeExpertsArgs experts_args(const MoeLayer& layer, int set, int tokens) {
  cuda::MoeExpertsArgs args;
  args.x = layer.x;
  args.x_row_stride = kHidden;
  args.topk_ids = layer.ids + static_cast<int64_t>(set) * kMaxTokens * kTopK;
  args.topk_weights = layer.weights + static_cast<int64_t>(set) * kMaxTokens * kTopK;
  args.gate_w = layer.gate_w;
  args.up_w = layer.up_w;
  args.down_w = layer.down_w;
  args.out = layer.out;
  args.num_tokens = tokens;
  args.num_experts = kExperts;
  args.top_k = kTopK;
  args.hidden = kHidden;
  args.inter = kInter;
  args.workspace = layer.workspace;
  args.workspace_bytes = layer.workspace_bytes;
  return args;
}

MoeLayer build_layer() {
  MoeLayer layer;
  std::string& error = layer.error;
  if (!cuda_ok(cudaStreamCreateWithFlags(&layer.stream, cudaStreamNonBlocking), "stream", error)) {
    return layer;
  }
  // Random bf16 pool (32 MB); each expert matrix is its own allocation, copied from a different
  // offset of the pool: real-looking data (never zeros) without generating 1.2 GB on the host.
  const int64_t pool_elems = int64_t{16} << 20;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.03f);
  std::vector<uint16_t> pool(static_cast<size_t>(pool_elems));
  for (auto& v : pool)
    v = f32_to_bf16_bits(normal(rng));
  void* d_pool = device_alloc(pool.size() * 2, error);
  if (d_pool == nullptr) return layer;
  if (!cuda_ok(cudaMemcpy(d_pool, pool.data(), pool.size() * 2, cudaMemcpyHostToDevice),
               "pool upload", error)) {
    return layer;
  }
  std::vector<const void*> matrices[3];
  for (int m = 0; m < 3; ++m) {
    for (int e = 0; e < kExperts; ++e) {
      void* w = device_alloc(static_cast<size_t>(kMatrixElems) * 2, error);
      if (w == nullptr) return layer;
      const int64_t offset = ((m * kExperts + e) * int64_t{40009}) % (pool_elems - kMatrixElems);
      if (!cuda_ok(cudaMemcpy(w, static_cast<const uint16_t*>(d_pool) + offset,
                              static_cast<size_t>(kMatrixElems) * 2, cudaMemcpyDeviceToDevice),
                   "weight copy", error)) {
        return layer;
      }
      matrices[m].push_back(w);
    }
  }
  const void* const** tables[3] = {&layer.gate_w, &layer.up_w, &layer.down_w};
  for (int m = 0; m < 3; ++m) {
    void* table = device_alloc(kExperts * sizeof(void*), error);
    if (table == nullptr) return layer;
    if (!cuda_ok(
            cudaMemcpy(table, matrices[m].data(), kExperts * sizeof(void*), cudaMemcpyHostToDevice),
            "pointer table", error)) {
      return layer;
    }
    *tables[m] = static_cast<const void* const*>(table);
  }

  std::vector<uint16_t> x(static_cast<size_t>(kMaxTokens) * kHidden);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  for (auto& v : x)
    v = f32_to_bf16_bits(unit(rng));
  std::vector<float> logits(static_cast<size_t>(kRoutingSets) * kMaxTokens * kExperts);
  for (auto& v : logits)
    v = unit(rng);
  layer.x = device_alloc(x.size() * 2, error);
  layer.logits = static_cast<float*>(device_alloc(logits.size() * sizeof(float), error));
  const size_t slots = static_cast<size_t>(kRoutingSets) * kMaxTokens * kTopK;
  layer.ids = static_cast<int32_t*>(device_alloc(slots * sizeof(int32_t), error));
  layer.weights = static_cast<float*>(device_alloc(slots * sizeof(float), error));
  layer.out = device_alloc(static_cast<size_t>(kMaxTokens) * kHidden * 2, error);
  if (!error.empty()) return layer;
  if (!cuda_ok(cudaMemcpy(layer.x, x.data(), x.size() * 2, cudaMemcpyHostToDevice), "x", error) ||
      !cuda_ok(cudaMemcpy(layer.logits, logits.data(), logits.size() * sizeof(float),
                          cudaMemcpyHostToDevice),
               "logits", error)) {
    return layer;
  }
  // The workspace of the largest size serves every smaller one.
  layer.workspace_bytes = cuda::moe_experts_workspace_bytes(experts_args(layer, 0, kMaxTokens));
  layer.workspace = device_alloc(layer.workspace_bytes, error);
  return layer;
}

MoeLayer& shared_layer() {
  static MoeLayer layer = build_layer();
  return layer;
}

void BM_MoeLayerQwen3(benchmark::State& state) {
  if (query_devices().gpus.empty()) {
    state.SkipWithError("no CUDA GPU");
    return;
  }
  MoeLayer& layer = shared_layer();
  if (!layer.error.empty()) {
    state.SkipWithError(layer.error.c_str());
    return;
  }
  const int tokens = static_cast<int>(state.range(0));
  std::string error;

  // Warm up every routing set and count its distinct active experts.
  std::vector<int> active(kRoutingSets);
  std::vector<int32_t> ids(static_cast<size_t>(tokens) * kTopK);
  for (int set = 0; set < kRoutingSets; ++set) {
    if (!cuda_ok(cuda::launch_moe_route(route_args(layer, set, tokens), layer.stream), "route",
                 error) ||
        !cuda_ok(cuda::launch_moe_experts(experts_args(layer, set, tokens), layer.stream),
                 "experts", error) ||
        !cuda_ok(
            cudaMemcpyAsync(ids.data(), route_args(layer, set, tokens).topk_ids,
                            ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost, layer.stream),
            "ids", error) ||
        !cuda_ok(cudaStreamSynchronize(layer.stream), "warm-up", error)) {
      state.SkipWithError(error.c_str());
      return;
    }
    active[static_cast<size_t>(set)] =
        static_cast<int>(std::set<int32_t>(ids.begin(), ids.end()).size());
  }

  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const double bytes_per_expert = 3.0 * kMatrixElems * 2;
  double seconds = 0.0;
  double bytes = 0.0;
  int64_t runs = 0;
  for (auto _ : state) {
    const int set = static_cast<int>(runs % kRoutingSets);
    cudaEventRecord(start, layer.stream);
    const cudaError_t route_err =
        cuda::launch_moe_route(route_args(layer, set, tokens), layer.stream);
    const cudaError_t experts_err =
        cuda::launch_moe_experts(experts_args(layer, set, tokens), layer.stream);
    cudaEventRecord(stop, layer.stream);
    if (!cuda_ok(route_err, "route", error) || !cuda_ok(experts_err, "experts", error) ||
        !cuda_ok(cudaEventSynchronize(stop), "sync", error)) {
      state.SkipWithError(error.c_str());
      break;
    }
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3);
    seconds += ms / 1e3;
    bytes += active[static_cast<size_t>(set)] * bytes_per_expert;
    ++runs;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (runs == 0 || seconds <= 0.0) return;
  const double flops = 2.0 * tokens * kTopK * 3.0 * kHidden * kInter * static_cast<double>(runs);
  double mean_active = 0.0;
  for (int a : active)
    mean_active += a;
  state.counters["active_experts"] = mean_active / kRoutingSets;
  state.counters["weight_GB/s"] = bytes / seconds / 1e9;
  state.counters["TFLOP/s"] = flops / seconds / 1e12;
}

#endif  // LOCUS_HAS_CUDA

BENCHMARK(BM_MoeLayerQwen3)
    ->Arg(1)
    ->Arg(8)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace locus
