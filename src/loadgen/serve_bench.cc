#include "loadgen/serve_bench.h"

#include <fmt/format.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <memory>

#include "core/progress.h"
#include "loadgen/arrivals.h"

namespace locus::loadgen {

namespace net = boost::asio;
using Json = nlohmann::json;

Json request_body(const ServeBenchOptions& o, size_t i) {
  const BenchRequest& r = o.requests[i];
  Json body;
  body["model"] = o.model;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["temperature"] = o.temperature;
  if (o.endpoint.ends_with("/chat/completions")) {
    body["messages"] = Json::array({{{"role", "user"}, {"content", r.prompt_text}}});
    body["max_completion_tokens"] = r.output_len;
  } else {
    if (r.prompt_text.empty()) {
      body["prompt"] = r.prompt_ids;
    } else {
      body["prompt"] = r.prompt_text;
    }
    body["max_tokens"] = r.output_len;
  }
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body;
}

namespace {

struct Run {
  const ServeBenchOptions& o;
  std::chrono::steady_clock::time_point epoch;
  std::vector<RequestRecord> records;
  int in_flight = 0;
  int remaining = 0;
  std::unique_ptr<net::steady_timer> slot_free;  // cancelled whenever a request finishes
  std::unique_ptr<Progress> progress;
};

net::awaitable<void> one_request(Run& run, size_t i, std::string body, int64_t prompt_tokens) {
  StreamRequest req;
  req.path = run.o.endpoint;
  req.body = std::move(body);
  req.api_key = run.o.api_key;
  req.prompt_tokens = prompt_tokens;
  RequestRecord record = co_await post_streaming(run.o.server, req, run.epoch);
  run.records[i] = std::move(record);
  --run.in_flight;
  --run.remaining;
  if (run.progress) run.progress->advance();
  run.slot_free->cancel();
}

// Sends request i at arrival[i] (seconds from the start), holding it while max_concurrency
// requests are in flight (vLLM's semaphore: the wait delays the send, not the schedule).
net::awaitable<void> dispatch(Run& run, std::vector<double> arrivals) {
  auto executor = co_await net::this_coro::executor;
  net::steady_timer timer(executor);
  // Cancellation is how the waits normally end; a named token (GCC 12 mishandles temporaries
  // inside co_await expressions).
  boost::system::error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  for (size_t i = 0; i < run.o.requests.size(); ++i) {
    const auto when = run.epoch + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(arrivals[i]));
    if (when > std::chrono::steady_clock::now()) {
      timer.expires_at(when);
      co_await timer.async_wait(token);
    }
    while (run.o.max_concurrency > 0 && run.in_flight >= run.o.max_concurrency) {
      run.slot_free->expires_at(std::chrono::steady_clock::time_point::max());
      co_await run.slot_free->async_wait(token);
    }
    ++run.in_flight;
    std::string body = request_body(run.o, i).dump();
    const auto prompt_tokens = static_cast<int64_t>(run.o.requests[i].prompt_ids.size());
    net::co_spawn(executor, one_request(run, i, std::move(body), prompt_tokens), net::detached);
  }
}

net::awaitable<void> scrape_prefix_cache(const ServerAddress& server, std::string api_key,
                                         std::optional<PrefixCacheCounters>& out) {
  const std::string path = "/metrics";
  auto page = co_await http_get(server, path, api_key);
  if (page) out = parse_prefix_cache_counters(*page);
}

}  // namespace

