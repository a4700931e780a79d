// The CUDA backend for Hopper: bf16 activations and KV cache, cuBLASLt GEMMs, our own kernels
// for everything else (kernels/: elementwise, attention, moe). Every op is issued on one compute
// stream with no host synchronization except to_host, so a whole forward can be captured in a
// CUDA graph (capture_graph). Per-op tensors come from a caching allocator (device_allocator.h).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/kernels/elementwise/elementwise_launch.h"
#include "backend/cuda/kernels/gemv/gemv_launch.h"
#include "backend/cuda/runtime/cublas_gemm.h"
#include "backend/cuda/runtime/device_allocator.h"
#include "backend/cuda/runtime/op_profiler.h"
#include "backend/ops.h"

namespace locus {

namespace cuda {
struct GemvAddRmsNorm;
}

struct CudaBackendOptions {
  int device_index = 0;
  // Fraction of the GPU's total memory locus may use for weights, activations and KV cache
  // (vLLM's --gpu-memory-utilization).
  double gpu_memory_utilization = 0.9;
  // Decode-sized linears (<= 8 rows) and routed experts (<= 32 token-expert pairs) through the
  // GEMV kernels (kernels/gemv/) instead of cuBLASLt / the grouped GEMMs. LOCUS_CUDA_GEMV=0 in
  // the environment turns it off (for A/B measurements).
  bool small_batch_gemv = true;
  // The folded MoE router at decode (gemv_fold_route.cuh): for softmax routing without a bias,
  // the router runs beside the attention's o projection instead of after it, and the expert
  // launches finish the routing. LOCUS_CUDA_FOLD_ROUTER=0 / 1 overrides (A/B measurements).
  bool fold_router = true;
};

// A captured sequence of GPU work, replayed on the backend's stream with fixed addresses.
class CudaGraph final : public Ops::Graph {
 public:
  // `profiler` (may be null) times each replay as one op, so graph-mode steps can be split into
  // GPU time and host time.
  CudaGraph(cudaGraph_t graph, cudaGraphExec_t exec, cudaStream_t stream,
            cuda::OpProfiler* profiler)
      : graph_(graph), exec_(exec), stream_(stream), profiler_(profiler) {}
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph() override;
  Status replay() override;

 private:
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  cuda::OpProfiler* profiler_;
};

class CudaBackend : public Ops {
 public:
  // Fails with a clear message when no usable GPU exists (no driver, index out of range).
  static Expected<std::unique_ptr<CudaBackend>> create(const CudaBackendOptions& options = {});
  ~CudaBackend() override;

  std::string name() const override;
  Device device() const override { return Device::cuda(options_.device_index); }
  DType activation_dtype() const override { return DType::kBF16; }
  DType kv_cache_dtype() const override { return DType::kBF16; }
  uint64_t weight_memory_budget_bytes() const override;
  uint64_t prepared_weight_bytes(DType dtype, int64_t numel) const override;

  cudaStream_t stream() const { return stream_; }
  // Makes this backend's GPU the calling thread's current device: a thread that drives several
  // backends (or a rank's worker thread) calls it before using this one.
  Status make_current();
  Status synchronize();
  cuda::AllocatorStats memory_stats() const { return allocator_->stats(); }
  void reset_peak_memory() { allocator_->reset_peak(); }
  uint64_t total_memory_bytes() const { return total_memory_; }
  // Device memory reserved by weight slabs (what the loaded weights occupy).
  uint64_t weight_memory_bytes() const { return weight_bytes_; }
  // Bytes of GPU memory not held by this process's allocator or anyone else right now.
  uint64_t free_memory_bytes() const;

  // Device-to-device copy bandwidth, (bytes read + bytes written) / time, median of 10 copies
  // of `bytes` timed with events: the HBM ceiling rooflines are drawn against (METHOD.md).
  Expected<double> measure_copy_bandwidth(size_t bytes = size_t{2} << 30);

  Expected<std::optional<Tensor>> random_uniform_weight(const Dims& shape, DType dtype,
                                                        uint64_t stream, float low,
                                                        float high) override;

  // The per-op GPU time table since the last call (empty unless LOCUS_CUDA_OP_PROFILE=1).
  std::string take_op_profile();

