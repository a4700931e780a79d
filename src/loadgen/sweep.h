// `locus bench sweep`'s arithmetic and file format: one serve run per swept value (concurrency or
// request rate) reduced to a point of the curve users compare engines by — output throughput
// per GPU against tokens per second per user — and the throughput at given per-user targets.
//
// tok/s/user = 1000 / median TPOT (ms): the decode speed a typical user sees once the first
// token arrived (the interactivity axis of vLLM's and SemiAnalysis' charts). A run where no
// request produced two tokens has no TPOT, hence no point on the curve.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/serve_metrics.h"

namespace locus::loadgen {

struct SweepPoint {
  double value = 0;  // the swept max concurrency or request rate
  int completed = 0;
  int failed = 0;
  double output_throughput = 0;  // tok/s over the run
  double output_throughput_per_gpu = 0;
  std::optional<double> tok_per_user;
  double ttft_p50_ms = 0, ttft_p99_ms = 0;
  double tpot_p50_ms = 0, tpot_p99_ms = 0;
};

// `m`'s percentiles must include 99 (the sweep asks for it).
SweepPoint summarize_sweep_point(double value, const ServeMetrics& m, int num_gpus);

// Output throughput per GPU at `tok_per_user`, by linear interpolation between consecutive
// points (in sweep order) whose tok/s/user bracket it; where the curve passes the target more
// than once, the highest throughput. nullopt ("not reached") outside the measured range.
std::optional<double> throughput_at(std::span<const SweepPoint> points, double tok_per_user);

struct TargetThroughput {
  double tok_per_user = 0;
  std::optional<double> output_throughput_per_gpu;
};
std::vector<TargetThroughput> throughput_at_targets(std::span<const SweepPoint> points,
                                                    std::span<const double> targets);

// The sweep's table; `parameter` names the first column (max_concurrency or request_rate).
std::string format_sweep_table(const std::string& parameter, std::span<const SweepPoint> points,
                               int num_gpus, std::span<const TargetThroughput> targets);

// The saved sweep: {"command": "bench sweep", label, num_gpus, parameter, values,
// tok_per_user_definition, points: [each point's full `bench serve` result + "sweep_value" +
// "summary"], targets}.
struct SweepHeader {
  std::string label;  // the curve's name on plots (--label; default model @ server)
  int num_gpus = 1;
  std::string parameter;  // max_concurrency | request_rate
};
nlohmann::json sweep_json(const SweepHeader& header, std::vector<nlohmann::json> point_docs,
                          std::span<const SweepPoint> points,
                          std::span<const TargetThroughput> targets);

// What `locus bench plot` reads back; errors name `source` (the file).
struct SweepCurve {
  SweepHeader header;
  std::vector<SweepPoint> points;
};
Expected<SweepCurve> read_sweep_json(const nlohmann::json& doc, const std::string& source);

}  // namespace locus::loadgen
