// `locus bench sweep`: `bench serve` at a series of concurrencies (or request rates) against one
// server, every point saved as `bench serve` saves it, and the throughput-per-GPU vs
// tok/s/user table with the throughput at given per-user targets (loadgen/sweep.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/bench_serve_options.h"
#include "cli/commands.h"
#include "loadgen/serve_bench.h"
#include "loadgen/sweep.h"

namespace locus::cli {
namespace {

struct SweepCliOptions {
  ServeCliOptions serve;
  std::vector<int> concurrencies;
  std::vector<double> rates;
  int num_gpus = 1;
  std::vector<double> targets = {50, 100, 150};
  std::string label;
};

int run_sweep_command(const SweepCliOptions& o) {
  if (o.concurrencies.empty() == o.rates.empty()) {
    return report_error(
        "bench sweep: give either --max-concurrency LIST (e.g. 1,2,4,8) or --request-rate LIST");
  }
  auto setup = ServeBenchSetup::create(o.serve);
  if (!setup) return report_error(setup.status().message());
  const bool by_concurrency = !o.concurrencies.empty();
  std::vector<double> values;
  if (by_concurrency) {
    for (int c : o.concurrencies)
      values.push_back(c);
  } else {
    values = o.rates;
  }
  loadgen::SweepHeader header;
  header.label = o.label.empty() ? fmt::format("{} @ {}", o.serve.model, o.serve.url()) : o.label;
  header.num_gpus = o.num_gpus;
  header.parameter = by_concurrency ? "max_concurrency" : "request_rate";

  std::vector<nlohmann::json> docs;
  std::vector<loadgen::SweepPoint> points;
  for (size_t i = 0; i < values.size(); ++i) {
    // A fresh dataset per point: the same prompts again would hit the server's prefix cache
    // that the previous point filled, and flatter every point after the first.
    const uint64_t seed = o.serve.seed + i;
    auto bo = setup->options(seed);
    if (!bo) return report_error(bo.status().message());
    if (by_concurrency) {
      bo->max_concurrency = o.concurrencies[i];
    } else {
      bo->request_rate = values[i];
      bo->max_concurrency = 0;
    }
    if (std::find(bo->percentiles.begin(), bo->percentiles.end(), 99.0) == bo->percentiles.end()) {
      bo->percentiles.push_back(99);  // the table's p99 columns
    }
    std::fprintf(stderr, "bench sweep: point %zu/%zu, %s %g\n", i + 1, values.size(),
                 header.parameter.c_str(), values[i]);
    auto result = loadgen::run_serve_bench(*bo);
    if (!result) return report_error(result.status().message());
    if (!o.serve.disable_tqdm)
      std::printf("%s", loadgen::format_serve_result(*result, *bo).c_str());
    nlohmann::json doc = setup->config_json(*bo);
    doc.update(loadgen::serve_result_json(*result));
    docs.push_back(std::move(doc));
    points.push_back(loadgen::summarize_sweep_point(values[i], result->metrics, o.num_gpus));
  }
  const auto targets = loadgen::throughput_at_targets(points, o.targets);
  std::printf("%s",
              loadgen::format_sweep_table(header.parameter, points, o.num_gpus, targets).c_str());
  const auto path = setup->result_path(fmt::format("locus-bench-sweep-{}.json", o.serve.seed));
  const nlohmann::json doc = loadgen::sweep_json(header, std::move(docs), points, targets);
  if (Status s = write_json_file(path, doc); !s.is_ok()) return report_error(s.message());
  std::fprintf(stderr, "saved %s\n", path.string().c_str());
  return 0;
}

}  // namespace

void add_bench_sweep_command(CLI::App* bench, Runner& run) {
  auto o = std::make_shared<SweepCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "sweep",
      "bench serve at a series of concurrencies or rates: throughput per GPU vs tok/s/user");
  add_serve_options(cmd, o->serve, /*sweep=*/true);
  cmd->add_option("--max-concurrency", o->concurrencies,
                  "Concurrencies to run, e.g. 1,2,4,8 (point i draws its dataset with --seed + i)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  // CLI::PositiveNumber refuses inf, which is a rate users sweep to (everything at once).
  const CLI::Validator positive_or_inf(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        return end != value.c_str() && *end == '\0' && v > 0 ? "" : value + " is not > 0 or inf";
      },
      "RATE > 0 or inf");
  cmd->add_option("--request-rate", o->rates, "Request rates to run instead, e.g. 1,2,4,inf")
      ->delimiter(',')
      ->check(positive_or_inf);
  cmd->add_option("--num-gpus", o->num_gpus, "GPUs the server uses (throughput per GPU)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--target-tok-per-user", o->targets,
                  "Per-user speeds (1000 / median TPOT ms) to report the throughput at")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--label", o->label, "The curve's name on plots (default: MODEL @ URL)");
  cmd->callback([&run, o] { run = [o] { return run_sweep_command(*o); }; });
}

}  // namespace locus::cli
