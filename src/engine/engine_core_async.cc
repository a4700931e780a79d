// EngineCore's async scheduling (engine_core.h): the next step queued behind the running one.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "core/counter_rng.h"
#include "engine/engine_core.h"

namespace locus {
namespace {

// The same step, given that `fed` holds the tokens the queued step was fed: every array equal
// and each input token the one the step before drew for its row.
bool same_step(const BuiltBatch& planned, const BuiltBatch& queued, std::span<const int32_t> fed) {
  const ModelInputBatch& a = planned.batch;
  const ModelInputBatch& b = queued.batch;
  if (a.num_reqs != b.num_reqs || a.block_size != b.block_size || a.positions != b.positions ||
      a.query_start_loc != b.query_start_loc || a.seq_lens != b.seq_lens ||
      a.num_computed_tokens != b.num_computed_tokens || a.slot_mapping != b.slot_mapping ||
      a.logits_indices != b.logits_indices || a.dp_max_tokens != b.dp_max_tokens ||
      a.token_ids.size() != fed.size() ||
      !std::equal(a.token_ids.begin(), a.token_ids.end(), fed.begin()) ||
      a.device_sampling.size() != b.device_sampling.size() ||
      planned.layout.size() != queued.layout.size()) {
    return false;
  }
  // The blocks each row reads must match; the plan may hold one more for its lookahead slot.
  for (int r = 0; r < a.num_reqs; ++r) {
    const int used = (a.seq_lens[static_cast<size_t>(r)] + a.block_size - 1) / a.block_size;
    if (used > a.max_num_blocks_per_req || used > b.max_num_blocks_per_req) return false;
    const auto row_a = a.block_table.begin() + static_cast<ptrdiff_t>(r) * a.max_num_blocks_per_req;
    const auto row_b = b.block_table.begin() + static_cast<ptrdiff_t>(r) * b.max_num_blocks_per_req;
    if (!std::equal(row_a, row_a + used, row_b)) return false;
  }
  for (size_t i = 0; i < a.device_sampling.size(); ++i) {
    if (std::memcmp(&a.device_sampling[i], &b.device_sampling[i], sizeof(SamplingRowParams)) != 0)
      return false;
  }
  for (size_t i = 0; i < planned.layout.size(); ++i) {
    const LogitsLayout& x = planned.layout[i];
    const LogitsLayout& y = queued.layout[i];
    if (x.first_row != y.first_row || x.num_prompt_logprob_rows != y.num_prompt_logprob_rows ||
        x.sample_row != y.sample_row)
      return false;
  }
  return true;
}

}  // namespace

bool EngineCore::build_next_step() {
  const SchedulerOutput& s = scheduled_;
  const size_t n = s.scheduled.size();
  // Anything that could change the next plan other than the tokens themselves: admissions,
  // finishes waiting to be applied, requests left out of this step, and a preemption (the
  // plan's lookahead may take a new block per request).
  if (!deferred_finishes_.empty() || scheduler_->num_waiting() > 0 ||
      static_cast<size_t>(scheduler_->num_running()) != n || !s.preempted.empty() ||
      scheduler_->kv_cache_manager().num_free_blocks() < static_cast<int>(n)) {
    return false;
  }
  const ModelInputBatch& cur = built_.batch;
  if (cur.num_tokens() != static_cast<int>(n) || cur.logits_indices.size() != n ||
      cur.device_sampling.size() != n) {
    return false;
  }
  const int block_size = cur.block_size;
  const int max_model_len = config_.scheduler.max_model_len;
  for (size_t k = 0; k < n; ++k) {
    const ScheduledRequest& sr = s.scheduled[k];
    const Request& r = *sr.request;
    const LogitsLayout& layout = built_.layout[k];
    if (!sr.needs_sample || sr.num_new_tokens != 1 || layout.num_prompt_logprob_rows != 0 ||
        layout.sample_row != static_cast<int>(k)) {
      return false;
    }
    // After this step's token: one more output, and the request must not stop on length.
    const int outputs_after = r.num_output_tokens() + 1;
    if (outputs_after >= r.max_tokens || r.num_tokens() + 1 >= max_model_len) return false;
    // The next token's KV slot must be in a block the request already holds.
    const int position = sr.num_computed_tokens + 1;
    if (static_cast<size_t>(position / block_size) >= sr.block_ids.size()) return false;
  }
  next_.layout = built_.layout;
  ModelInputBatch& nb = next_.batch;
  nb = cur;
  for (size_t k = 0; k < n; ++k) {
    const ScheduledRequest& sr = s.scheduled[k];
    const Request& r = *sr.request;
    const int position = sr.num_computed_tokens + 1;
    nb.token_ids[k] = 0;  // fed from this step's draw on the device
    nb.positions[k] = position;
    nb.seq_lens[k] = position + 1;
    nb.num_computed_tokens[k] = position;
    nb.slot_mapping[k] =
        static_cast<int64_t>(sr.block_ids[static_cast<size_t>(position / block_size)]) *
            block_size +
        position % block_size;
    nb.device_sampling[k].u =
        counter_uniform(r.rng_stream, static_cast<uint64_t>(r.num_output_tokens() + 1));
  }
  return true;
}

void EngineCore::apply_deferred_finishes(std::vector<EngineCoreOutput>& outputs) {
  if (deferred_finishes_.empty()) return;
  for (const auto& [id, status] : deferred_finishes_) {
    std::erase_if(outputs, [id = id](const EngineCoreOutput& o) { return o.request_id == id; });
    scheduler_->finish_requests(std::span<const RequestId>(&id, 1), status);
  }
  deferred_finishes_.clear();
}

Status EngineCore::step_async(std::vector<EngineCoreOutput>& outputs) {
  if (!launched_) {
    scheduler_->schedule(scheduled_);
    if (scheduled_.empty()) {
      outputs.clear();
      return Status::ok();
    }
    build_model_input(scheduled_, runner_->kv_cache_spec().block_size, built_);
    // Host-sampled steps (logprobs, penalties, prompt logprobs) run as before.
    if (!try_device_sampling(scheduled_, built_)) return run_built(outputs);
    LOCUS_RETURN_IF_ERROR(runner_->launch_sampled(built_.batch, false));
    launched_ = true;
  }
  // scheduled_ / built_ run on the device. Queue the step after it, then wait for its tokens.
  const bool queued = build_next_step();
  if (queued) {
    LOCUS_RETURN_IF_ERROR(runner_->launch_sampled(next_.batch, true));
    ++steps_queued_ahead_;
  }
  Expected<std::vector<int32_t>> tokens = runner_->collect_sampled();
  launched_ = false;
  if (!tokens) return tokens.status();
  const size_t n = scheduled_.scheduled.size();
  ModelRunnerOutput& out = runner_output_;
  out.sampled_token_ids.assign(n, -1);
  out.logprobs.clear();
  out.prompt_logprobs.clear();
  for (size_t k = 0; k < n; ++k) {
    const int row = built_.layout[k].sample_row;
    if (row >= 0) out.sampled_token_ids[k] = (*tokens)[static_cast<size_t>(row)];
  }
  LOCUS_RETURN_IF_ERROR(scheduler_->update_from_output(scheduled_, out, outputs));
  apply_deferred_finishes(outputs);
  if (!queued) return Status::ok();

  // The queued step is the next plan unless a request stopped on its token (nothing else can
  // have changed: build_next_step ruled it out). Otherwise drop it once it has run.
  const bool any_finished = std::any_of(outputs.begin(), outputs.end(),
                                        [](const EngineCoreOutput& o) { return o.finished(); });
  if (any_finished) {
    ++steps_dropped_;
    return runner_->collect_sampled().status();
  }
  scheduler_->schedule(scheduled_);
  build_model_input(scheduled_, runner_->kv_cache_spec().block_size, built_);
  if (try_device_sampling(scheduled_, built_) && same_step(built_, next_, *tokens)) {
    launched_ = true;
    return Status::ok();
  }
  // Not expected; stay correct anyway: drop the queued step and run the plan itself now, its
  // news after this step's.
  ++steps_dropped_;
  LOCUS_RETURN_IF_ERROR(runner_->collect_sampled().status());
  if (scheduled_.empty()) return Status::ok();
  std::vector<EngineCoreOutput> more;
  LOCUS_RETURN_IF_ERROR(run_planned(more));
  for (EngineCoreOutput& o : more)
    outputs.push_back(std::move(o));
  return Status::ok();
}

}  // namespace locus
