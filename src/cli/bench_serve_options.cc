#include "cli/bench_serve_options.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/version.h"
#include "loadgen/datasets.h"
#include "loadgen/random_dataset.h"

namespace locus::cli {

std::string ServeCliOptions::url() const {
  return base_url.empty() ? fmt::format("http://{}:{}", host, port) : base_url;
}

int report_error(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

Status write_json_file(const std::filesystem::path& path, const nlohmann::json& doc) {
  std::ofstream f(path);
  f << doc.dump(2) << "\n";
  if (!f) return io_error(fmt::format("cannot write {}", path.string()));
  return Status::ok();
}

void add_serve_options(CLI::App* cmd, ServeCliOptions& o, bool sweep) {
  cmd->add_option("--base-url", o.base_url, "http://HOST:PORT (overrides --host/--port)");
  cmd->add_option("--host", o.host, "Server host");
  cmd->add_option("--port", o.port, "Server port")->check(CLI::Range(1, 65535));
  cmd->add_option("--endpoint", o.endpoint, "/v1/completions | /v1/chat/completions");
  cmd->add_option("--model", o.model, "The model name sent in requests (and default tokenizer)")
      ->required();
  cmd->add_option("--tokenizer", o.tokenizer, "Directory with tokenizer.json (default: --model)");
  cmd->add_option("--dataset-name", o.dataset_name,
                  "random | sharegpt | prefix_repetition | agentic");
  cmd->add_option("--dataset-path", o.dataset_path, "The ShareGPT JSON file");
  cmd->add_option("--sharegpt-output-len", o.sharegpt_output_len,
                  "Fixed output length instead of each reply's")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-prefix-len", o.pr_prefix_len, "Shared prefix tokens")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-suffix-len", o.pr_suffix_len, "Own suffix tokens")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefix-repetition-num-prefixes", o.pr_num_prefixes, "Distinct prefixes")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--prefix-repetition-output-len", o.pr_output_len, "Output tokens")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--agentic-sessions", o.agentic.sessions,
                  "Concurrent multi-turn sessions (concurrency unless --max-concurrency)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--agentic-turns", o.agentic.turns, "Turns per session")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--agentic-system-len", o.agentic.system_len,
                  "Tokens of the system prompt + tool definitions every session shares")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--agentic-user-len", o.agentic.user_len, "Tokens of each first user message")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--agentic-tool-result-len", o.agentic.tool_result_len,
                  "Tokens of the tool result each later turn adds")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--agentic-output-len", o.agentic.output_len, "Max tokens per reply")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--agentic-think-time", o.agentic.think_time_s,
                  "Seconds between a reply and the next turn")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-prompts", o.num_prompts, "Requests to send")->check(CLI::PositiveNumber);
  cmd->add_option("--random-input-len", o.input_len, "Prompt tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--random-output-len", o.output_len, "Output tokens")->check(CLI::PositiveNumber);
  cmd->add_option("--random-range-ratio", o.range_ratio, "Lengths vary by +- this share");
  cmd->add_option("--random-prefix-len", o.prefix_len, "Shared prefix tokens")
      ->check(CLI::NonNegativeNumber);
  if (!sweep) {
    cmd->add_option("--request-rate", o.request_rate,
                    "Requests per second (inf = all at once; agentic: session starts)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--max-concurrency", o.max_concurrency, "Requests in flight at most (0 = any)")
        ->check(CLI::NonNegativeNumber);
  }
  cmd->add_option("--burstiness", o.burstiness, "Gamma shape of the arrivals (1 = Poisson)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-warmups", o.num_warmups, "Unmeasured requests first")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o.seed, "Dataset and arrival seed");
  cmd->add_flag("--ignore-eos", o.ignore_eos, "Ask the server to ignore EOS (vLLM extra)");
  cmd->add_option("--temperature", o.temperature, "Sampling temperature (default 0)");
  cmd->add_option("--goodput", o.goodput, "SLOs: ttft:MS tpot:MS e2el:MS");
  cmd->add_option("--percentile-metrics", o.percentile_metrics,
                  "Metrics with percentiles (all four are always reported)");
  cmd->add_option("--metric-percentiles", o.metric_percentiles, "e.g. 50,90,99");
  if (!sweep) cmd->add_flag("--save-result", o.save_result, "Write the result JSON");
  cmd->add_option("--result-dir", o.result_dir, "Folder for the result JSON");
  cmd->add_option("--result-filename", o.result_filename, "Name of the result JSON");
  cmd->add_flag("--disable-tqdm", o.disable_tqdm, "No progress output");
}