  // Greedy and temperature/min-p/top-k/top-p draws on the GPU (cuda_sampling.cc): only the
  // tokens cross to the host.
  bool supports_sampling() const override { return true; }
  Status sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                     std::span<int32_t> tokens) override;
  // Async scheduling: the draw and the copy of its tokens to pinned memory are queued on the
  // stream with an event behind them; collect_sampled waits on that event only.
  Status sample_rows_async(const Tensor& logits, std::span<const SamplingRowParams> rows,
                           int slot) override;
  Status collect_sampled(int slot, std::span<int32_t> tokens) override;
  Status copy_sampled_tokens(int slot, Tensor& dst) override;
  Expected<std::shared_ptr<uint8_t[]>> host_staging(size_t bytes) override;

  bool supports_graphs() const override { return true; }
  // Stream capture of `body` (relaxed mode: the warm-up run has made every allocation and plan).
  Expected<std::unique_ptr<Graph>> capture_graph(const std::function<Status()>& body) override;
  // Host -> device copy ordered on the compute stream (refills a captured graph's inputs).
  Status copy_into(const void* host, Tensor& dst, size_t bytes) override;

 protected:
  // For subclasses that watch the ops (tests): construct, then initialize() before any use;
  // create() is exactly that.
  explicit CudaBackend(const CudaBackendOptions& options) : options_(options) {}
  Status initialize();

  Expected<Tensor> do_empty(const Dims& shape, DType dtype) override;
  Status do_fill_zero(Tensor& t) override;
  Expected<Tensor> do_to_device(const Tensor& host) override;
  Expected<Tensor> do_to_host(const Tensor& tensor) override;
  Expected<LinearWeight> do_prepare_linear(const LinearWeight& host) override;
  Expected<Tensor> do_prepare_weight(const Tensor& host) override;

