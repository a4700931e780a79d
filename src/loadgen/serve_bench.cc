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
#include "loadgen/serve_run.h"

namespace locus::loadgen {

namespace net = boost::asio;
using Json = nlohmann::json;

bool is_chat_endpoint(const ServeBenchOptions& o) {
  return o.endpoint.ends_with("/chat/completions");
}

Json base_request_body(const ServeBenchOptions& o, int64_t max_tokens) {
  Json body;
  body["model"] = o.model;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["temperature"] = o.temperature;
  body[is_chat_endpoint(o) ? "max_completion_tokens" : "max_tokens"] = max_tokens;
  if (o.ignore_eos) body["ignore_eos"] = true;
  return body;
}

Json request_body(const ServeBenchOptions& o, size_t i) {
  const BenchRequest& r = o.requests[i];
  Json body = base_request_body(o, r.output_len);
  if (is_chat_endpoint(o)) {
    body["messages"] = Json::array({{{"role", "user"}, {"content", r.prompt_text}}});
  } else if (r.prompt_text.empty()) {
    body["prompt"] = r.prompt_ids;
  } else {
    body["prompt"] = r.prompt_text;
  }
  return body;
}

net::awaitable<void> acquire_request_slot(ServeRun& run) {
  // slot_free never expires: cancel() is how every wait ends. Re-arming it here would cancel the
  // other waiters (agentic sessions wait side by side) and they would wake each other forever.
  // A named token (GCC 12 mishandles temporaries inside co_await expressions).
  boost::system::error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  while (run.o.max_concurrency > 0 && run.in_flight >= run.o.max_concurrency) {
    co_await run.slot_free->async_wait(token);
  }
  ++run.in_flight;
}

net::awaitable<RequestRecord> send_request(ServeRun& run, std::string& body,
                                           const int64_t& prompt_tokens, const bool& keep_text) {
  StreamRequest req;
  req.path = run.o.endpoint;
  req.body = std::move(body);
  req.api_key = run.o.api_key;
  req.prompt_tokens = prompt_tokens;
  req.keep_text = keep_text;
  RequestRecord record = co_await post_streaming(run.o.server, req, run.epoch);
  --run.in_flight;
  if (run.progress) run.progress->advance();
  run.slot_free->cancel();
  co_return record;
}

namespace {

net::awaitable<void> one_request(ServeRun& run, size_t i, std::string body, int64_t prompt_tokens) {
  const bool keep_text = false;
  RequestRecord record = co_await send_request(run, body, prompt_tokens, keep_text);
  run.records[i] = std::move(record);
}

// Sends request i at arrival[i] (seconds from the start), holding it while max_concurrency
// requests are in flight.
net::awaitable<void> dispatch(ServeRun& run, std::vector<double> arrivals) {
  auto executor = co_await net::this_coro::executor;
  net::steady_timer timer(executor);
  boost::system::error_code ec;
  auto token = net::redirect_error(net::use_awaitable, ec);
  for (size_t i = 0; i < run.o.requests.size(); ++i) {
    const auto when = run.epoch + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(arrivals[i]));
    if (when > std::chrono::steady_clock::now()) {
      timer.expires_at(when);
      co_await timer.async_wait(token);
    }
    co_await acquire_request_slot(run);
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
  const AgenticWorkload* agentic = o.agentic.get();
  if (agentic != nullptr) {
    if (agentic->options.sessions <= 0 || agentic->options.turns <= 0) {
      return invalid_argument("bench serve: the agentic workload needs sessions and turns");
    }
  } else if (o.requests.empty()) {
    return invalid_argument("bench serve: no requests to send");
  } else if (is_chat_endpoint(o)) {
    for (const BenchRequest& r : o.requests) {
      if (r.prompt_text.empty()) {
        return invalid_argument("bench serve: the chat endpoint needs every prompt as text");
      }
    }
  }
  net::io_context io;
  // Warm-ups: sent together, waited for, not measured (vLLM sends them before the run).
  if (o.num_warmups > 0) {
    ServeRun warm{o, std::chrono::steady_clock::now(), {}, 0, nullptr, nullptr};
    warm.records.resize(static_cast<size_t>(o.num_warmups));
    warm.slot_free =
        std::make_unique<net::steady_timer>(io, std::chrono::steady_clock::time_point::max());
    for (size_t w = 0; w < warm.records.size(); ++w) {
      std::string body = agentic != nullptr ? agentic_warmup_body(o)
                                            : request_body(o, w % o.requests.size()).dump();
      ++warm.in_flight;
      net::co_spawn(io, one_request(warm, w, std::move(body), 0), net::detached);
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
  const size_t num_records = agentic != nullptr ? static_cast<size_t>(agentic->options.sessions) *
                                                      static_cast<size_t>(agentic->options.turns)
                                                : o.requests.size();
  // Agentic: the arrival process paces session starts; turns follow replies.
  const int num_arrivals =
      agentic != nullptr ? agentic->options.sessions : static_cast<int>(o.requests.size());
  std::vector<double> arrivals = arrival_times(num_arrivals, rate, o.burstiness, o.seed);
  ServeRun run{o, std::chrono::steady_clock::now(), {}, 0, nullptr, nullptr};
  run.records.resize(num_records);
  run.slot_free =
      std::make_unique<net::steady_timer>(io, std::chrono::steady_clock::time_point::max());
  if (o.progress) {
    run.progress =
        std::make_unique<Progress>("bench serve", static_cast<int64_t>(num_records), "requests");
  }
  if (agentic != nullptr) {
    net::co_spawn(io, run_agentic_sessions(run, std::move(arrivals)), net::detached);
  } else {
    net::co_spawn(io, dispatch(run, std::move(arrivals)), net::detached);
  }
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
  if (agentic != nullptr) {
    result.agentic = agentic_turn_stats(run.records, agentic->options.turns);
    // The replies were kept to build the next turns; the result does not need them.
    for (RequestRecord& r : run.records)
      std::string().swap(r.generated_text);
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
  if (r.agentic) s += format_agentic_stats(*r.agentic);
  s += std::string(50, '=') + "\n";
  for (const std::string& e : r.first_errors)
    s += "error: " + e + "\n";
  return s;
}

Json distribution_json(const Distribution& d) {
  Json j = {{"count", d.count}, {"mean", d.mean}, {"median", d.median},
            {"std", d.std},     {"min", d.min},   {"max", d.max}};
  for (const auto& [p, v] : d.percentiles)
    j[fmt::format("p{:g}", p)] = v;
  return j;
}

Json serve_result_json(const ServeBenchResult& r) {
  const ServeMetrics& m = r.metrics;
  Json doc = {{"completed", m.completed},
              {"failed", m.failed},
              {"duration_s", m.duration_s},
              {"total_input_tokens", m.total_input},
              {"total_output_tokens", m.total_output},
              {"request_throughput", m.request_throughput},
              {"output_throughput", m.output_throughput},
              {"total_token_throughput", m.total_token_throughput},
              {"peak_concurrency", m.peak_concurrency},
              {"ttft_ms", distribution_json(m.ttft_ms)},
              {"tpot_ms", distribution_json(m.tpot_ms)},
              {"itl_ms", distribution_json(m.itl_ms)},
              {"e2el_ms", distribution_json(m.e2el_ms)},
              {"errors", r.first_errors}};
  if (m.goodput) doc["request_goodput"] = *m.goodput;
  if (r.prefix_cache) {
    doc["server_prefix_cache"] = {{"queries", r.prefix_cache->queries},
                                  {"hits", r.prefix_cache->hits}};
  }
  if (r.agentic) doc["agentic"] = agentic_stats_json(*r.agentic);
  return doc;
}

}  // namespace locus::loadgen