Expected<ServeBenchSetup> ServeBenchSetup::create(const ServeCliOptions& o) {
  ServeBenchSetup setup;
  setup.o_ = o;
  loadgen::ServeBenchOptions& bo = setup.base_;
  auto server = loadgen::parse_base_url(o.url());
  if (!server) return server.status();
  bo.server = *server;
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions") {
    return invalid_argument(
        fmt::format("--endpoint {}: choose /v1/completions or /v1/chat/completions", o.endpoint));
  }
  if (o.dataset_name != "random" && o.dataset_name != "sharegpt" &&
      o.dataset_name != "prefix_repetition" && o.dataset_name != "agentic") {
    return invalid_argument(
        fmt::format("--dataset-name {}: choose random, sharegpt, prefix_repetition or agentic",
                    o.dataset_name));
  }
  if (o.dataset_name == "sharegpt" && o.dataset_path.empty()) {
    return invalid_argument("--dataset-name sharegpt needs --dataset-path FILE.json");
  }
  if (!(o.range_ratio >= 0 && o.range_ratio < 1)) {
    return invalid_argument(
        fmt::format("--random-range-ratio {} must be in [0, 1)", o.range_ratio));
  }
  bo.endpoint = o.endpoint;
  bo.model = o.model;
  if (const char* key = std::getenv("OPENAI_API_KEY"); key != nullptr) bo.api_key = key;

  // Random token ids come from the tokenizer's ordinary vocabulary (no special tokens mid-prompt);
  // the chat endpoint and the agentic workload get them decoded to text; sharegpt prompts are
  // counted with it.
  const std::string tokenizer_dir = o.tokenizer.empty() ? o.model : o.tokenizer;
  if (!std::filesystem::is_directory(tokenizer_dir)) {
    return invalid_argument(fmt::format(
        "--tokenizer {}: not a directory with tokenizer.json (needed to draw prompt token ids)",
        tokenizer_dir));
  }
  auto tokenizer = Tokenizer::load(tokenizer_dir);
  if (!tokenizer) return tokenizer.status();
  setup.tokenizer_ = std::make_shared<const Tokenizer>(std::move(*tokenizer));
  int32_t high = static_cast<int32_t>(setup.tokenizer_->id_limit());
  while (high > 0 && setup.tokenizer_->is_special(high - 1))
    --high;  // added special tokens sit at the end of the vocabularies we serve
  setup.id_high_ = high;

  bo.request_rate = o.request_rate;
  bo.burstiness = o.burstiness;
  bo.max_concurrency = o.max_concurrency;
  bo.num_warmups = o.num_warmups;
  bo.ignore_eos = o.ignore_eos;
  bo.temperature = o.temperature;
  bo.progress = !o.disable_tqdm;
  for (const std::string& term : o.goodput) {
    if (auto err = loadgen::parse_slo_term(term, bo.goodput)) return invalid_argument(*err);
  }
  bo.percentiles.clear();
  std::stringstream ps(o.metric_percentiles);
  for (std::string p; std::getline(ps, p, ',');) {
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    if (end == p.c_str() || *end != '\0' || !(v > 0 && v <= 100)) {
      return invalid_argument(
          fmt::format("--metric-percentiles {}: '{}' is not in (0, 100]", o.metric_percentiles, p));
    }
    bo.percentiles.push_back(v);
  }
  return setup;
}

