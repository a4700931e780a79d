// SchedulerOutput -> flat batch (token ids, positions, cu_seqlens, block tables, slot mapping).
#include "engine/input_batch.h"

#include <algorithm>

namespace locus {

BuiltBatch build_model_input(const SchedulerOutput& scheduled, int block_size) {
  BuiltBatch built;
  build_model_input(scheduled, block_size, built);
  return built;
}

void build_model_input(const SchedulerOutput& scheduled, int block_size, BuiltBatch& built) {
  ModelInputBatch& b = built.batch;
  const auto num_reqs = static_cast<int>(scheduled.scheduled.size());
  b.num_reqs = num_reqs;
  b.block_size = block_size;
  b.token_ids.clear();
  b.positions.clear();
  b.slot_mapping.clear();
  b.query_start_loc.clear();
  b.seq_lens.clear();
  b.num_computed_tokens.clear();
  b.logits_indices.clear();
  b.max_num_blocks_per_req = 0;
  built.layout.assign(static_cast<size_t>(num_reqs), LogitsLayout{});

  for (const ScheduledRequest& s : scheduled.scheduled) {
    b.max_num_blocks_per_req =
        std::max(b.max_num_blocks_per_req, static_cast<int>(s.block_ids.size()));
  }
  const auto stride = static_cast<size_t>(b.max_num_blocks_per_req);
  b.block_table.assign(static_cast<size_t>(num_reqs) * stride, kPadBlockId);

  b.query_start_loc.push_back(0);
  int num_rows = 0;
  for (int r = 0; r < num_reqs; ++r) {
    const ScheduledRequest& s = scheduled.scheduled[static_cast<size_t>(r)];
    const Request& req = *s.request;
    const int begin = s.num_computed_tokens;
    const int end = begin + s.num_new_tokens;
    const int flat_begin = b.num_tokens();
    for (int p = begin; p < end; ++p) {
      b.token_ids.push_back(req.token_ids[static_cast<size_t>(p)]);
      b.positions.push_back(p);
      const BlockId block = s.block_ids[static_cast<size_t>(p / block_size)];
      b.slot_mapping.push_back(static_cast<int64_t>(block) * block_size + p % block_size);
    }
    b.query_start_loc.push_back(b.num_tokens());
    b.seq_lens.push_back(end);
    b.num_computed_tokens.push_back(begin);
    std::copy(s.block_ids.begin(), s.block_ids.end(),
              b.block_table.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(r) * stride));

    LogitsLayout& l = built.layout[static_cast<size_t>(r)];
    l.first_row = num_rows;
    if (req.wants_prompt_logprobs()) {
      // Position p's logits predict token p + 1; positions already reported (an earlier chunk,
      // or before a preemption) are skipped.
      const int first = std::max(begin, req.num_prompt_logprobs_sent);
      const int last = std::min(end, req.num_prompt_tokens - 1);  // exclusive
      l.first_prompt_logprob_position = first;
      for (int p = first; p < last; ++p) {
        b.logits_indices.push_back(flat_begin + (p - begin));
        ++l.num_prompt_logprob_rows;
      }
      num_rows += l.num_prompt_logprob_rows;
    }
    if (s.needs_sample) {
      b.logits_indices.push_back(b.num_tokens() - 1);
      l.sample_row = num_rows++;
    }
  }
}

}  // namespace locus
