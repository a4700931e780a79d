// The CPU reference backend: the oracle every GPU kernel is checked against, and the backend CI
// runs whole models on. Plain loops in f32 (attention softmax in f64) written to be read;
// weights are widened to dense f32 once at load. Speed is secondary: it serves tiny test models
// in seconds, and refuses (before allocating) models whose f32 weights do not fit in memory.
//
// The op implementations are split by family: gemm.cc (linear), elementwise.cc (embedding,
// norms, rope, activations), attention.cc (paged GQA), mla_attention.cc, moe.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backend/cpu/kernels.h"
#include "backend/cpu/thread_pool.h"
#include "backend/ops.h"

namespace locus {

struct CpuBackendOptions {
  // kOpenBlas (default) is fast; kBatchInvariant makes every row's result independent of the
  // batch it is in, bit for bit (used by the batch-invariance tests).
  cpu::GemmEngine gemm_engine = cpu::GemmEngine::kOpenBlas;
  // Threads for the loops locus runs itself (OpenBLAS has its own); 0 = hardware concurrency.
  int num_threads = 0;
  // Weight budget; 0 = 80% of physical memory.
  uint64_t weight_memory_budget_bytes = 0;
  // Emulates the CUDA backend's numerics: every activation an op reads is first rounded to bf16
  // (what the GPU stores), while accumulation stays f32 and router logits stay f32 (the GPU
  // writes them in f32). Tests use it to tell format effects (routing flips on near-ties) from
  // kernel bugs.
  bool bf16_activations = false;
};

class CpuBackend : public Ops {
 public:
  explicit CpuBackend(const CpuBackendOptions& options = {});
  ~CpuBackend() override;

  std::string name() const override;
  Device device() const override { return Device::cpu(); }
  DType activation_dtype() const override { return DType::kF32; }
  DType kv_cache_dtype() const override { return DType::kF32; }
  uint64_t weight_memory_budget_bytes() const override { return weight_budget_; }
  uint64_t prepared_weight_bytes(DType dtype, int64_t numel) const override;

  const CpuBackendOptions& options() const { return options_; }

  // The sampler's own logits processors, so engine paths that sample "on the device" run (and
  // are tested) on the CPU too, with results identical to the host sampler.
  bool supports_sampling() const override { return true; }
  Status sample_rows(const Tensor& logits, std::span<const SamplingRowParams> rows,
                     std::span<int32_t> tokens) override;

 protected:
  Expected<Tensor> do_empty(const Dims& shape, DType dtype) override;
  Status do_fill_zero(Tensor& t) override;
  Expected<Tensor> do_to_device(const Tensor& host) override;
  Expected<Tensor> do_to_host(const Tensor& tensor) override;
  Expected<LinearWeight> do_prepare_linear(const LinearWeight& host) override;
  Expected<Tensor> do_prepare_weight(const Tensor& host) override;

  Status do_embedding(const Tensor& table, const Tensor& token_ids, Tensor& out) override;
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
  Status do_copy(const Tensor& src, Tensor& dst) override;
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
  Status do_moe_route(const Tensor& router_logits, const Tensor& correction_bias,
                      const MoeRouting& routing, Tensor& topk_ids, Tensor& topk_weights) override;
  Status do_moe_dispatch_plan(const Tensor& topk_ids, const Tensor& topk_weights,
                              const Tensor& expert_owner, int64_t ranks, int64_t capacity,
                              Tensor& send_index, Tensor& send_ids, Tensor& send_weights,
                              Tensor& combine_index) override;
  Status do_moe_experts(const Tensor& x, const Tensor& topk_ids, const Tensor& topk_weights,
                        std::span<const ExpertWeights> experts, Tensor& out) override;

 private:
  cpu::Context context() { return {options_.gemm_engine, pool_.get()}; }
  // With bf16_activations: a copy of `t` rounded to bf16 values (else `t`), and the in-place form
  // for the ops that update their input.
  Tensor act(const Tensor& t) const;
  void round_act_in_place(Tensor& t) const;

  CpuBackendOptions options_;
  uint64_t weight_budget_ = 0;
  std::unique_ptr<cpu::ThreadPool> pool_;
};

}  // namespace locus
