// `locus bench serve`: the load generator against any OpenAI-compatible server (locus, vLLM,
// llama.cpp's llama-server), with vLLM's flag names, metrics and result table.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/bench_serve_options.h"
#include "cli/commands.h"
#include "loadgen/serve_bench.h"

namespace locus::cli {
namespace {

int run_serve_command(const ServeCliOptions& o) {
  auto setup = ServeBenchSetup::create(o);
  if (!setup) return report_error(setup.status().message());
  auto bo = setup->options(o.seed);
  if (!bo) return report_error(bo.status().message());
  if (!o.disable_tqdm) {
    const std::string what = bo->agentic ? fmt::format("{} agentic sessions x {} turns",
                                                       o.agentic.sessions, o.agentic.turns)
                                         : fmt::format("{} requests", o.num_prompts);
    std::fprintf(stderr, "bench serve: %s to %s%s, rate %s, burstiness %.2f%s\n", what.c_str(),
                 bo->server.host.c_str(), bo->endpoint.c_str(),
                 std::isinf(o.request_rate) ? "inf" : fmt::format("{:.2f}", o.request_rate).c_str(),
                 o.burstiness,
                 o.max_concurrency > 0
                     ? fmt::format(", max concurrency {}", o.max_concurrency).c_str()
                     : "");
  }
  auto result = loadgen::run_serve_bench(*bo);
  if (!result) return report_error(result.status().message());
  std::printf("%s", loadgen::format_serve_result(*result, *bo).c_str());

  if (o.save_result || !o.result_filename.empty()) {
    nlohmann::json doc = setup->config_json(*bo);
    doc.update(loadgen::serve_result_json(*result));
    const auto path = setup->result_path(fmt::format("locus-bench-serve-{}.json", o.seed));
    if (Status s = write_json_file(path, doc); !s.is_ok()) return report_error(s.message());
    std::fprintf(stderr, "saved %s\n", path.string().c_str());
  }
  return 0;  // failures are in the table and the JSON, as vLLM reports them
}

}  // namespace

void add_bench_serve_command(CLI::App* bench, Runner& run) {
  auto o = std::make_shared<ServeCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve", "Online load against an OpenAI-compatible server (locus, vLLM, llama-server)");
  add_serve_options(cmd, *o, /*sweep=*/false);
  cmd->callback([&run, o] { run = [o] { return run_serve_command(*o); }; });
}

}  // namespace locus::cli
