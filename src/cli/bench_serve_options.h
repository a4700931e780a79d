// The flags `locus bench serve` and `locus bench sweep` share (server, endpoint, datasets,
// sampling, percentiles, where results go) and what they turn into: the load generator's
// options with a dataset drawn for a seed, and the configuration keys of the result JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "loadgen/serve_bench.h"
#include "tokenizer/tokenizer.h"

namespace locus::cli {

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
  loadgen::AgenticOptions agentic;  // --agentic-*; ids and seed are filled in per run
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

  std::string url() const;
};

// Registers the shared flags on `cmd`. For the sweep (`sweep` true) --request-rate and
// --max-concurrency are lists the sweep registers itself, and results are always saved.
void add_serve_options(CLI::App* cmd, ServeCliOptions& o, bool sweep);

// The validated flags with the tokenizer loaded once; draws a dataset per run.
class ServeBenchSetup {
 public:
  static Expected<ServeBenchSetup> create(const ServeCliOptions& o);

  const ServeCliOptions& cli() const { return o_; }
  // The load generator's options with the dataset (or the agentic workload) drawn from `seed`.
  Expected<loadgen::ServeBenchOptions> options(uint64_t seed) const;
  // The configuration keys of a result JSON (command, versions, server, dataset, arrivals).
  nlohmann::json config_json(const loadgen::ServeBenchOptions& bo) const;
  // --result-dir / --result-filename, or `default_name`.
  std::filesystem::path result_path(const std::string& default_name) const;

 private:
  ServeCliOptions o_;
  loadgen::ServeBenchOptions base_;  // everything but the dataset
  std::shared_ptr<const Tokenizer> tokenizer_;
  int32_t id_high_ = 0;  // ordinary ids are [0, id_high_)
};

// Prints "error: MESSAGE" to stderr and returns the exit code 1.
int report_error(const std::string& message);
Status write_json_file(const std::filesystem::path& path, const nlohmann::json& doc);

}  // namespace locus::cli
