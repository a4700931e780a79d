#include "engine/data_parallel_engine.h"

#include <fmt/format.h>

namespace locus {

Expected<std::unique_ptr<DataParallelEngine>> DataParallelEngine::create(
    std::vector<std::unique_ptr<LLMEngine>> replicas, int block_size, int64_t blocks_per_replica,
    BalancerOptions options) {
  if (replicas.empty()) return invalid_argument("DataParallelEngine: no replicas");
  for (size_t r = 0; r < replicas.size(); ++r) {
    const uint64_t want = first_request_id(static_cast<int>(r));
    if (replicas[r]->config().first_request_id != want) {
      return invalid_argument(
          fmt::format("DataParallelEngine: replica {} starts its request ids at {}, not {}", r,
                      replicas[r]->config().first_request_id, want));
    }
  }
  PrefixAwareBalancer balancer(static_cast<int>(replicas.size()), block_size, blocks_per_replica,
                               options);
  return std::unique_ptr<DataParallelEngine>(
      new DataParallelEngine(std::move(replicas), std::move(balancer)));
}

Expected<std::shared_ptr<RequestStream>> DataParallelEngine::add_request(
    std::vector<int32_t> prompt_token_ids, SamplingParams params, RequestOptions options) {
  int pick = 0;
  {
    std::vector<int> loads;
    for (auto& r : replicas_)
      loads.push_back(r->num_unfinished_requests());
    std::lock_guard lock(mutex_);
    pick = balancer_.route(prompt_token_ids, options.cache_salt, loads);
  }
  return replicas_[static_cast<size_t>(pick)]->add_request(std::move(prompt_token_ids),
                                                           std::move(params), std::move(options));
}

void DataParallelEngine::abort(RequestId request_id) {
  if (request_id == 0) return;
  const uint64_t r = (request_id - 1) / kIdSpan;
  if (r < replicas_.size()) replicas_[r]->abort(request_id);
}

EngineStats DataParallelEngine::stats() const {
  EngineStats total;
  for (const auto& r : replicas_) {
    const EngineStats s = r->stats();
    total.scheduler.num_running_reqs += s.scheduler.num_running_reqs;
    total.scheduler.num_waiting_reqs += s.scheduler.num_waiting_reqs;
    total.scheduler.kv_cache_usage += s.scheduler.kv_cache_usage / static_cast<double>(size());
    total.scheduler.prefix_cache.requests += s.scheduler.prefix_cache.requests;
    total.scheduler.prefix_cache.queries += s.scheduler.prefix_cache.queries;
    total.scheduler.prefix_cache.hits += s.scheduler.prefix_cache.hits;
    total.scheduler.num_preemptions += s.scheduler.num_preemptions;
    total.num_steps += s.num_steps;
    total.num_generated_tokens += s.num_generated_tokens;
  }
  return total;
}

Status DataParallelEngine::health() {
  for (size_t r = 0; r < replicas_.size(); ++r) {
    Status s = replicas_[r]->health();
    if (!s.is_ok()) return s.with_context(fmt::format("data-parallel replica {}", r));
  }
  return Status::ok();
}

int DataParallelEngine::num_unfinished_requests() {
  int n = 0;
  for (auto& r : replicas_)
    n += r->num_unfinished_requests();
  return n;
}

void DataParallelEngine::shutdown() {
  for (auto& r : replicas_)
    r->shutdown();
}

}  // namespace locus
