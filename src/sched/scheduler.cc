// Scheduler: token budget, chunked prefill, prefix hits, preemption by recompute.
#include "sched/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

namespace locus {

Status SchedulerConfig::validate() const {
  if (max_num_seqs < 1)
    return invalid_argument(fmt::format("max_num_seqs must be at least 1, got {}", max_num_seqs));
  if (max_num_batched_tokens < 1) {
    return invalid_argument(
        fmt::format("max_num_batched_tokens must be at least 1, got {}", max_num_batched_tokens));
  }
  if (max_model_len < 2)
    return invalid_argument(fmt::format("max_model_len must be at least 2, got {}", max_model_len));
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len) {
    return invalid_argument(fmt::format(
        "max_num_batched_tokens ({}) is smaller than max_model_len ({}). This effectively limits "
        "the maximum sequence length to max_num_batched_tokens and makes locus reject longer "
        "sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
        max_num_batched_tokens, max_model_len));
  }
  if (long_prefill_token_threshold < 0 || num_lookahead_tokens < 0) {
    return invalid_argument("long_prefill_token_threshold and num_lookahead_tokens must be >= 0");
  }
  return Status::ok();
}

Expected<std::unique_ptr<Scheduler>> Scheduler::create(const SchedulerConfig& config,
                                                       const KVCacheConfig& kv_config) {
  LOCUS_RETURN_IF_ERROR(config.validate());
  if (kv_config.block_size < 1 || kv_config.num_blocks < 1) {
    return invalid_argument(
        fmt::format("KV cache needs block_size >= 1 and num_blocks >= 1, got {} and {}",
                    kv_config.block_size, kv_config.num_blocks));
  }
  const int64_t capacity = static_cast<int64_t>(kv_config.num_blocks) * kv_config.block_size;
  if (capacity < config.max_model_len) {
    return resource_exhausted(fmt::format(
        "The model's max seq len ({}) is larger than the maximum number of tokens that can be "
        "stored in KV cache ({}). Try increasing the KV cache memory or decreasing max_model_len.",
        config.max_model_len, capacity));
  }
  return std::unique_ptr<Scheduler>(new Scheduler(config, kv_config));
}

Scheduler::Scheduler(const SchedulerConfig& config, const KVCacheConfig& kv_config)
    : config_(config), kv_(kv_config), waiting_(config.policy) {}

Status Scheduler::add_request(EngineCoreRequest core) {
  if (requests_.count(core.request_id)) {
    return invalid_argument(fmt::format("request id {} already exists", core.request_id));
  }
  const auto prompt_len = static_cast<int>(core.prompt_token_ids.size());
  if (prompt_len == 0) return invalid_argument("The decoder prompt cannot be empty");
  if (prompt_len >= config_.max_model_len) {
    return invalid_argument(fmt::format(
        "The decoder prompt (length {}) is longer than the maximum model length of {} (room is "
        "needed for at least one generated token).",
        prompt_len, config_.max_model_len));
  }
  LOCUS_RETURN_IF_ERROR(core.params.validate());
  auto request = std::make_unique<Request>(std::move(core), config_.max_model_len);
  waiting_.push(request.get());
  requests_.emplace(request->id, std::move(request));
  return Status::ok();
}

void Scheduler::finish_requests(std::span<const RequestId> request_ids, RequestStatus status) {
  for (RequestId id : request_ids) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;
    Request* r = it->second.get();
    if (r->status == RequestStatus::kRunning) {
      running_.erase(std::find(running_.begin(), running_.end(), r));
    } else {
      waiting_.remove(r);
    }
    kv_.free(id);
    r->status = status;
    finished_since_schedule_.push_back(id);
    requests_.erase(it);
  }
}

int Scheduler::lookahead_for(int num_computed, int num_new) const {
  // Never reserve slots past the model's length: a lone request must always fit the pool.
  return std::max(
      0, std::min(config_.num_lookahead_tokens, config_.max_model_len - num_computed - num_new));
}

Request* Scheduler::pick_victim(size_t* current_index, int* token_budget) {
  size_t victim_index = running_.size() - 1;
  if (config_.policy == SchedulingPolicy::kPriority) {
    // The lowest priority (largest value), latest arrival among them.
    for (size_t j = 0; j < running_.size(); ++j) {
      const Request* a = running_[j];
      const Request* b = running_[victim_index];
      if (std::tie(a->priority, a->arrival_time, a->id) >
          std::tie(b->priority, b->arrival_time, b->id)) {
        victim_index = j;
      }
    }
  }
  Request* victim = running_[victim_index];
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(victim_index));
  if (victim_index < *current_index) {
    // Already planned this step: give its tokens back to the budget.
    auto it = std::find_if(planned_.begin(), planned_.end(),
                           [&](const Planned& p) { return p.request == victim; });
    *token_budget += it->num_new_tokens;
    planned_.erase(it);
    --*current_index;
  }
  return victim;
}

