// `locus bench serve`: replays a dataset against an OpenAI-compatible server with vLLM's arrival
// process and concurrency cap, and measures what its clients see (serve_metrics.h). All requests
// run as coroutines on one I/O thread: parsing a stream chunk costs microseconds, so one thread
// keeps thousands of streams timed accurately.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/http_stream_client.h"
#include "loadgen/random_dataset.h"
#include "loadgen/serve_metrics.h"
#include "loadgen/server_metrics.h"

namespace locus::loadgen {

struct ServeBenchOptions {
  ServerAddress server;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // the request's "model"
  std::string api_key;
  // The chat endpoint sends each request's prompt_text (the CLI decodes the random datasets'
  // ids); completions send the text when there is one, else the token ids.
  std::vector<BenchRequest> requests;
  double request_rate = 0;  // requests/s; 0 or inf = all at once
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0 = unlimited
  int num_warmups = 0;
  bool ignore_eos = false;
  double temperature = 0.0;
  uint64_t seed = 0;
  Slo goodput;
  std::vector<double> percentiles = {50, 90, 99};
  bool progress = true;
};

struct ServeBenchResult {
  ServeMetrics metrics;
  std::vector<RequestRecord> records;     // in dataset order
  std::vector<std::string> first_errors;  // up to 5 distinct failure messages
  // The server's prefix-cache counters over the run (its /metrics before and after), when it
  // exposes them.
  std::optional<PrefixCacheCounters> prefix_cache;
};

// The JSON body of request i (stream on, usage requested, vLLM's extras when set).
nlohmann::json request_body(const ServeBenchOptions& o, size_t i);

Expected<ServeBenchResult> run_serve_bench(const ServeBenchOptions& options);

// vLLM's result table.
std::string format_serve_result(const ServeBenchResult& result, const ServeBenchOptions& options);

}  // namespace locus::loadgen
