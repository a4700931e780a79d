#include "server/metrics.h"

#include <prometheus/text_serializer.h>

#include <algorithm>

namespace locus {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// vLLM's buckets.
const Histogram::BucketBoundaries kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08,
                                                  0.1,   0.25,  0.5,  0.75, 1.0,  2.5,  5.0,
                                                  7.5,   10.0,  20.0, 40.0, 80.0, 160.0};
const Histogram::BucketBoundaries kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                                  0.3,  0.4,   0.5,  0.75,  1.0, 2.5,  5.0,
                                                  7.5,  10.0,  20.0, 40.0,  80.0};
const Histogram::BucketBoundaries kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,
                                                 5.0,  10.0, 15.0, 20.0, 30.0, 40.0,  50.0,
                                                 60.0, 120., 240., 480., 960., 1920., 7680.};
const Histogram::BucketBoundaries kTokenBuckets = {
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000, 200000};

}  // namespace

ServerMetrics::ServerMetrics(const std::string& model_name, int num_kv_blocks)
    : registry_(std::make_shared<prometheus::Registry>()), model_name_(model_name) {
  const prometheus::Labels labels{{"model_name", model_name}};
  auto gauge = [&](const char* name, const char* help) {
    return &BuildGauge().Name(name).Help(help).Register(*registry_).Add(labels);
  };
  auto counter = [&](const char* name, const char* help) {
    return &BuildCounter().Name(name).Help(help).Register(*registry_).Add(labels);
  };
  auto histogram = [&](const char* name, const char* help, const Histogram::BucketBoundaries& b) {
    return &BuildHistogram().Name(name).Help(help).Register(*registry_).Add(labels, b);
  };
  running_ = gauge("vllm:num_requests_running", "Number of requests in model execution batches.");
  waiting_ = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.");
  kv_usage_ = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.");
  kv_blocks_ = gauge("vllm:num_gpu_blocks", "Number of KV-cache blocks.");
  kv_blocks_->Set(num_kv_blocks);
  prefix_queries_ = counter("vllm:prefix_cache_queries_total",
                            "Prefix cache queries, in terms of number of queried tokens.");
  prefix_hits_ = counter("vllm:prefix_cache_hits_total",
                         "Prefix cache hits, in terms of number of cached tokens.");
  preemptions_ = counter("vllm:num_preemptions_total", "Cumulative number of preemptions.");
  prompt_tokens_ = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.");
  generation_tokens_ =
      counter("vllm:generation_tokens_total", "Number of generation tokens processed.");
  success_ = &BuildCounter()
                  .Name("vllm:request_success_total")
                  .Help("Count of successfully processed requests.")
                  .Register(*registry_);
  errors_ = &BuildCounter()
                 .Name("locus:request_errors_total")
                 .Help("Requests refused or failed, by HTTP status.")
                 .Register(*registry_);
  ttft_ = histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token.",
                    kTtftBuckets);
  tpot_ = histogram("vllm:time_per_output_token_seconds",
                    "Histogram of time per output token (mean per request).", kTpotBuckets);
  itl_ = histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency.",
                   kTpotBuckets);
  e2e_ = histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency.",
                   kE2eBuckets);
  prompt_len_ =
      histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.", kTokenBuckets);
  generation_len_ = histogram("vllm:request_generation_tokens",
                              "Number of generation tokens processed.", kTokenBuckets);
}

void ServerMetrics::observe_finished(const RequestMetrics& m, std::string_view finish_reason,
                                     bool count_prompt) {
  if (count_prompt) {
    prompt_tokens_->Increment(m.num_prompt_tokens);
    prompt_len_->Observe(m.num_prompt_tokens);
  }
  generation_tokens_->Increment(m.num_generation_tokens);
  generation_len_->Observe(m.num_generation_tokens);
  success_->Add({{"model_name", model_name_}, {"finished_reason", std::string(finish_reason)}})
      .Increment();
  if (m.first_token_time > 0.0) ttft_->Observe(m.time_to_first_token());
  if (m.finished_time > 0.0) e2e_->Observe(m.e2e_latency());
  if (m.num_generation_tokens > 1 && m.finished_time > 0.0 && m.first_token_time > 0.0) {
    tpot_->Observe((m.finished_time - m.first_token_time) / (m.num_generation_tokens - 1));
  }
}

void ServerMetrics::observe_inter_token(double seconds) {
  itl_->Observe(seconds);
}

void ServerMetrics::count_error(int status) {
  errors_->Add({{"model_name", model_name_}, {"status", std::to_string(status)}}).Increment();
}

std::string ServerMetrics::render(const EngineStats& stats, int num_unfinished) {
  {
    std::lock_guard lock(render_mutex_);
    const SchedulerStats& s = stats.scheduler;
    running_->Set(s.num_running_reqs);
    // Requests the server holds that the scheduler has not admitted yet count as waiting too.
    waiting_->Set(std::max(s.num_waiting_reqs, num_unfinished - s.num_running_reqs));
    kv_usage_->Set(s.kv_cache_usage);
    auto advance = [](prometheus::Counter* c, uint64_t now, uint64_t& seen) {
      if (now > seen) c->Increment(static_cast<double>(now - seen));
      seen = std::max(seen, now);
    };
    advance(prefix_queries_, s.prefix_cache.queries, seen_prefix_queries_);
    advance(prefix_hits_, s.prefix_cache.hits, seen_prefix_hits_);
    advance(preemptions_, s.num_preemptions, seen_preemptions_);
  }
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace locus