Expected<loadgen::ServeBenchOptions> ServeBenchSetup::options(uint64_t seed) const {
  loadgen::ServeBenchOptions bo = base_;
  bo.seed = seed;
  const Tokenizer& tok = *tokenizer_;
  if (o_.dataset_name == "random") {
    loadgen::RandomDatasetOptions ro;
    ro.num_prompts = o_.num_prompts;
    ro.input_len = o_.input_len;
    ro.output_len = o_.output_len;
    ro.range_ratio = o_.range_ratio;
    ro.prefix_len = o_.prefix_len;
    ro.seed = seed;
    ro.id_high = id_high_;
    bo.requests = loadgen::random_dataset(ro);
  } else if (o_.dataset_name == "prefix_repetition") {
    loadgen::PrefixRepetitionOptions po;
    po.num_prompts = o_.num_prompts;
    po.prefix_len = o_.pr_prefix_len;
    po.suffix_len = o_.pr_suffix_len;
    po.num_prefixes = o_.pr_num_prefixes;
    po.output_len = o_.pr_output_len;
    po.seed = seed;
    po.id_high = id_high_;
    bo.requests = loadgen::prefix_repetition_dataset(po);
  } else if (o_.dataset_name == "agentic") {
    loadgen::AgenticOptions ao = o_.agentic;
    ao.seed = seed;
    ao.id_high = id_high_;
    bo.agentic = std::make_shared<const loadgen::AgenticWorkload>(
        loadgen::make_agentic_workload(ao, [&tok](const std::vector<int32_t>& ids) {
          return tok.decode(ids, /*skip_special_tokens=*/true);
        }));
  } else {
    loadgen::ShareGptOptions so;
    so.num_prompts = o_.num_prompts;
    if (o_.sharegpt_output_len > 0) so.output_len = o_.sharegpt_output_len;
    so.seed = seed;
    auto requests = loadgen::sharegpt_dataset(
        o_.dataset_path, so, [&tok](const std::string& text) -> Expected<std::vector<int32_t>> {
          return tok.encode(text, /*add_special_tokens=*/false);
        });
    if (!requests) return requests.status();
    bo.requests = std::move(*requests);
  }
  if (loadgen::is_chat_endpoint(bo)) {
    for (auto& r : bo.requests) {
      if (r.prompt_text.empty()) {
        r.prompt_text = tok.decode(r.prompt_ids, /*skip_special_tokens=*/true);
      }
    }
  }
  return bo;
}

nlohmann::json ServeBenchSetup::config_json(const loadgen::ServeBenchOptions& bo) const {
  const ServeCliOptions& o = o_;
  nlohmann::json doc = {
      {"command", "bench serve"},
      {"locus", kVersion},
      {"commit", kGitCommit},
      {"base_url", o.url()},
      {"endpoint", o.endpoint},
      {"model", o.model},
      {"dataset",
       {{"name", o.dataset_name},
        {"num_prompts", o.num_prompts},
        {"input_len", o.input_len},
        {"output_len", o.output_len},
        {"range_ratio", o.range_ratio},
        {"prefix_len", o.prefix_len},
        {"seed", bo.seed}}},
      {"request_rate",
       std::isinf(bo.request_rate) ? nlohmann::json("inf") : nlohmann::json(bo.request_rate)},
      {"burstiness", o.burstiness},
      {"max_concurrency", bo.max_concurrency},
      {"ignore_eos", o.ignore_eos}};
  if (!o.dataset_path.empty()) doc["dataset"]["path"] = o.dataset_path;
  if (bo.agentic) {
    const loadgen::AgenticOptions& a = bo.agentic->options;
    doc["dataset"]["agentic"] = {{"sessions", a.sessions},
                                 {"turns", a.turns},
                                 {"system_len", a.system_len},
                                 {"user_len", a.user_len},
                                 {"tool_result_len", a.tool_result_len},
                                 {"output_len", a.output_len},
                                 {"think_time_s", a.think_time_s}};
  }
  return doc;
}

std::filesystem::path ServeBenchSetup::result_path(const std::string& default_name) const {
  const std::string name = o_.result_filename.empty() ? default_name : o_.result_filename;
  return o_.result_dir.empty() ? std::filesystem::path(name)
                               : std::filesystem::path(o_.result_dir) / name;
}

}  // namespace locus::cli