Expected<ServeBenchResult> run_serve_bench(const ServeBenchOptions& o) {
  if (o.requests.empty()) return invalid_argument("bench serve: no requests to send");
  if (o.endpoint.ends_with("/chat/completions")) {
    for (const BenchRequest& r : o.requests) {
      if (r.prompt_text.empty()) {
        return invalid_argument("bench serve: the chat endpoint needs every prompt as text");
      }
    }
  }
  net::io_context io;
  // Warm-ups: sent together, waited for, not measured (vLLM sends them before the run).
  if (o.num_warmups > 0) {
    Run warm{o, std::chrono::steady_clock::now(), {}, 0, 0, nullptr, nullptr};
    warm.records.resize(o.requests.size());
    warm.slot_free = std::make_unique<net::steady_timer>(io);
    for (int w = 0; w < o.num_warmups; ++w) {
      const size_t i = static_cast<size_t>(w) % o.requests.size();
      ++warm.in_flight;
      ++warm.remaining;
      net::co_spawn(io, one_request(warm, i, request_body(o, i).dump(), 0), net::detached);
    }
    io.run();
    io.restart();
    for (const RequestRecord& r : warm.records) {
      if (!r.error.empty()) return io_error("bench serve: a warm-up request failed: " + r.error);
    }
  }

  std::optional<PrefixCacheCounters> cache_before, cache_after;
  net::co_spawn(io, scrape_prefix_cache(o.server, o.api_key, cache_before), net::detached);
  io.run();
  io.restart();

  const double rate = o.request_rate > 0 ? o.request_rate : INFINITY;
  std::vector<double> arrivals =
      arrival_times(static_cast<int>(o.requests.size()), rate, o.burstiness, o.seed);
  Run run{o, std::chrono::steady_clock::now(), {}, 0, 0, nullptr, nullptr};
  run.records.resize(o.requests.size());
  run.remaining = static_cast<int>(o.requests.size());
  run.slot_free = std::make_unique<net::steady_timer>(io);
  if (o.progress) {
    run.progress = std::make_unique<Progress>("bench serve",
                                              static_cast<int64_t>(o.requests.size()), "requests");
  }
  net::co_spawn(io, dispatch(run, std::move(arrivals)), net::detached);
  io.run();
  const double duration = seconds_since(run.epoch);
  if (run.progress) run.progress->finish();
  if (cache_before) {
    io.restart();
    net::co_spawn(io, scrape_prefix_cache(o.server, o.api_key, cache_after), net::detached);
    io.run();
  }

  ServeBenchResult result;
  result.metrics = compute_serve_metrics(run.records, duration, o.goodput, o.percentiles);
  for (const RequestRecord& r : run.records) {
    if (r.success || result.first_errors.size() >= 5) continue;
    if (std::find(result.first_errors.begin(), result.first_errors.end(), r.error) ==
        result.first_errors.end()) {
      result.first_errors.push_back(r.error);
    }
  }
  result.records = std::move(run.records);
  if (cache_before && cache_after) {
    result.prefix_cache = PrefixCacheCounters{cache_after->queries - cache_before->queries,
                                              cache_after->hits - cache_before->hits};
  }
  return result;
}

std::string format_serve_result(const ServeBenchResult& r, const ServeBenchOptions& o) {
  const ServeMetrics& m = r.metrics;
  std::string s;
  auto line = [&](const std::string& name, const std::string& value) {
    s += fmt::format("{:<40} {:<10}\n", name, value);
  };
  auto title = [&](const std::string& t) { s += fmt::format("{:-^50}\n", t); };
  s += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line("Successful requests:", std::to_string(m.completed));
  line("Failed requests:", std::to_string(m.failed));
  if (o.max_concurrency > 0)
    line("Maximum request concurrency:", std::to_string(o.max_concurrency));
  if (o.request_rate > 0 && std::isfinite(o.request_rate)) {
    line("Request rate configured (RPS):", fmt::format("{:.2f}", o.request_rate));
  }
  line("Benchmark duration (s):", fmt::format("{:.2f}", m.duration_s));
  line("Total input tokens:", std::to_string(m.total_input));
  line("Total generated tokens:", std::to_string(m.total_output));
  line("Request throughput (req/s):", fmt::format("{:.2f}", m.request_throughput));
  if (m.goodput) line("Request goodput (req/s):", fmt::format("{:.2f}", *m.goodput));
  line("Output token throughput (tok/s):", fmt::format("{:.2f}", m.output_throughput));
  line("Peak concurrent requests:", std::to_string(m.peak_concurrency));
  line("Total Token throughput (tok/s):", fmt::format("{:.2f}", m.total_token_throughput));
  if (r.prefix_cache && r.prefix_cache->queries > 0) {
    line("Prefix cache hit rate (server):",
         fmt::format("{:.2f}%", 100.0 * r.prefix_cache->hits / r.prefix_cache->queries));
  }
  auto block = [&](const char* heading, const char* key, const Distribution& d) {
    title(heading);
    line(fmt::format("Mean {} (ms):", key), fmt::format("{:.2f}", d.mean));
    line(fmt::format("Median {} (ms):", key), fmt::format("{:.2f}", d.median));
    for (const auto& [p, v] : d.percentiles) {
      if (p == 50) continue;
      line(fmt::format("P{:g} {} (ms):", p, key), fmt::format("{:.2f}", v));
    }
  };
  block("Time to First Token", "TTFT", m.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", m.tpot_ms);
  block("Inter-token Latency", "ITL", m.itl_ms);
  block("End-to-end Latency", "E2EL", m.e2el_ms);
  s += std::string(50, '=') + "\n";
  for (const std::string& e : r.first_errors)
    s += "error: " + e + "\n";
  return s;
}

}  // namespace locus::loadgen
