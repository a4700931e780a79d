// `locus bench serve`: the load generator against any OpenAI-compatible server (locus, vLLM,
// llama.cpp's llama-server), with vLLM's flag names, metrics and result table.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/version.h"
#include "loadgen/datasets.h"
#include "loadgen/random_dataset.h"
#include "loadgen/serve_bench.h"
#include "tokenizer/tokenizer.h"

namespace locus::cli {
namespace {

struct ServeCliOptions {
  std::string base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";
  std::string model;
  std::string tokenizer;
  std::string dataset_name = "random";
  std::string dataset_path;
  int64_t sharegpt_output_len = 0;
  int64_t pr_prefix_len = 256;
  int64_t pr_suffix_len = 256;
  int pr_num_prefixes = 10;
  int64_t pr_output_len = 128;
  int num_prompts = 1000;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  int64_t prefix_len = 0;
  double request_rate = INFINITY;
  double burstiness = 1.0;
  int max_concurrency = 0;
  int num_warmups = 0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  double temperature = 0.0;
  std::vector<std::string> goodput;
  std::string percentile_metrics = "ttft,tpot,itl";
  std::string metric_percentiles = "99";
  bool save_result = false;
  std::string result_dir;
  std::string result_filename;
  bool disable_tqdm = false;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

nlohmann::json distribution_json(const loadgen::Distribution& d) {
  nlohmann::json j = {{"count", d.count}, {"mean", d.mean}, {"median", d.median},
                      {"std", d.std},     {"min", d.min},   {"max", d.max}};
  for (const auto& [p, v] : d.percentiles)
    j[fmt::format("p{:g}", p)] = v;
  return j;
}

int run_serve_command(const ServeCliOptions& o) {
  loadgen::ServeBenchOptions bo;
  auto server = loadgen::parse_base_url(
      o.base_url.empty() ? fmt::format("http://{}:{}", o.host, o.port) : o.base_url);
  if (!server) return fail(server.status().message());
  bo.server = *server;
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions") {
    return fail(
        fmt::format("--endpoint {}: choose /v1/completions or /v1/chat/completions", o.endpoint));
  }
  if (o.dataset_name != "random" && o.dataset_name != "sharegpt" &&
      o.dataset_name != "prefix_repetition") {
    return fail(fmt::format("--dataset-name {}: choose random, sharegpt or prefix_repetition",
                            o.dataset_name));
  }
  if (o.dataset_name == "sharegpt" && o.dataset_path.empty()) {
    return fail("--dataset-name sharegpt needs --dataset-path FILE.json");
  }
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return fail(fmt::format("--random-range-ratio {} must be in [0, 1)", o.range_ratio));
  }
  bo.endpoint = o.endpoint;
  bo.model = o.model;
  if (const char* key = std::getenv("OPENAI_API_KEY"); key != nullptr) bo.api_key = key;

