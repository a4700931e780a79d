#include "loadgen/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/version.h"

namespace locus::loadgen {

using Json = nlohmann::json;

namespace {

double percentile(const Distribution& d, double p) {
  for (const auto& [q, v] : d.percentiles) {
    if (q == p) return v;
  }
  return NAN;  // not asked for: shows as nan rather than as a made-up number
}

Json optional_json(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// JSON has no infinity (nlohmann writes null); an infinite request rate is saved as "inf", the
// way `bench serve` saves it.
Json value_json(double v) {
  return std::isinf(v) ? Json("inf") : Json(v);
}

}  // namespace

SweepPoint summarize_sweep_point(double value, const ServeMetrics& m, int num_gpus) {
  SweepPoint p;
  p.value = value;
  p.completed = m.completed;
  p.failed = m.failed;
  p.output_throughput = m.output_throughput;
  p.output_throughput_per_gpu = m.output_throughput / std::max(num_gpus, 1);
  if (m.tpot_ms.count > 0 && m.tpot_ms.median > 0) p.tok_per_user = 1000.0 / m.tpot_ms.median;
  p.ttft_p50_ms = m.ttft_ms.median;
  p.ttft_p99_ms = percentile(m.ttft_ms, 99);
  p.tpot_p50_ms = m.tpot_ms.median;
  p.tpot_p99_ms = percentile(m.tpot_ms, 99);
  return p;
}

std::optional<double> throughput_at(std::span<const SweepPoint> points, double target) {
  std::optional<double> best;
  auto offer = [&](double y) { best = best ? std::max(*best, y) : y; };
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& a = points[i];
    if (!a.tok_per_user) continue;
    if (*a.tok_per_user == target) offer(a.output_throughput_per_gpu);
    if (i + 1 == points.size() || !points[i + 1].tok_per_user) continue;
    const SweepPoint& b = points[i + 1];
    const double xa = *a.tok_per_user, xb = *b.tok_per_user;
    if (target < std::min(xa, xb) || target > std::max(xa, xb) || xa == xb) continue;
    const double t = (target - xa) / (xb - xa);
    offer(a.output_throughput_per_gpu +
          t * (b.output_throughput_per_gpu - a.output_throughput_per_gpu));
  }
  return best;
}

std::vector<TargetThroughput> throughput_at_targets(std::span<const SweepPoint> points,
                                                    std::span<const double> targets) {
  std::vector<TargetThroughput> out;
  for (double t : targets)
    out.push_back({t, throughput_at(points, t)});
  return out;
}

std::string format_sweep_table(const std::string& parameter, std::span<const SweepPoint> points,
                               int num_gpus, std::span<const TargetThroughput> targets) {
  std::string s = fmt::format("{:=^104}\n", " Sweep Result ");
  s += fmt::format("{:>15} {:>10} {:>13} {:>11} {:>10} {:>10} {:>10} {:>10} {:>9}\n", parameter,
                   "out tok/s", "out tok/s/GPU", "tok/s/user", "TTFT p50", "TTFT p99", "TPOT p50",
                   "TPOT p99", "failed");
  for (const SweepPoint& p : points) {
    s += fmt::format(
        "{:>15g} {:>10.1f} {:>13.1f} {:>11} {:>8.1f}ms {:>8.1f}ms {:>8.2f}ms {:>8.2f}ms {:>9}\n",
        p.value, p.output_throughput, p.output_throughput_per_gpu,
        p.tok_per_user ? fmt::format("{:.1f}", *p.tok_per_user) : "n/a", p.ttft_p50_ms,
        p.ttft_p99_ms, p.tpot_p50_ms, p.tpot_p99_ms, p.failed);
  }
  s += fmt::format("tok/s/user = 1000 / median TPOT (ms); {} GPU{}\n", num_gpus,
                   num_gpus == 1 ? "" : "s");
  for (const TargetThroughput& t : targets) {
    s += fmt::format("Output tok/s per GPU at {:g} tok/s/user: {}\n", t.tok_per_user,
                     t.output_throughput_per_gpu
                         ? fmt::format("{:.1f}", *t.output_throughput_per_gpu)
                         : std::string("not reached"));
  }
  s += std::string(104, '=') + "\n";
  return s;
}

Json sweep_json(const SweepHeader& h, std::vector<Json> point_docs,
                std::span<const SweepPoint> points, std::span<const TargetThroughput> targets) {
  Json values = Json::array();
  Json out_points = Json::array();
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    values.push_back(value_json(p.value));
    Json doc = i < point_docs.size() ? std::move(point_docs[i]) : Json::object();
    doc["sweep_value"] = value_json(p.value);
    doc["summary"] = {{"completed", p.completed},
                      {"failed", p.failed},
                      {"output_throughput", p.output_throughput},
                      {"output_throughput_per_gpu", p.output_throughput_per_gpu},
                      {"tok_per_user", optional_json(p.tok_per_user)},
                      {"ttft_p50_ms", p.ttft_p50_ms},
                      {"ttft_p99_ms", p.ttft_p99_ms},
                      {"tpot_p50_ms", p.tpot_p50_ms},
                      {"tpot_p99_ms", p.tpot_p99_ms}};
    out_points.push_back(std::move(doc));
  }
  Json out_targets = Json::array();
  for (const TargetThroughput& t : targets) {
    out_targets.push_back(
        {{"tok_per_user", t.tok_per_user},
         {"output_throughput_per_gpu", optional_json(t.output_throughput_per_gpu)}});
  }
  return {{"command", "bench sweep"},
          {"locus", kVersion},
          {"commit", kGitCommit},
          {"label", h.label},
          {"num_gpus", h.num_gpus},
          {"parameter", h.parameter},
          {"values", std::move(values)},
          {"tok_per_user_definition", "1000 / median TPOT (ms)"},
          {"points", std::move(out_points)},
          {"targets", std::move(out_targets)}};
}

