// `locus bench sweep` and `locus bench plot` (#8): the point summary (tok/s/user = 1000 / median
// TPOT), throughput at per-user targets by exact linear interpolation, the sweep JSON and its
// read-back, and the SVG chart checked as XML with the expected series, labels and ticks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "loadgen/svg_plot.h"
#include "loadgen/sweep.h"

namespace locus::loadgen {
namespace {

using Json = nlohmann::json;
constexpr double kEps = 1e-9;

SweepPoint point(double value, std::optional<double> tok_per_user, double per_gpu) {
  SweepPoint p;
  p.value = value;
  p.tok_per_user = tok_per_user;
  p.output_throughput_per_gpu = per_gpu;
  p.output_throughput = 2 * per_gpu;
  return p;
}

TEST(Sweep, PointSummaryFromServeMetrics) {
  ServeMetrics m;
  m.completed = 10;
  m.failed = 1;
  m.output_throughput = 900;
  m.tpot_ms.count = 10;
  m.tpot_ms.median = 20;
  m.tpot_ms.percentiles = {{50, 20}, {99, 35}};
  m.ttft_ms.median = 100;
  m.ttft_ms.percentiles = {{99, 400}};
  const SweepPoint p = summarize_sweep_point(4, m, 3);
  EXPECT_EQ(p.value, 4);
  ASSERT_TRUE(p.tok_per_user.has_value());
  EXPECT_NEAR(*p.tok_per_user, 50, kEps);  // 1000 / 20 ms
  EXPECT_NEAR(p.output_throughput_per_gpu, 300, kEps);
  EXPECT_NEAR(p.ttft_p99_ms, 400, kEps);
  EXPECT_NEAR(p.tpot_p99_ms, 35, kEps);
  EXPECT_EQ(p.failed, 1);
  ServeMetrics one_token;  // no request with two tokens: no TPOT, no point on the curve
  EXPECT_FALSE(summarize_sweep_point(1, one_token, 1).tok_per_user.has_value());
}

TEST(Sweep, ThroughputAtTargetsInterpolatesLinearlyBetweenMeasuredPoints) {
  // Higher concurrency: less tok/s/user, more throughput.
  const std::vector<SweepPoint> curve = {point(1, 200, 100), point(2, 100, 300), point(4, 50, 500),
                                         point(8, 25, 600)};
  EXPECT_NEAR(*throughput_at(curve, 150), 200, kEps);  // halfway between 200 and 100
  EXPECT_NEAR(*throughput_at(curve, 100), 300, kEps);  // a measured point
  EXPECT_NEAR(*throughput_at(curve, 75), 400, kEps);
  EXPECT_NEAR(*throughput_at(curve, 200), 100, kEps);  // the ends are in range
  EXPECT_NEAR(*throughput_at(curve, 25), 600, kEps);
  EXPECT_FALSE(throughput_at(curve, 250).has_value());  // faster than any point: not reached
  EXPECT_FALSE(throughput_at(curve, 20).has_value());

  // A curve that turns back passes 60 tok/s/user twice: the better throughput counts.
  const std::vector<SweepPoint> hook = {point(1, 100, 300), point(2, 50, 500), point(4, 90, 420)};
  EXPECT_NEAR(*throughput_at(hook, 60), 480, kEps);  // max(460 on the first leg, 480)
  // A point without TPOT breaks the line: no segment across it.
  const std::vector<SweepPoint> gap = {point(1, 100, 300), point(2, std::nullopt, 0),
                                       point(4, 50, 500)};
  EXPECT_FALSE(throughput_at(gap, 75).has_value());
  EXPECT_NEAR(*throughput_at(gap, 50), 500, kEps);

  const double targets[] = {50, 150, 1000};
  const auto at = throughput_at_targets(curve, targets);
  ASSERT_EQ(at.size(), 3u);
  EXPECT_NEAR(*at[0].output_throughput_per_gpu, 500, kEps);
  EXPECT_NEAR(*at[1].output_throughput_per_gpu, 200, kEps);
  EXPECT_FALSE(at[2].output_throughput_per_gpu.has_value());
  const std::string table = format_sweep_table("max_concurrency", curve, 2, at);
  EXPECT_NE(table.find("at 1000 tok/s/user: not reached"), std::string::npos) << table;
  EXPECT_NE(table.find("at 150 tok/s/user: 200.0"), std::string::npos) << table;
  EXPECT_NE(table.find("1000 / median TPOT"), std::string::npos) << table;
}

TEST(Sweep, JsonHoldsEveryPointsServeResultAndReadsBack) {
  const std::vector<SweepPoint> points = {point(1, 120, 80), point(INFINITY, std::nullopt, 90)};
  const double target_values[] = {100, 500};
  const auto targets = throughput_at_targets(points, target_values);
  std::vector<Json> docs = {
      {{"command", "bench serve"}, {"completed", 5}, {"ttft_ms", {{"p99", 1}}}},
      {{"command", "bench serve"}, {"completed", 6}}};
  const Json doc = sweep_json({"engine A", 2, "request_rate"}, docs, points, targets);
  EXPECT_EQ(doc["command"], "bench sweep");
  EXPECT_EQ(doc["label"], "engine A");
  EXPECT_EQ(doc["num_gpus"], 2);
  EXPECT_EQ(doc["parameter"], "request_rate");
  EXPECT_EQ(doc["values"], Json::array({1.0, "inf"}));  // JSON has no infinity
  EXPECT_TRUE(doc["tok_per_user_definition"].is_string());
  ASSERT_EQ(doc["points"].size(), 2u);
  EXPECT_EQ(doc["points"][0]["completed"], 5);  // the serve result is kept whole
  EXPECT_EQ(doc["points"][0]["ttft_ms"]["p99"], 1);
  EXPECT_EQ(doc["points"][1]["sweep_value"], "inf");
  EXPECT_EQ(doc["points"][0]["summary"]["tok_per_user"], 120.0);
  EXPECT_TRUE(doc["points"][1]["summary"]["tok_per_user"].is_null());
  ASSERT_EQ(doc["targets"].size(), 2u);
  EXPECT_TRUE(doc["targets"][1]["output_throughput_per_gpu"].is_null());  // not reached

  // Through text, as `locus bench plot` reads a file.
  auto curve = read_sweep_json(Json::parse(doc.dump()), "a.json");
  ASSERT_TRUE(curve.has_value()) << curve.status().to_string();
  EXPECT_EQ(curve->header.label, "engine A");
  EXPECT_EQ(curve->header.num_gpus, 2);
  ASSERT_EQ(curve->points.size(), 2u);
  EXPECT_NEAR(*curve->points[0].tok_per_user, 120, kEps);
  EXPECT_NEAR(curve->points[0].output_throughput_per_gpu, 80, kEps);
  EXPECT_FALSE(curve->points[1].tok_per_user.has_value());
  EXPECT_TRUE(std::isinf(curve->points[1].value));

  auto not_sweep = read_sweep_json(Json{{"command", "bench serve"}}, "serve.json");
  ASSERT_FALSE(not_sweep.has_value());
  EXPECT_NE(not_sweep.status().message().find("serve.json"), std::string::npos);
  auto broken =
      read_sweep_json(Json{{"command", "bench sweep"}, {"points", {Json::object()}}}, "b.json");
  ASSERT_FALSE(broken.has_value());
  EXPECT_NE(broken.status().message().find("point 0"), std::string::npos);
}

TEST(SvgPlot, NiceTicksAreOneTwoFiveStepsFromZero) {
  EXPECT_EQ(nice_ticks(430), (std::vector<double>{0, 100, 200, 300, 400, 500}));
  const auto unit = nice_ticks(1);
  ASSERT_EQ(unit.size(), 6u);
  EXPECT_NEAR(unit[1], 0.2, kEps);
  EXPECT_NEAR(unit.back(), 1.0, kEps);
  EXPECT_EQ(nice_ticks(0), nice_ticks(1));  // an empty chart still has axes
  EXPECT_EQ(nice_ticks(60), (std::vector<double>{0, 10, 20, 30, 40, 50, 60}));
}

// Checks that every tag closes in order (a well-formedness check of the writer's subset of XML:
// no comments, CDATA or '>' inside attribute values) and returns the element names in order.
std::vector<std::string> check_xml(const std::string& svg) {
  std::vector<std::string> stack, names;
  size_t pos = svg.find("?>");  // after the XML declaration
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  while ((pos = svg.find('<', pos)) != std::string::npos) {
    const size_t end = svg.find('>', pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    std::string tag = svg.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.front() == '/') {
      EXPECT_FALSE(stack.empty()) << tag;
      if (stack.empty()) break;
      EXPECT_EQ(stack.back(), tag.substr(1));
      stack.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    names.push_back(name);
    if (!self_closing) stack.push_back(name);
  }
  EXPECT_TRUE(stack.empty());
  // Text between tags has no raw '<' or '&' that is not an entity.
  const std::regex bad_amp("&(?!amp;|lt;|gt;|quot;|apos;)");
  EXPECT_FALSE(std::regex_search(svg, bad_amp));
  return names;
}

TEST(SvgPlot, ChartIsWellFormedWithOneLineAndMarkersPerSeriesAndALegend) {
  LineChart chart;
  chart.title = "Throughput vs interactivity";
  chart.x_label = "tok/s/user";
  chart.y_label = "output tok/s per GPU";
  chart.series = {{"locus <cpu> & co", {{120, 80}, {60, 150}, {30, 210}}},
                  {"vLLM", {{100, 90}, {50, 170}}}};
  const std::string svg = render_svg(chart);
  const auto names = check_xml(svg);
  EXPECT_EQ(names.front(), "svg");
  EXPECT_EQ(std::count(names.begin(), names.end(), "polyline"), 2);
  EXPECT_EQ(std::count(names.begin(), names.end(), "circle"), 5 + 2);  // markers + legend
  EXPECT_NE(svg.find(">Throughput vs interactivity</text>"), std::string::npos);
  EXPECT_NE(svg.find(">tok/s/user</text>"), std::string::npos);
  EXPECT_NE(svg.find(">output tok/s per GPU</text>"), std::string::npos);
  EXPECT_NE(svg.find(">locus &lt;cpu&gt; &amp; co</text>"), std::string::npos);  // legend
  EXPECT_NE(svg.find("data-label=\"vLLM\""), std::string::npos);
  // Axes: x ticks 0..120 by 20 (max 120), y 0..250 by 50 (max 210).
  EXPECT_NE(svg.find(">120</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">140</text>"), std::string::npos);
  EXPECT_NE(svg.find(">250</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">300</text>"), std::string::npos);
  // The first series' line passes through its three points, in order.
  const std::regex polyline("<polyline points=\"([^\"]*)\"");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(svg, m, polyline));
  const std::string coordinates = m[1].str();
  EXPECT_EQ(std::count(coordinates.begin(), coordinates.end(), ','), 3);
}

}  // namespace
}  // namespace locus::loadgen