  // Random token ids come from the tokenizer's ordinary vocabulary (no special tokens mid-prompt);
  // the chat endpoint gets them decoded to text; sharegpt prompts are counted with it.
  const std::string tokenizer_dir = o.tokenizer.empty() ? o.model : o.tokenizer;
  std::optional<Tokenizer> tokenizer;
  if (std::filesystem::is_directory(tokenizer_dir)) {
    auto t = Tokenizer::load(tokenizer_dir);
    if (!t) return fail(t.status().message());
    tokenizer = std::move(*t);
  } else {
    return fail(fmt::format(
        "--tokenizer {}: not a directory with tokenizer.json (needed to draw prompt token ids)",
        tokenizer_dir));
  }
  int32_t high = static_cast<int32_t>(tokenizer->id_limit());
  while (high > 0 && tokenizer->is_special(high - 1))
    --high;  // added special tokens sit at the end of the vocabularies we serve
  if (o.dataset_name == "random") {
    loadgen::RandomDatasetOptions ro;
    ro.num_prompts = o.num_prompts;
    ro.input_len = o.input_len;
    ro.output_len = o.output_len;
    ro.range_ratio = o.range_ratio;
    ro.prefix_len = o.prefix_len;
    ro.seed = o.seed;
    ro.id_high = high;
    bo.requests = loadgen::random_dataset(ro);
  } else if (o.dataset_name == "prefix_repetition") {
    loadgen::PrefixRepetitionOptions po;
    po.num_prompts = o.num_prompts;
    po.prefix_len = o.pr_prefix_len;
    po.suffix_len = o.pr_suffix_len;
    po.num_prefixes = o.pr_num_prefixes;
    po.output_len = o.pr_output_len;
    po.seed = o.seed;
    po.id_high = high;
    bo.requests = loadgen::prefix_repetition_dataset(po);
  } else {
    loadgen::ShareGptOptions so;
    so.num_prompts = o.num_prompts;
    if (o.sharegpt_output_len > 0) so.output_len = o.sharegpt_output_len;
    so.seed = o.seed;
    const Tokenizer& tok = *tokenizer;
    auto requests = loadgen::sharegpt_dataset(
        o.dataset_path, so, [&tok](const std::string& text) -> Expected<std::vector<int32_t>> {
          return tok.encode(text, /*add_special_tokens=*/false);
        });
    if (!requests) return fail(requests.status().message());
    bo.requests = std::move(*requests);
  }
  if (o.endpoint == "/v1/chat/completions") {
    for (auto& r : bo.requests) {
      if (r.prompt_text.empty()) {
        r.prompt_text = tokenizer->decode(r.prompt_ids, /*skip_special_tokens=*/true);
      }
    }
  }
  bo.request_rate = o.request_rate;
  bo.burstiness = o.burstiness;
  bo.max_concurrency = o.max_concurrency;
  bo.num_warmups = o.num_warmups;
  bo.ignore_eos = o.ignore_eos;
  bo.temperature = o.temperature;
  bo.seed = o.seed;
  bo.progress = !o.disable_tqdm;
  for (const std::string& term : o.goodput) {
    if (auto err = loadgen::parse_slo_term(term, bo.goodput)) return fail(*err);
  }
  bo.percentiles.clear();
  std::stringstream ps(o.metric_percentiles);
  for (std::string p; std::getline(ps, p, ',');) {
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    if (end == p.c_str() || *end != '\0' || !(v > 0 && v <= 100)) {
      return fail(
          fmt::format("--metric-percentiles {}: '{}' is not in (0, 100]", o.metric_percentiles, p));
    }
    bo.percentiles.push_back(v);
  }
  if (!o.disable_tqdm) {
    std::fprintf(stderr, "bench serve: %d requests to %s%s, rate %s, burstiness %.2f%s\n",
                 o.num_prompts, bo.server.host.c_str(), bo.endpoint.c_str(),
                 std::isinf(o.request_rate) ? "inf" : fmt::format("{:.2f}", o.request_rate).c_str(),
                 o.burstiness,
                 o.max_concurrency > 0
                     ? fmt::format(", max concurrency {}", o.max_concurrency).c_str()
                     : "");
  }
  auto result = loadgen::run_serve_bench(bo);
  if (!result) return fail(result.status().message());
  std::printf("%s", loadgen::format_serve_result(*result, bo).c_str());