Expected<SweepCurve> read_sweep_json(const Json& doc, const std::string& source) {
  auto bad = [&](const std::string& what) {
    return parse_error(fmt::format("{}: {}", source, what));
  };
  if (!doc.is_object() || doc.value("command", "") != "bench sweep") {
    return bad("not a `locus bench sweep` result (\"command\" is not \"bench sweep\")");
  }
  auto points = doc.find("points");
  if (points == doc.end() || !points->is_array()) return bad("no \"points\" array");
  SweepCurve curve;
  if (auto l = doc.find("label"); l != doc.end() && l->is_string()) curve.header.label = *l;
  if (auto g = doc.find("num_gpus"); g != doc.end() && g->is_number_integer()) {
    curve.header.num_gpus = g->get<int>();
  }
  if (auto p = doc.find("parameter"); p != doc.end() && p->is_string()) curve.header.parameter = *p;
  for (size_t i = 0; i < points->size(); ++i) {
    const Json& point = (*points)[i];
    auto summary = point.is_object() ? point.find("summary") : point.end();
    if (!point.is_object() || summary == point.end() || !summary->is_object()) {
      return bad(fmt::format("point {} has no \"summary\" object", i));
    }
    auto number = [&](const char* key) -> std::optional<double> {
      auto f = summary->find(key);
      if (f == summary->end() || !f->is_number()) return std::nullopt;
      return f->get<double>();
    };
    SweepPoint p;
    const auto value = point.find("sweep_value");
    const auto throughput = number("output_throughput_per_gpu");
    const bool is_inf = value != point.end() && value->is_string() && *value == "inf";
    if (value == point.end() || (!value->is_number() && !is_inf) || !throughput) {
      return bad(
          fmt::format("point {}: needs sweep_value and summary.output_throughput_per_gpu", i));
    }
    p.value = is_inf ? INFINITY : value->get<double>();
    p.output_throughput_per_gpu = *throughput;
    p.output_throughput = number("output_throughput").value_or(0);
    p.tok_per_user = number("tok_per_user");  // null: no TPOT at this point
    p.completed = static_cast<int>(number("completed").value_or(0));
    p.failed = static_cast<int>(number("failed").value_or(0));
    p.ttft_p50_ms = number("ttft_p50_ms").value_or(0);
    p.ttft_p99_ms = number("ttft_p99_ms").value_or(0);
    p.tpot_p50_ms = number("tpot_p50_ms").value_or(0);
    p.tpot_p99_ms = number("tpot_p99_ms").value_or(0);
    curve.points.push_back(p);
  }
  return curve;
}

}  // namespace locus::loadgen
