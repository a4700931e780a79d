// The decode-time GEMVs of the qwen3-30b-a3b shape, one launch family against the other
// (warp: register streaming, gemv.cuh; stream: bulk copies through shared memory,
// gemv_stream.cuh). Each timed graph replays a rotation of launches over enough weight copies
// (or expert choices) that the weights come from DRAM, not the 60 MB L2, launched back to back
// as in a decode step (programmatic dependent launch on). Counter GB/s = weight bytes per
// launch / time per launch; the H200's copy rate is ~4.3 TB/s. Skipped where no GPU is present.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/device.h"

#ifdef LOCUS_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "core/float_convert.h"
#endif

namespace locus {
namespace {

#ifndef LOCUS_HAS_CUDA

void BM_DenseGemv(benchmark::State& state) {
  state.SkipWithError("built without CUDA");
  for (auto _ : state) {
  }
}
BENCHMARK(BM_DenseGemv);

#else

constexpr size_t kRotationBytes = size_t{256} << 20;  // > 4x the L2

struct Shape {
  const char* name;
  int n;
  int k;
  bool f32_out;
};
// qwen3-30b-a3b: fused QKV (32 + 4 + 4 heads of 128), o, router, lm_head.
const Shape kShapes[] = {{"qkv", 5120, 2048, false},
                         {"o_proj", 2048, 4096, false},
                         {"router", 128, 2048, true},
                         {"lm_head", 151936, 2048, true}};

bool check(benchmark::State& state, cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(err)).c_str());
  return false;
}

// Fills `bytes` of device memory with random bf16 values (tiled from one 32 MB random pool,
// each tile at a different offset so no two copies are identical).
cudaError_t fill_random(void* dst, size_t bytes) {
  constexpr size_t kPoolBytes = size_t{32} << 20;
  static void* pool = nullptr;
  if (pool == nullptr) {
    std::vector<uint16_t> host(kPoolBytes / 2);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist(0.0f, 0.03f);
    for (auto& v : host)
      v = f32_to_bf16_bits(dist(rng));
    if (cudaMalloc(&pool, kPoolBytes) != cudaSuccess) return cudaErrorMemoryAllocation;
    cudaMemcpy(pool, host.data(), kPoolBytes, cudaMemcpyHostToDevice);
  }
  static size_t salt = 0;
  for (size_t done = 0; done < bytes;) {
    salt = (salt + 4099 * 2) % (kPoolBytes / 2);
    size_t chunk = kPoolBytes - salt;
    if (chunk > bytes - done) chunk = bytes - done;
    const cudaError_t err =
        cudaMemcpy(static_cast<char*>(dst) + done, static_cast<char*>(pool) + salt, chunk,
                   cudaMemcpyDeviceToDevice);
    if (err != cudaSuccess) return err;
    done += chunk;
  }
  return cudaSuccess;
}