void Scheduler::preempt(Request* request, SchedulerOutput& out) {
  kv_.free(request->id);
  request->status = RequestStatus::kPreempted;
  request->num_computed_tokens = 0;
  ++request->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(request);
  out.preempted.push_back(request->id);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  schedule(out);
  return out;
}

void Scheduler::schedule(SchedulerOutput& out) {
  out.clear();
  std::swap(out.finished, finished_since_schedule_);  // both keep their capacity
  planned_.clear();
  int budget = config_.max_num_batched_tokens;
  const int threshold = config_.long_prefill_token_threshold;

  // 1. Running requests, in order: decodes and the rest of chunked prefills.
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    Request* r = running_[i];
    int num_new = r->num_tokens() - r->num_computed_tokens;
    if (threshold > 0) num_new = std::min(num_new, threshold);
    num_new = std::min(num_new, budget);
    if (num_new <= 0) {
      ++i;
      continue;
    }
    const int lookahead = lookahead_for(r->num_computed_tokens, num_new);
    const std::vector<BlockId>* blocks = nullptr;
    while (!(blocks = kv_.allocate_slots(r->kv_view(), num_new, nullptr, lookahead))) {
      Request* victim = pick_victim(&i, &budget);
      preempt(victim, out);
      if (victim == r) break;
    }
    if (!blocks) break;  // r itself was preempted: nothing after it can fit either
    planned_.push_back({r, r->num_computed_tokens, num_new, false, blocks});
    budget -= num_new;
    ++i;
  }

  // 2. Waiting requests, unless this step had to preempt (then memory is the bottleneck and
  // admitting more would only thrash).
  if (out.preempted.empty()) {
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int>(running_.size()) < config_.max_num_seqs) {
      Request* r = waiting_.front();
      const ComputedBlocks hits = kv_.get_computed_blocks(r->kv_view());
      const int num_computed = hits.num_computed_tokens;
      int num_new = r->num_tokens() - num_computed;
      if (threshold > 0) num_new = std::min(num_new, threshold);
      if (!config_.enable_chunked_prefill && num_new > budget) break;
      num_new = std::min(num_new, budget);
      const int lookahead = lookahead_for(num_computed, num_new);
      const std::vector<BlockId>* blocks =
          kv_.allocate_slots(r->kv_view(), num_new, &hits, lookahead);
      if (!blocks) break;  // head of line waits for memory; later arrivals do not overtake
      waiting_.pop_front();
      running_.push_back(r);
      r->status = RequestStatus::kRunning;
      r->num_computed_tokens = num_computed;
      if (r->num_cached_tokens < 0) r->num_cached_tokens = num_computed;
      planned_.push_back({r, num_computed, num_new, true, blocks});
      budget -= num_new;
    }
  }

  // 3. Publish the plan and advance num_computed_tokens (the step is now in flight).
  for (const Planned& p : planned_) {
    Request* r = p.request;
    ScheduledRequest s;
    s.request = r;
    s.num_computed_tokens = p.num_computed_before;
    s.num_new_tokens = p.num_new_tokens;
    s.needs_sample = p.num_computed_before + p.num_new_tokens == r->num_tokens();
    // A decode is exactly the last token, and that token is a generated one.
    s.is_prefill = !(p.num_new_tokens == 1 && p.num_computed_before == r->num_tokens() - 1 &&
                     r->num_output_tokens() > 0);
    s.is_new = p.is_new;
    s.block_ids = *p.blocks;
    out.scheduled.push_back(s);
    out.total_num_scheduled_tokens += p.num_new_tokens;
    r->num_computed_tokens = p.num_computed_before + p.num_new_tokens;
  }
}

Expected<std::vector<EngineCoreOutput>> Scheduler::update_from_output(
    const SchedulerOutput& scheduled, const ModelRunnerOutput& output) {
  std::vector<EngineCoreOutput> outputs;
  LOCUS_RETURN_IF_ERROR(update_from_output(scheduled, output, outputs));
  return outputs;
}