  Status do_embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) override;
  Status do_embedding_rms_norm(const Tensor& table, const Tensor& token_ids, const Tensor& weight,
                               float eps, Tensor& residual, Tensor& normed) override;
  Status do_linear(const Tensor& x, const LinearWeight& w, Tensor& out) override;
  Status do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override;
  Status do_sum_squares(const Tensor& x, Tensor& out) override;
  Status do_split_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& sum_squares,
                           int64_t width, float eps, Tensor& out) override;
  Status do_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                         Tensor& residual_out, Tensor& out) override;
  Status do_rope(Tensor& x, const Tensor& positions, const RopeParams& params) override;
  Status do_silu_and_mul(const Tensor& gate, const Tensor& up, Tensor& out) override;
  Status do_add(const Tensor& a, const Tensor& b, Tensor& out) override;
  Status do_gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override;
  Status do_gather_sum_rows(const Tensor& x, const Tensor& index, Tensor& out) override;
  // cuda_fused.cc: the copy and the fused ops.
  Status do_copy(const Tensor& src, Tensor& dst) override;
  Status do_merged_linear(const Tensor& x, std::span<const LinearWeight* const> parts,
                          Tensor& out) override;
  Status do_add_rms_norm_merged_linear(const AddRmsNorm& step,
                                       std::span<const LinearWeight* const> parts,
                                       Tensor& out) override;
  Status do_add_rms_norm_moe_router(const AddRmsNorm& step, const LinearWeight& router,
                                    const Tensor& correction_bias, const MoeRouting& routing,
                                    Tensor& router_logits, Tensor& topk_ids,
                                    Tensor& topk_weights) override;
  Status do_linear_add_rms_norm_moe_router(const Tensor& x, const LinearWeight& proj,
                                           const AddRmsNorm& step, const LinearWeight& router,
                                           const Tensor& correction_bias, const MoeRouting& routing,
                                           Tensor& router_logits, Tensor& topk_ids,
                                           Tensor& topk_weights, bool experts_follow) override;
  Status do_qkv_norm_rope_write_kv(const Tensor& qkv, const QkvSpec& spec, const Tensor& positions,
                                   const RopeParams& rope, const Tensor& slot_mapping,
                                   Tensor& k_cache, Tensor& v_cache, Tensor& q_out) override;
  Status do_write_kv_cache(const Tensor& k, const Tensor& v, const Tensor& slot_mapping,
                           Tensor& k_cache, Tensor& v_cache) override;
  Status do_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttentionMetadata& metadata, const AttentionParams& params,
                            Tensor& out) override;
  Status do_write_mla_cache(const Tensor& latent, const Tensor& k_pe, const Tensor& slot_mapping,
                            Tensor& cache) override;
  Status do_mla_attention(const Tensor& q, const Tensor& cache, const LinearWeight& kv_b_proj,
                          const AttentionMetadata& metadata, const MlaParams& params,
                          Tensor& out) override;
  Status do_moe_router(const Tensor& x, const LinearWeight& router, const Tensor& correction_bias,
                       const MoeRouting& routing, Tensor& router_logits, Tensor& topk_ids,
                       Tensor& topk_weights) override;
  Status do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                      const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) override;
  Status do_moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                              const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                              Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                              Tensor& combine_index) override;
  Status do_moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                        std::span<const ExpertWeights> experts, Tensor& out) override;

 private:
  // Weights come from 256 MiB slabs (sub-allocated, 256-byte aligned) instead of one cudaMalloc
  // each: the driver rounds every allocation up to 2 MiB, which would waste a third of a
  // 3 MiB expert matrix. A slab is freed when the last tensor in it is gone.
  Expected<Tensor> empty_weight(const Dims& shape, DType dtype);
  Expected<Tensor> upload(const Tensor& host, bool weight);
  // `t` as a device tensor of `dtype` (converting on the host when needed); `weight` puts new
  // device copies in the weight slabs.
  Expected<Tensor> ensure_device(const Tensor& t, DType dtype, bool weight = false);
  Expected<LinearWeight> ensure_prepared(const LinearWeight& w);
  Status launch_attention(const Tensor& q, const Tensor& k_cache, int64_t k_block_stride,
                          int64_t k_token_stride, int64_t k_head_stride, const void* v_data,
                          int64_t v_block_stride, int64_t v_token_stride, int64_t v_head_stride,
                          int64_t num_kv_heads, int64_t head_dim, int64_t v_head_dim,
                          const AttentionMetadata& metadata, float scale, int64_t sliding_window,
                          Tensor& out);
  // The GQA step's kernel arguments; `keep` holds the device copies they point into.
  Expected<cuda::QkvRopeArgs> qkv_rope_args(const Tensor& qkv, const QkvSpec& spec,
                                            const Tensor& positions, const RopeParams& rope,
                                            const Tensor& slot_mapping, Tensor& k_cache,
                                            Tensor& v_cache, Tensor& q_out,
                                            std::vector<Tensor>& keep);
  // The device array of the experts' gate, up and down weight pointers (3 x E, null for experts
  // on another rank), then, when some expert is on another rank, E int32 local_of entries (e or
  // -1) for launch_moe_local_ids. Uploaded once per expert list.
  struct ExpertTable {
    Tensor table;
    const int32_t* local_of = nullptr;  // null when this rank holds every expert
    int64_t inter = 0;                  // the experts' intermediate width
  };
  Expected<ExpertTable> expert_pointer_table(std::span<const ExpertWeights> experts);
  // The pre-norm step as a GEMV prologue's arguments (cuda_fused.cc); false when the step's
  // tensors are not contiguous bf16 GPU rows (the caller then runs the two ops). `weight` gets
  // the norm weight's device copy that `pre` points into: the caller holds it until its launch
  // is enqueued, since a host weight's upload is a temporary.
  Expected<bool> gemv_pre_norm(const AddRmsNorm& step, cuda::GemvAddRmsNorm& pre, Tensor& weight);
  // The fused router GEMV + routing launch shared by moe_router and add_rms_norm_moe_router
  // (cuda_moe.cc); cudaErrorNotSupported (already cleared) means: run the composed ops.
  Expected<cudaError_t> launch_router_gemv(const void* x, int64_t x_stride, int64_t m, int64_t k,
                                           const LinearWeight& router_in,
                                           const Tensor& correction_bias, const MoeRouting& routing,
                                           Tensor& router_logits, Tensor& topk_ids,
                                           Tensor& topk_weights, const cuda::GemvAddRmsNorm* pre);
  // The folded router (CudaBackendOptions::fold_router): false when it does not apply.
  Expected<bool> fold_route(const Tensor& x, const LinearWeight& proj, const AddRmsNorm& step,
                            const LinearWeight& router, const Tensor& correction_bias,
                            const MoeRouting& routing, Tensor& router_logits, Tensor& topk_ids,
                            Tensor& topk_weights);
  // Paged attention's split-KV merge counters (attention_launch.h), made on first use.
  static constexpr size_t kSplitCounterSlots = size_t{1} << 20;
  // The last slot belongs to the fused router (moe_router); attention splits get the rest.
  static constexpr size_t kRouterCounterSlot = kSplitCounterSlots - 1;
  // The folded router's weights of one MoE layer (gemv_fold_route.cuh), keyed by the prepared
  // router weight, which the entry holds so that its address cannot name another router later;
  // made on the first call outside graph capture.
  struct FoldedRouter {
    Tensor router;
    Tensor mf;  // bf16 [E, k]: (Wr * g) Wo
    Tensor wg;  // bf16 [E, n]: Wr * g
  };
  std::unordered_map<const void*, FoldedRouter> folded_routers_;
  static constexpr int64_t kFoldMaxTokens = 1;
  // What a folded router leaves to the next moe_experts call: its pre-norm step and weights.
  struct PendingFold {
    const void* normed = nullptr;
    Tensor raw;          // f32 [T, E]: the raw logits, read by both expert launches
    Tensor norm_weight;  // f32 [n] on the device: the pre-norm's weight (args.pre.weight)
    cuda::MoeFoldArgs args;
  };
  std::optional<PendingFold> pending_fold_;
  Expected<int*> split_counters();
  Tensor split_counters_;
  // A rope's inv_freq on the device (uploaded once per RopeParams).
  Expected<Tensor> rope_table(const RopeParams& params);

  struct Slab;
  // A timing scope for one op when LOCUS_CUDA_OP_PROFILE is set (and nothing is capturing).
  cuda::OpProfiler::Scope profile(const char* op, int64_t rows, int64_t cols = 0);
  std::unique_ptr<cuda::OpProfiler> profiler_;
  CudaBackendOptions options_;
  std::shared_ptr<Slab> slab_;  // the weight slab being filled
  uint64_t weight_bytes_ = 0;
  std::shared_ptr<cuda::DeviceAllocator> allocator_;
  cudaStream_t stream_ = nullptr;
  Tensor gemm_workspace_;
  std::unique_ptr<cuda::CublasGemm> gemm_;
  uint64_t total_memory_ = 0;
  std::string device_name_;
  // Host data uploaded once and reused (keyed by the host pointer, checked against the bytes so
  // a new host object at a recycled address is never served stale data): rope inv_freq tables,
  // and the device arrays of expert weight pointers (gate, up, down) of each expert list.
  struct CachedUpload {
    std::vector<uint64_t> key_bytes;
    Tensor device;
  };
  Expected<Tensor> cached_upload(std::unordered_map<const void*, CachedUpload>& cache,
                                 const void* key, std::vector<uint64_t> key_bytes,
                                 const Tensor& host);
  std::unordered_map<const void*, CachedUpload> rope_tables_;
  std::unordered_map<const void*, CachedUpload> expert_tables_;
  // sample_rows: pinned host staging (params out, tokens back) and its device twins, one set
  // per token slot (sample_rows uses slot 0; async scheduling alternates, so a step's params
  // and tokens are not overwritten while the step before it is still queued).
  struct SamplingBuffers {
    size_t capacity_rows = 0;
    SamplingRowParams* host_params[2] = {nullptr, nullptr};  // pinned
    int32_t* host_tokens[2] = {nullptr, nullptr};            // pinned
    Tensor device_params[2];
    Tensor device_tokens[2];
    size_t drawn[2] = {0, 0};                   // rows of the slot's last draw
    cudaEvent_t ready[2] = {nullptr, nullptr};  // the slot's tokens are in host_tokens
    Tensor workspace;
    Tensor argmax_counters;  // i32 [capacity_rows], zeroed at allocation (launch_argmax_rows)
    Tensor argmax_partials;
    ~SamplingBuffers() {
      for (int i = 0; i < 2; ++i) {
        if (host_params[i] != nullptr) cudaFreeHost(host_params[i]);
        if (host_tokens[i] != nullptr) cudaFreeHost(host_tokens[i]);
        if (ready[i] != nullptr) cudaEventDestroy(ready[i]);
      }
    }
  };
  std::unique_ptr<SamplingBuffers> sampling_;
  // Queues the draw of `rows` into slot `slot` and the copy of its tokens to pinned memory.
  Status launch_sampling(const Tensor& logits, std::span<const SamplingRowParams> rows, int slot);
};

}  // namespace locus
