// Paged GQA attention on the CPU: the reference every attention kernel is checked against.
// Each query is computed alone (scores, softmax and weighted sum in f64, one key at a time in
// sequence order), so the result for a token depends only on its own sequence: never on the
// batch, on chunking or on the thread split.
#include "backend/cpu/attention_common.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_backend.h"

namespace locus {
namespace cpu {

Expected<std::vector<SequenceSpan>> resolve_sequences(const AttentionMetadata& m,
                                                      int64_t num_blocks, std::string_view op) {
  const int32_t* qsl = m.query_start_loc.data<int32_t>();
  const int32_t* seq_lens = m.seq_lens.data<int32_t>();
  const int64_t max_blocks = m.block_table.size(1);
  const int32_t* table = m.block_table.data<int32_t>();
  const int64_t num_tokens = m.num_tokens();
  std::vector<SequenceSpan> spans;
  spans.reserve(static_cast<size_t>(m.num_seqs()));
  if (qsl[0] != 0 || qsl[m.num_seqs()] != num_tokens) {
    return invalid_argument(
        fmt::format("{}: query_start_loc must run from 0 to {} tokens, got "
                    "[{}, {}]",
                    op, num_tokens, qsl[0], qsl[m.num_seqs()]));
  }
  for (int64_t s = 0; s < m.num_seqs(); ++s) {
    SequenceSpan span;
    span.first_token = qsl[s];
    span.num_new = qsl[s + 1] - qsl[s];
    span.context_len = seq_lens[s];
    span.block_table = table + s * max_blocks;
    if (span.num_new < 0 || span.num_new > span.context_len) {
      return invalid_argument(fmt::format("{}: sequence {} has {} new tokens but seq_len {}", op, s,
                                          span.num_new, span.context_len));
    }
    const int64_t blocks_needed = (span.context_len + m.block_size - 1) / m.block_size;
    if (blocks_needed > max_blocks) {
      return invalid_argument(
          fmt::format("{}: sequence {} needs {} blocks for {} tokens; the "
                      "block table holds {}",
                      op, s, blocks_needed, span.context_len, max_blocks));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (span.block_table[b] < 0 || span.block_table[b] >= num_blocks) {
        return out_of_range(fmt::format("{}: sequence {} block {} is id {}, outside [0, {})", op, s,
                                        b, span.block_table[b], num_blocks));
      }
    }
    spans.push_back(span);
  }
  return spans;
}

Status check_slots(const Tensor& slot_mapping, int64_t num_slots, std::string_view op) {
  const int64_t* slots = slot_mapping.data<int64_t>();
  for (int64_t t = 0; t < slot_mapping.size(0); ++t) {
    if (slots[t] < 0 || slots[t] >= num_slots) {
      return out_of_range(fmt::format("{}: slot {} of token {} is outside the cache's {} slots", op,
                                      slots[t], t, num_slots));
    }
  }
  return Status::ok();
}

void softmax_in_place(std::vector<double>& scores) {
  double max_score = -std::numeric_limits<double>::infinity();
  for (double s : scores)
    max_score = std::max(max_score, s);
  double sum = 0.0;
  for (double& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  for (double& s : scores)
    s /= sum;
}

}  // namespace cpu

Status CpuBackend::do_write_kv_cache(const Tensor& k_in, const Tensor& v_in,
                                     const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache) {
  const Tensor k = act(k_in);
  const Tensor v = act(v_in);
  const int64_t num_slots = k_cache.size(0) * k_cache.size(1);
  LOCUS_RETURN_IF_ERROR(cpu::check_slots(slot_mapping, num_slots, "write_kv_cache"));
  const int64_t heads = k.size(1);
  const int64_t k_dim = k.size(2);
  const int64_t v_dim = v.size(2);
  const int64_t* slots = slot_mapping.data<int64_t>();
  for (int64_t t = 0; t < k.size(0); ++t) {
    float* k_dst = k_cache.data<float>() + slots[t] * heads * k_dim;
    float* v_dst = v_cache.data<float>() + slots[t] * heads * v_dim;
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(k_dst + h * k_dim, k.data<float>() + t * k.stride(0) + h * k.stride(1),
                  static_cast<size_t>(k_dim) * sizeof(float));
      std::memcpy(v_dst + h * v_dim, v.data<float>() + t * v.stride(0) + h * v.stride(1),
                  static_cast<size_t>(v_dim) * sizeof(float));
    }
  }
  return Status::ok();
}

Status CpuBackend::do_paged_attention(const Tensor& q_in, const Tensor& k_cache,
                                      const Tensor& v_cache, const AttentionMetadata& metadata,
                                      const AttentionParams& params, Tensor& out) {
  const Tensor q = act(q_in);
  LOCUS_ASSIGN_OR_RETURN(auto spans,
                         cpu::resolve_sequences(metadata, k_cache.size(0), "paged_attention"));
  const int64_t q_heads = q.size(1);
  const int64_t kv_heads = k_cache.size(2);
  const int64_t group = q_heads / kv_heads;
  const int64_t head_dim = q.size(2);
  const int64_t v_dim = v_cache.size(3);
  const int64_t block_size = metadata.block_size;

  // One work item per (sequence, new token); items are independent.
  std::vector<std::pair<int64_t, int64_t>> items;
  for (size_t s = 0; s < spans.size(); ++s) {
    for (int64_t i = 0; i < spans[s].num_new; ++i)
      items.emplace_back(static_cast<int64_t>(s), i);
  }
  auto run = [&](int64_t begin, int64_t end) {
    std::vector<double> scores;
    std::vector<double> acc(static_cast<size_t>(v_dim));
    for (int64_t item = begin; item < end; ++item) {
      const cpu::SequenceSpan& span = spans[static_cast<size_t>(items[item].first)];
      const int64_t i = items[item].second;
      const int64_t t = span.first_token + i;
      const int64_t position = span.context_len - span.num_new + i;  // index in the sequence
      const int64_t first =
          params.sliding_window ? std::max<int64_t>(0, position - *params.sliding_window + 1) : 0;
      for (int64_t h = 0; h < q_heads; ++h) {
        const int64_t kv_head = h / group;
        const float* qv = q.data<float>() + (t * q_heads + h) * head_dim;
        scores.assign(static_cast<size_t>(position - first + 1), 0.0);
        for (int64_t j = first; j <= position; ++j) {
          const float* kv =
              k_cache.data<float>() + (span.slot(j, block_size) * kv_heads + kv_head) * head_dim;
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d)
            dot += static_cast<double>(qv[d]) * static_cast<double>(kv[d]);
          scores[static_cast<size_t>(j - first)] = dot * static_cast<double>(params.scale);
        }
        cpu::softmax_in_place(scores);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = first; j <= position; ++j) {
          const float* vv =
              v_cache.data<float>() + (span.slot(j, block_size) * kv_heads + kv_head) * v_dim;
          const double p = scores[static_cast<size_t>(j - first)];
          for (int64_t d = 0; d < v_dim; ++d)
            acc[static_cast<size_t>(d)] += p * static_cast<double>(vv[d]);
        }
        float* o = out.data<float>() + (t * q_heads + h) * v_dim;
        for (int64_t d = 0; d < v_dim; ++d)
          o[d] = static_cast<float>(acc[static_cast<size_t>(d)]);
      }
    }
  };
  pool_->parallel_for(static_cast<int64_t>(items.size()), 1, run);
  return Status::ok();
}

}  // namespace locus