Status Scheduler::update_from_output(const SchedulerOutput& scheduled,
                                     const ModelRunnerOutput& output,
                                     std::vector<EngineCoreOutput>& outputs) {
  const size_t n = scheduled.scheduled.size();
  if (output.sampled_token_ids.size() != n ||
      (!output.logprobs.empty() && output.logprobs.size() != n) ||
      (!output.prompt_logprobs.empty() && output.prompt_logprobs.size() != n)) {
    return internal_error(fmt::format(
        "model runner output has {} sampled tokens, {} logprobs, {} prompt logprobs for {} "
        "scheduled requests",
        output.sampled_token_ids.size(), output.logprobs.size(), output.prompt_logprobs.size(), n));
  }
  // Entries are reused in place (their token vectors keep capacity); surplus ones are dropped
  // at the end.
  size_t count = 0;
  auto next_output = [&]() -> EngineCoreOutput& {
    if (count == outputs.size()) outputs.emplace_back();
    EngineCoreOutput& o = outputs[count++];
    o.reset();
    return o;
  };
  bool any_finished = false;
  for (size_t k = 0; k < n; ++k) {
    const ScheduledRequest& s = scheduled.scheduled[k];
    Request* r = s.request;
    const bool has_prompt_logprobs =
        !output.prompt_logprobs.empty() && !output.prompt_logprobs[k].empty();
    if (!s.needs_sample && !has_prompt_logprobs) continue;  // a middle prefill chunk

    EngineCoreOutput& o = next_output();
    o.request_id = r->id;
    o.num_cached_tokens = std::max(0, r->num_cached_tokens);
    if (has_prompt_logprobs) {
      o.new_prompt_logprobs = output.prompt_logprobs[k];
      r->num_prompt_logprobs_sent += static_cast<int>(o.new_prompt_logprobs.size());
    }
    if (!s.needs_sample) continue;
    const int32_t token = output.sampled_token_ids[k];
    if (token < 0) {
      outputs.resize(count);
      return internal_error(fmt::format("model runner sampled no token for request {}", r->id));
    }
    r->token_ids.push_back(token);
    o.new_token_ids.push_back(token);
    if (!output.logprobs.empty() && output.logprobs[k])
      o.new_logprobs.push_back(*output.logprobs[k]);
    auto stop = check_token_stop(r->params, r->eos_token_id, token, r->num_output_tokens(),
                                 r->num_tokens(), r->max_tokens, config_.max_model_len);
    if (stop) {
      r->status = finished_status_for(stop->reason);
      r->stop_token_id = stop->stop_token_id;
      o.finish_reason = stop->reason;
      o.stop_token_id = stop->stop_token_id;
      any_finished = true;
    }
  }
  outputs.resize(count);
  if (any_finished) {
    std::erase_if(running_, [](const Request* r) { return is_finished(r->status); });
    for (const EngineCoreOutput& o : outputs) {
      if (!o.finished()) continue;
      kv_.free(o.request_id);
      finished_since_schedule_.push_back(o.request_id);
      requests_.erase(o.request_id);
    }
  }
  return Status::ok();
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s;
  s.num_running_reqs = num_running();
  s.num_waiting_reqs = num_waiting();
  s.kv_cache_usage = kv_.usage();
  s.prefix_cache = kv_.prefix_cache_stats();
  s.num_preemptions = num_preemptions_;
  return s;
}

const Request* Scheduler::find_request(RequestId id) const {
  auto it = requests_.find(id);
  return it == requests_.end() ? nullptr : it->second.get();
}

Status Scheduler::check_invariants() const {
  LOCUS_RETURN_IF_ERROR(kv_.check_invariants());
  if (running_.size() + waiting_.size() != requests_.size()) {
    return internal_error(fmt::format("{} running + {} waiting != {} requests", running_.size(),
                                      waiting_.size(), requests_.size()));
  }
  if (static_cast<int>(running_.size()) > config_.max_num_seqs) {
    return internal_error(fmt::format("{} running > max_num_seqs", running_.size()));
  }
  const int bs = kv_.block_size();
  for (const Request* r : running_) {
    if (r->status != RequestStatus::kRunning) {
      return internal_error(
          fmt::format("request {} in running list is {}", r->id, request_status_name(r->status)));
    }
    const auto blocks = static_cast<int>(kv_.block_ids(r->id).size());
    if (blocks * bs < r->num_computed_tokens) {
      return internal_error(fmt::format("request {} computed {} tokens in {} blocks", r->id,
                                        r->num_computed_tokens, blocks));
    }
  }
  for (const auto& [id, r] : requests_) {
    if (r->status == RequestStatus::kRunning) continue;
    if (!kv_.block_ids(id).empty() || r->num_computed_tokens != 0) {
      return internal_error(fmt::format("waiting request {} holds blocks or computed tokens", id));
    }
  }
  return Status::ok();
}

}  // namespace locus
