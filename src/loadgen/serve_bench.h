// `locus bench serve`: replays a dataset against an OpenAI-compatible server with vLLM's arrival
// process and concurrency cap, and measures what its clients see (serve_metrics.h). All requests
// run as coroutines on one I/O thread: parsing a stream chunk costs microseconds, so one thread
// keeps thousands of streams timed accurately.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/agentic.h"
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
  // Set instead of `requests` for the agentic workload (agentic.h): sessions of turns, each turn
  // sent when the previous one's reply arrived. request_rate then paces session starts.
  std::shared_ptr<const AgenticWorkload> agentic;
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
  std::vector<RequestRecord> records;     // in dataset order; agentic: [session][turn]
  std::vector<std::string> first_errors;  // up to 5 distinct failure messages
  // The server's prefix-cache counters over the run (its /metrics before and after), when it
  // exposes them.
  std::optional<PrefixCacheCounters> prefix_cache;
  std::optional<AgenticTurnStats> agentic;  // TTFT by context length and by turn
};

// What every request body holds but its prompt: model, stream on with usage, max tokens under
// the endpoint's name, temperature, and vLLM's extras when set.
nlohmann::json base_request_body(const ServeBenchOptions& o, int64_t max_tokens);
// The JSON body of request i of `requests`.
nlohmann::json request_body(const ServeBenchOptions& o, size_t i);
bool is_chat_endpoint(const ServeBenchOptions& o);

Expected<ServeBenchResult> run_serve_bench(const ServeBenchOptions& options);

// vLLM's result table (+ the agentic tables).
std::string format_serve_result(const ServeBenchResult& result, const ServeBenchOptions& options);

// The measured part of `--save-result`'s JSON (vLLM's key names): counts, throughputs,
// distributions, errors, the server's prefix-cache counters, the agentic statistics.
nlohmann::json serve_result_json(const ServeBenchResult& result);
nlohmann::json distribution_json(const Distribution& d);

}  // namespace locus::loadgen
