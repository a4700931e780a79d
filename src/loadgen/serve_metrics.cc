#include "loadgen/serve_metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

namespace locus::loadgen {

Distribution distribution(std::vector<double> v, std::span<const double> percentiles) {
  Distribution d;
  d.count = static_cast<int64_t>(v.size());
  if (v.empty()) {
    for (double p : percentiles)
      d.percentiles.emplace_back(p, 0.0);
    return d;
  }
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  d.mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double sq = 0;
  for (double x : v)
    sq += (x - d.mean) * (x - d.mean);
  d.std = std::sqrt(sq / n);
  d.min = v.front();
  d.max = v.back();
  // numpy.percentile's default ("linear"): rank p/100 * (n - 1), interpolated.
  auto at = [&](double p) {
    const double rank = p / 100.0 * (n - 1);
    const auto lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
  };
  d.median = at(50);
  for (double p : percentiles)
    d.percentiles.emplace_back(p, at(p));
  return d;
}

std::optional<std::string> parse_slo_term(const std::string& term, Slo& slo) {
  const size_t colon = term.find(':');
  if (colon == std::string::npos) {
    return fmt::format("--goodput {}: expected KEY:MILLISECONDS (ttft, tpot or e2el)", term);
  }
  const std::string key = term.substr(0, colon);
  const std::string value = term.substr(colon + 1);
  double ms = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), ms);
  if (ec != std::errc() || end != value.data() + value.size() || !(ms >= 0) || !std::isfinite(ms)) {
    return fmt::format("--goodput {}: '{}' is not a non-negative number of milliseconds", term,
                       value);
  }
  if (key == "ttft") {
    slo.ttft_ms = ms;
  } else if (key == "tpot") {
    slo.tpot_ms = ms;
  } else if (key == "e2el") {
    slo.e2el_ms = ms;
  } else {
    return fmt::format("--goodput {}: unknown metric '{}' (ttft, tpot or e2el)", term, key);
  }
  return std::nullopt;
}

ServeMetrics compute_serve_metrics(std::span<const RequestRecord> records, double duration_s,
                                   const Slo& slo, std::span<const double> percentiles) {
  ServeMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<std::pair<double, int>> events;  // (time, +1 start / -1 end)
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++m.failed;
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_tokens;
    m.total_output += r.output_tokens;
    const double request_tpot =
        r.output_tokens > 1 ? (r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1)
                            : 0.0;
    if (r.output_tokens > 1) tpot.push_back(request_tpot * 1e3);
    ttft.push_back(r.ttft_s * 1e3);
    e2el.push_back(r.latency_s * 1e3);
    for (double g : r.itl_s)
      itl.push_back(g * 1e3);
    if (!slo.empty()) {
      const bool good = (!slo.ttft_ms || r.ttft_s * 1e3 <= *slo.ttft_ms) &&
                        (!slo.tpot_ms || request_tpot * 1e3 <= *slo.tpot_ms) &&
                        (!slo.e2el_ms || r.latency_s * 1e3 <= *slo.e2el_ms);
      if (good) ++m.good_requests;
    }
    events.emplace_back(r.start_s, +1);
    events.emplace_back(r.start_s + r.latency_s, -1);
  }
  // Ends sort before starts at the same instant: a request that finishes as another starts
  // does not overlap it.
  std::sort(events.begin(), events.end());
  int in_flight = 0;
  for (const auto& [t, delta] : events) {
    in_flight += delta;
    m.peak_concurrency = std::max(m.peak_concurrency, in_flight);
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.output_throughput = static_cast<double>(m.total_output) / duration_s;
    m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / duration_s;
    if (!slo.empty()) m.goodput = m.good_requests / duration_s;
  }
  m.ttft_ms = distribution(std::move(ttft), percentiles);
  m.tpot_ms = distribution(std::move(tpot), percentiles);
  m.itl_ms = distribution(std::move(itl), percentiles);
  m.e2el_ms = distribution(std::move(e2el), percentiles);
  return m;
}

}  // namespace locus::loadgen