  if (o.save_result || !o.result_filename.empty()) {
    const loadgen::ServeMetrics& m = result->metrics;
    nlohmann::json doc = {
        {"command", "bench serve"},
        {"locus", kVersion},
        {"commit", kGitCommit},
        {"base_url", o.base_url.empty() ? fmt::format("http://{}:{}", o.host, o.port) : o.base_url},
        {"endpoint", o.endpoint},
        {"model", o.model},
        {"dataset",
         {{"name", o.dataset_name},
          {"num_prompts", o.num_prompts},
          {"input_len", o.input_len},
          {"output_len", o.output_len},
          {"range_ratio", o.range_ratio},
          {"prefix_len", o.prefix_len},
          {"seed", o.seed}}},
        {"request_rate",
         std::isinf(o.request_rate) ? nlohmann::json("inf") : nlohmann::json(o.request_rate)},
        {"burstiness", o.burstiness},
        {"max_concurrency", o.max_concurrency},
        {"ignore_eos", o.ignore_eos},
        {"completed", m.completed},
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
        {"errors", result->first_errors}};
    if (m.goodput) doc["request_goodput"] = *m.goodput;
    if (!o.dataset_path.empty()) doc["dataset"]["path"] = o.dataset_path;
    if (result->prefix_cache) {
      doc["server_prefix_cache"] = {{"queries", result->prefix_cache->queries},
                                    {"hits", result->prefix_cache->hits}};
    }
    std::string name = o.result_filename;
    if (name.empty()) name = fmt::format("locus-bench-serve-{}.json", o.seed);
    std::filesystem::path path = o.result_dir.empty() ? std::filesystem::path(name)
                                                      : std::filesystem::path(o.result_dir) / name;
    std::ofstream f(path);
    f << doc.dump(2) << "\n";
    if (!f) return fail(fmt::format("cannot write {}", path.string()));
    std::fprintf(stderr, "saved %s\n", path.string().c_str());
  }
  return 0;  // failures are in the table and the JSON, as vLLM reports them
}

}  // namespace

void add_bench_serve_command(CLI::App* bench, Runner& run) {
  auto o = std::make_shared<ServeCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve", "Online load against an OpenAI-compatible server (locus, vLLM, llama-server)");
  cmd->add_option("--base-url", o->base_url, "http://HOST:PORT (overrides --host/--port)");
  cmd->add_option("--host", o->host, "Server host");
  cmd->add_option("--port", o->port, "Server port")->check(CLI::Range(1, 65535));
  cmd->add_option("--endpoint", o->endpoint, "/v1/completions | /v1/chat/completions");
  cmd->add_option("--model", o->model, "The model name sent in requests (and default tokenizer)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "Directory with tokenizer.json (default: --model)");
  cmd->add_option("--dataset-name", o->dataset_name, "random | sharegpt | prefix_repetition");
  cmd->add_option("--dataset-path", o->dataset_path, "The ShareGPT JSON file");
  cmd->add_option("--sharegpt-output-len", o->sharegpt_output_len,
                  "Fixed output length instead of each reply's")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-prefix-len", o->pr_prefix_len, "Shared prefix tokens")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-suffix-len", o->pr_suffix_len, "Own suffix tokens")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-num-prefixes", o->pr_num_prefixes, "Distinct prefixes")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prefix-repetition-output-len", o->pr_output_len, "Output tokens")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-prompts", o->num_prompts, "Requests to send")->check(CLI::PositiveNumber);
  cmd->add_option("--random-input-len", o->input_len, "Prompt tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--random-output-len", o->output_len, "Output tokens")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", o->range_ratio, "Lengths vary by +- this share");
  cmd->add_option("--random-prefix-len", o->prefix_len, "Shared prefix tokens")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--request-rate", o->request_rate, "Requests per second (inf = all at once)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--burstiness", o->burstiness, "Gamma shape of the arrivals (1 = Poisson)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-concurrency", o->max_concurrency, "Requests in flight at most (0 = any)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-warmups", o->num_warmups, "Unmeasured requests first")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "Dataset and arrival seed");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Ask the server to ignore EOS (vLLM extra)");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (default 0)");
  cmd->add_option("--goodput", o->goodput, "SLOs: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--percentile-metrics", o->percentile_metrics,
                  "Metrics with percentiles (all four are always reported)");
  cmd->add_option("--metric-percentiles", o->metric_percentiles, "e.g. 50,90,99");
  cmd->add_flag("--save-result", o->save_result, "Write the result JSON");
  cmd->add_option("--result-dir", o->result_dir, "Folder for the result JSON");
  cmd->add_option("--result-filename", o->result_filename, "Name of the result JSON");
  cmd->add_flag("--disable-tqdm", o->disable_tqdm, "No progress output");
  cmd->callback([&run, o] { run = [o] { return run_serve_command(*o); }; });
}

}  // namespace locus::cli
