// Prometheus metrics with vLLM's names (vllm:...), so dashboards and `locus bench` scrape locus
// like a vLLM server. prometheus-cpp holds the registry; /metrics renders it in the text format.
// Gauges are refreshed from the engine's stats at scrape time; counters and histograms are fed
// by the API server as requests finish.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <mutex>
#include <string>

#include "engine/llm_engine.h"

namespace locus {

class ServerMetrics {
 public:
  ServerMetrics(const std::string& model_name, int num_kv_blocks);

  // One finished completion: its prompt/generated token counts and latencies.
  void observe_finished(const RequestMetrics& metrics, std::string_view finish_reason,
                        bool count_prompt);
  // Every chunk gap of a streamed completion (vLLM's inter-token latency).
  void observe_inter_token(double seconds);
  void count_error(int status);

  // The exposition text, with gauges taken from `stats` now.
  std::string render(const EngineStats& stats, int num_unfinished);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Gauge* kv_usage_;
  prometheus::Gauge* kv_blocks_;
  prometheus::Counter* prefix_queries_;
  prometheus::Counter* prefix_hits_;
  prometheus::Counter* preemptions_;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generation_tokens_;
  prometheus::Family<prometheus::Counter>* success_;
  prometheus::Family<prometheus::Counter>* errors_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* tpot_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* e2e_;
  prometheus::Histogram* prompt_len_;
  prometheus::Histogram* generation_len_;
  std::string model_name_;
  std::mutex render_mutex_;  // prometheus-cpp is thread-safe; the delta bookkeeping is not
  // Engine counters are cumulative; the Prometheus counters advance by the difference.
  uint64_t seen_prefix_queries_ = 0;
  uint64_t seen_prefix_hits_ = 0;
  uint64_t seen_preemptions_ = 0;
};

}  // namespace locus
