// `locus bench throughput`: vLLM's offline throughput benchmark, in process (no HTTP).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/throughput.h"
#include "cli/bench_engine.h"
#include "cli/commands.h"
#include "cli/device_options.h"
#include "core/version.h"
#include "engine/model_engine.h"

namespace locus::cli {
namespace {

struct ThroughputCliOptions {
  std::string model;
  std::string load_format = "auto";
  DeviceCliOptions gpu;
  int num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  int max_model_len = 0;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int block_size = 16;
  uint64_t seed = 0;
  std::string output_json;
};

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

int run_throughput_command(const ThroughputCliOptions& o) {
  BenchEngineSpec spec = bench_engine_spec(o);
  spec.max_num_seqs = o.max_num_seqs;
  // Room for the longest request the range ratio can draw.
  const auto longest = static_cast<int>(
      std::ceil(static_cast<double>(o.input_len + o.output_len) * (1 + o.range_ratio)));
  spec.max_model_len = o.max_model_len > 0 ? o.max_model_len : longest;
  double load_seconds = 0;
  auto me = open_bench_engine(spec, &load_seconds);
  if (!me) return fail(me.error());
  std::fprintf(stderr, "loaded %s on %s in %.1f s: %s; KV cache %d blocks\n", o.model.c_str(),
               me->backend_name.c_str(), load_seconds, me->weights_description.c_str(),
               me->num_kv_blocks);

  bench::ThroughputOptions to;
  to.num_prompts = o.num_prompts;
  to.input_len = o.input_len;
  to.output_len = o.output_len;
  to.range_ratio = o.range_ratio;
  to.seed = o.seed;
  auto r = bench::run_throughput(*me, to);
  if (!r) return fail(r.error());
  std::printf("Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
              r->requests_per_s, r->total_tokens_per_s, r->output_tokens_per_s);
  std::printf("Total num prompt tokens:  %lld\nTotal num output tokens:  %lld\n",
              static_cast<long long>(r->prompt_tokens), static_cast<long long>(r->output_tokens));
  if (!o.output_json.empty()) {
    nlohmann::json doc = {{"command", "bench throughput"},
                          {"locus", kVersion},
                          {"commit", kGitCommit},
                          {"model", o.model},
                          {"backend", me->backend_name},
                          {"num_prompts", o.num_prompts},
                          {"input_len", o.input_len},
                          {"output_len", o.output_len},
                          {"range_ratio", o.range_ratio},
                          {"elapsed_time", r->elapsed_s},
                          {"num_requests", r->num_requests},
                          {"total_num_tokens", r->prompt_tokens + r->output_tokens},
                          {"total_output_tokens", r->output_tokens},
                          {"requests_per_second", r->requests_per_s},
                          {"tokens_per_second", r->total_tokens_per_s},
                          {"output_tokens_per_second", r->output_tokens_per_s}};
    std::ofstream f(o.output_json);
    f << doc.dump(2) << "\n";
    if (!f) return fail(invalid_argument(fmt::format("cannot write {}", o.output_json)));
  }
  me->engine->shutdown();
  return 0;
}

}  // namespace

void add_bench_throughput_command(CLI::App* bench, Runner& run) {
  auto o = std::make_shared<ThroughputCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "throughput", "Offline throughput: N random requests through the engine at once");
  cmd->add_option("model", o->model, "Model directory (config.json; weights unless dummy)")
      ->required();
  cmd->add_option("--load-format", o->load_format, "auto | safetensors | dummy");
  o->gpu.add_to(cmd);
  cmd->add_option("--num-prompts", o->num_prompts, "Requests")->check(CLI::PositiveNumber);
  cmd->add_option("--input-len,--random-input-len", o->input_len, "Prompt tokens")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-len,--random-output-len", o->output_len, "Output tokens")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", o->range_ratio, "Lengths vary by +- this share")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--max-model-len", o->max_model_len, "Context length (default: what fits)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Requests per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", o->seed, "Dataset and dummy-weight seed");
  cmd->add_option("--output-json", o->output_json, "Write the result as JSON");
  cmd->callback([&run, o] { run = [o] { return run_throughput_command(*o); }; });
}

}  // namespace locus::cli
