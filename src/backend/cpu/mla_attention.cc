// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) over the paged latent cache, in the
// plain "expanded" form: every step re-expands each cached latent c_j into per-head
// k_nope_{j,h} and v_{j,h} through kv_b_proj, then runs ordinary attention with the shared
// rotated key k_pe_j appended to every head's key. Correct first; O(context * rank * heads)
// per step.
//
// The fast form for GPUs (later) absorbs kv_b_proj instead: with W_UK_h, W_UV_h the k and v
// slices of head h, q_nope_h . (W_UK_h c_j) = (W_UK_h^T q_nope_h) . c_j, so scores read the
// latent directly, and sum_j p_j W_UV_h c_j = W_UV_h (sum_j p_j c_j): attention runs in the
// latent space (an MQA with head dim kv_lora_rank + rope) and W_UV is applied once per token.
// Mathematically equal; a parity test between the two forms belongs with that kernel.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "backend/cpu/attention_common.h"
#include "backend/cpu/cpu_backend.h"

namespace locus {

Status CpuBackend::do_write_mla_cache(const Tensor& latent_in, const Tensor& k_pe_in,
                                      const Tensor& slot_mapping, Tensor& cache) {
  const Tensor latent = act(latent_in);
  const Tensor k_pe = act(k_pe_in);
  const int64_t num_slots = cache.size(0) * cache.size(1);
  LOCUS_RETURN_IF_ERROR(cpu::check_slots(slot_mapping, num_slots, "write_mla_cache"));
  const int64_t rank = latent.size(1);
  const int64_t rope = k_pe.size(1);
  const int64_t entry = rank + rope;
  const int64_t* slots = slot_mapping.data<int64_t>();
  for (int64_t t = 0; t < latent.size(0); ++t) {
    float* dst = cache.data<float>() + slots[t] * entry;
    std::memcpy(dst, latent.data<float>() + t * latent.stride(0),
                static_cast<size_t>(rank) * sizeof(float));
    std::memcpy(dst + rank, k_pe.data<float>() + t * k_pe.stride(0),
                static_cast<size_t>(rope) * sizeof(float));
  }
  return Status::ok();
}

Status CpuBackend::do_mla_attention(const Tensor& q_in, const Tensor& cache,
                                    const LinearWeight& kv_b_proj,
                                    const AttentionMetadata& metadata, const MlaParams& params,
                                    Tensor& out) {
  const Tensor q = act(q_in);
  LOCUS_ASSIGN_OR_RETURN(auto spans,
                         cpu::resolve_sequences(metadata, cache.size(0), "mla_attention"));
  const int64_t heads = q.size(1);
  const int64_t rank = params.kv_lora_rank;
  const int64_t nope = params.qk_nope_head_dim;
  const int64_t rope = params.qk_rope_head_dim;
  const int64_t v_dim = params.v_head_dim;
  const int64_t q_dim = nope + rope;
  const int64_t entry = rank + rope;
  const int64_t expanded_width = heads * (nope + v_dim);  // per head: [k_nope | v]
  const int64_t block_size = metadata.block_size;
  // Dense f32 once for the whole batch (a no-op view for prepared weights).
  LOCUS_ASSIGN_OR_RETURN(Tensor kv_b, cpu::dense_weight(kv_b_proj));
  LinearWeight dense_kv_b;
  dense_kv_b.weight = kv_b;

  std::vector<float> latents;
  std::vector<float> expanded;
  std::vector<double> scores;
  std::vector<double> acc(static_cast<size_t>(v_dim));
  for (const cpu::SequenceSpan& span : spans) {
    if (span.num_new == 0) continue;
    const int64_t context_len = span.context_len;
    // Gather the sequence's latents (normalized c_kv) into rows, then expand them all at once.
    latents.resize(static_cast<size_t>(context_len * rank));
    for (int64_t j = 0; j < context_len; ++j) {
      std::memcpy(latents.data() + j * rank, cache.data<float>() + span.slot(j, block_size) * entry,
                  static_cast<size_t>(rank) * sizeof(float));
    }
    expanded.resize(static_cast<size_t>(context_len * expanded_width));
    LOCUS_RETURN_IF_ERROR(cpu::linear_rows(context(), latents.data(), rank, context_len, dense_kv_b,
                                           expanded.data()));

    for (int64_t i = 0; i < span.num_new; ++i) {
      const int64_t t = span.first_token + i;
      const int64_t position = span.context_len - span.num_new + i;
      for (int64_t h = 0; h < heads; ++h) {
        const float* qh = q.data<float>() + (t * heads + h) * q_dim;
        scores.assign(static_cast<size_t>(position + 1), 0.0);
        for (int64_t j = 0; j <= position; ++j) {
          const float* k_nope = expanded.data() + j * expanded_width + h * (nope + v_dim);
          const float* k_pe = cache.data<float>() + span.slot(j, block_size) * entry + rank;
          double dot = 0.0;
          for (int64_t d = 0; d < nope; ++d)
            dot += static_cast<double>(qh[d]) * static_cast<double>(k_nope[d]);
          for (int64_t d = 0; d < rope; ++d)
            dot += static_cast<double>(qh[nope + d]) * static_cast<double>(k_pe[d]);
          scores[static_cast<size_t>(j)] = dot * static_cast<double>(params.scale);
        }
        cpu::softmax_in_place(scores);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j <= position; ++j) {
          const float* v = expanded.data() + j * expanded_width + h * (nope + v_dim) + nope;
          const double p = scores[static_cast<size_t>(j)];
          for (int64_t d = 0; d < v_dim; ++d)
            acc[static_cast<size_t>(d)] += p * static_cast<double>(v[d]);
        }
        float* o = out.data<float>() + (t * heads + h) * v_dim;
        for (int64_t d = 0; d < v_dim; ++d)
          o[d] = static_cast<float>(acc[static_cast<size_t>(d)]);
      }
    }
  }
  return Status::ok();
}

}  // namespace locus