// Times `launch(i)` for i in [0, count) captured in one graph; returns ms per replay.
template <typename Launch>
void run_graph(benchmark::State& state, int count, Launch launch) {
  cudaStream_t stream;
  if (!check(state, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream")) return;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < count && err == cudaSuccess; ++i)
    err = launch(i, stream);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!check(state, err, "launch") || !check(state, end, "capture") ||
      !check(state, cudaGraphInstantiate(&exec, graph, 0), "instantiate"))
    return;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int w = 0; w < 3; ++w)
    cudaGraphLaunch(exec, stream);
  for (auto _ : state) {
    cudaEventRecord(start, stream);
    cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    state.SetIterationTime(ms / 1e3 / count);  // seconds per launch
  }
  check(state, cudaStreamSynchronize(stream), "replay");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Args: shape index, rows of x, family (0 warp, 1 stream), hot (1: every launch reads the same
// weights, which then sit in L2 -- the time left is the kernel's fixed cost plus L2 reads).
void BM_DenseGemv(benchmark::State& state) {
  if (query_devices().gpus.empty()) {
    state.SkipWithError("no CUDA GPU");
    return;
  }
  const Shape& shape = kShapes[state.range(0)];
  const int m = static_cast<int>(state.range(1));
  const bool stream_family = state.range(2) == 1;
  const bool hot = state.range(3) == 1;
  state.SetLabel(std::string(shape.name) + (stream_family ? " stream" : " warp") +
                 (hot ? " L2-hot" : ""));
  if (stream_family && !cuda::gemv_stream_fits(m, shape.k)) {
    state.SkipWithError("shape does not fit the streaming kernel");
    return;
  }
  const size_t w_bytes = static_cast<size_t>(shape.n) * shape.k * 2;
  const int launches = static_cast<int>(kRotationBytes / w_bytes) + 1;
  const int copies = hot ? 1 : launches;
  std::vector<void*> weights(static_cast<size_t>(copies));
  void* x = nullptr;
  void* y = nullptr;
  for (auto& w : weights) {
    if (!check(state, cudaMalloc(&w, w_bytes), "cudaMalloc")) return;
    if (!check(state, fill_random(w, w_bytes), "fill")) return;
  }
  cudaMalloc(&x, static_cast<size_t>(m) * shape.k * 2);
  fill_random(x, static_cast<size_t>(m) * shape.k * 2);
  cudaMalloc(&y, static_cast<size_t>(m) * shape.n * 4);
  cuda::set_gemv_kernels(stream_family ? cuda::GemvKernels::kStream : cuda::GemvKernels::kWarp);
  run_graph(state, launches, [&](int i, cudaStream_t s) {
    return cuda::launch_gemv(x, shape.k, weights[static_cast<size_t>(i % copies)], y, shape.f32_out,
                             m, shape.n, shape.k, s);
  });
  cuda::set_gemv_kernels(cuda::GemvKernels::kAuto);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w_bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  for (void* w : weights)
    cudaFree(w);
  cudaFree(x);
  cudaFree(y);
}
BENCHMARK(BM_DenseGemv)
    ->ArgsProduct({{0, 1, 2, 3}, {1}, {0, 1}, {0}})
    ->ArgsProduct({{0, 1, 2}, {1}, {0, 1}, {1}})
    ->ArgsProduct({{0}, {8}, {0, 1}, {0}})
    ->UseManualTime()
    ->Iterations(30)  // each run allocates and fills hundreds of MB: one run, fixed replays
    ->Unit(benchmark::kMicrosecond);

// The routed experts of one token (top 8 of 128, hidden 2048, intermediate 768): gate_up then
// down. Each launch in the rotation routes to a different set of 8 experts. Arg: family.
void BM_MoeGemvQwen3(benchmark::State& state) {
  if (query_devices().gpus.empty()) {
    state.SkipWithError("no CUDA GPU");
    return;
  }
  constexpr int kExperts = 128, kTopK = 8, kHidden = 2048, kInter = 768, kSets = 16;
  const bool stream_family = state.range(0) == 1;
  state.SetLabel(stream_family ? "stream" : "warp");
  const size_t m_bytes = static_cast<size_t>(kHidden) * kInter * 2;
  std::vector<void*> owned;
  std::vector<const void*> tables[3];
  for (auto& table : tables) {
    for (int e = 0; e < kExperts; ++e) {
      void* w = nullptr;
      if (!check(state, cudaMalloc(&w, m_bytes), "cudaMalloc")) return;
      if (!check(state, fill_random(w, m_bytes), "fill")) return;
      owned.push_back(w);
      table.push_back(w);
    }
  }
  void* d_tables[3];
  for (int t = 0; t < 3; ++t) {
    cudaMalloc(&d_tables[t], kExperts * sizeof(void*));
    cudaMemcpy(d_tables[t], tables[t].data(), kExperts * sizeof(void*), cudaMemcpyHostToDevice);
  }
  std::vector<int32_t> ids(static_cast<size_t>(kSets) * kTopK);
  for (int s = 0; s < kSets; ++s)
    for (int j = 0; j < kTopK; ++j)
      ids[static_cast<size_t>(s * kTopK + j)] = (s * kTopK + j) % kExperts;  // all 128 in use
  std::vector<float> weights(ids.size(), 0.125f);
  void *d_ids, *d_weights, *x, *out;
  cudaMalloc(&d_ids, ids.size() * 4);
  cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice);
  cudaMalloc(&d_weights, weights.size() * 4);
  cudaMemcpy(d_weights, weights.data(), weights.size() * 4, cudaMemcpyHostToDevice);
  cudaMalloc(&x, kHidden * 2);
  fill_random(x, kHidden * 2);
  cudaMalloc(&out, kHidden * 2);
  cuda::MoeGemvArgs a;
  a.x = x;
  a.x_row_stride = kHidden;
  a.gate_w = static_cast<const void* const*>(d_tables[0]);
  a.up_w = static_cast<const void* const*>(d_tables[1]);
  a.down_w = static_cast<const void* const*>(d_tables[2]);
  a.out = out;
  a.num_tokens = 1;
  a.num_experts = kExperts;
  a.top_k = kTopK;
  a.hidden = kHidden;
  a.inter = kInter;
  a.workspace_bytes = cuda::moe_gemv_workspace_bytes(a);
  void* workspace = nullptr;
  cudaMalloc(&workspace, a.workspace_bytes);
  a.workspace = workspace;
  if (stream_family && !cuda::moe_gemv_stream_fits(a)) {
    state.SkipWithError("shape does not fit the streaming kernels");
    return;
  }
  cuda::set_gemv_kernels(stream_family ? cuda::GemvKernels::kStream : cuda::GemvKernels::kWarp);
  run_graph(state, kSets * 4, [&](int i, cudaStream_t s) {
    cuda::MoeGemvArgs args = a;
    args.topk_ids = static_cast<const int32_t*>(d_ids) + (i % kSets) * kTopK;
    args.topk_weights = static_cast<const float*>(d_weights) + (i % kSets) * kTopK;
    return cuda::launch_moe_gemv(args, s);
  });
  cuda::set_gemv_kernels(cuda::GemvKernels::kAuto);
  state.counters["GB/s"] = benchmark::Counter(3.0 * kTopK * static_cast<double>(m_bytes) / 1e9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  for (void* w : owned)
    cudaFree(w);
  for (void* t : d_tables)
    cudaFree(t);
  for (void* p : {d_ids, d_weights, x, out, workspace})
    cudaFree(p);
}
BENCHMARK(BM_MoeGemvQwen3)
    ->Arg(0)
    ->Arg(1)
    ->UseManualTime()
    ->Iterations(30)
    ->Unit(benchmark::kMicrosecond);

#endif

}  // namespace
}  // namespace locus
