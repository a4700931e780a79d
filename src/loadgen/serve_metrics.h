// What `locus bench serve` measures, with vLLM's definitions (benchmarks/serve.py), so numbers
// compare across servers:
//  - TTFT: send -> first chunk with content; E2EL: send -> last chunk with content.
//  - TPOT per request: (E2EL - TTFT) / (output_tokens - 1), for requests with > 1 output token.
//  - ITL: every gap between consecutive content chunks of every request (a chunk may carry
//    several tokens, as in vLLM).
//  - Throughputs over the benchmark's duration; goodput: requests meeting every given SLO per
//    second (a one-token request's TPOT counts as 0).
// Failed requests are counted and never enter the latency statistics.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace locus::loadgen {

struct RequestRecord {
  bool success = false;
  std::string error;          // why it failed (HTTP status and body, transport error)
  int64_t prompt_tokens = 0;  // from the server's usage when reported, else the request's
  int64_t output_tokens = 0;  // from usage when reported, else the content chunks received
  double start_s = 0;         // when the request was sent, seconds from the benchmark start
  double ttft_s = 0;
  double latency_s = 0;  // E2EL
  std::vector<double> itl_s;
  // The reply's text (completions `text`, chat `delta.content`), kept only when the caller asks:
  // the agentic workload sends it back as the next turn's assistant message.
  std::string generated_text;
};

// mean / median / population std (numpy's) and numpy's linear-interpolated percentiles.
struct Distribution {
  int64_t count = 0;
  double mean = 0, median = 0, std = 0, min = 0, max = 0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value)
};
Distribution distribution(std::vector<double> values, std::span<const double> percentiles);

// --goodput ttft:MS tpot:MS e2el:MS (milliseconds).
struct Slo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool empty() const { return !ttft_ms && !tpot_ms && !e2el_ms; }
};
// Parses "ttft:500 tpot:50" style terms; errors name the bad term.
std::optional<std::string> parse_slo_term(const std::string& term, Slo& slo);

struct ServeMetrics {
  int completed = 0;
  int failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double duration_s = 0;
  double request_throughput = 0;      // completed / s
  double output_throughput = 0;       // output tokens / s
  double total_token_throughput = 0;  // (input + output) tokens / s
  std::optional<double> goodput;      // good requests / s, when an SLO was given
  int good_requests = 0;
  int peak_concurrency = 0;  // most requests in flight at once
  Distribution ttft_ms, tpot_ms, itl_ms, e2el_ms;
};

ServeMetrics compute_serve_metrics(std::span<const RequestRecord> records, double duration_s,
                                   const Slo& slo, std::span<const double> percentiles);

}  // namespace locus::loadgen
