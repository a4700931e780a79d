// `locus inspect MODEL_DIR`: parse the model's config, derive the tensors its forward pass needs,
// and check the checkpoint against them (or build them as dummy weights) — the same steps a
// server start takes before loading, without a device.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/model_config.h"
#include "model/dummy_weights.h"
#include "model/weight_layout.h"
#include "model/weight_source.h"

namespace locus::cli {
namespace {

struct InspectOptions {
  std::string model;
  std::string load_format = "auto";
  uint64_t seed = 0;
  bool list_tensors = false;
  bool materialize = false;
};

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.message().c_str());
  return 1;
}

int run_inspect(const InspectOptions& o) {
  auto config = load_model_config(o.model);
  if (!config) return fail(config.error());
  fmt::print("config: {}\n", config->summary());
  fmt::print("quantization: {}\n", config->quant.summary());

  auto layout = weight_layout(*config);
  if (!layout) return fail(layout.error());
  fmt::print("layout: {} tensors, {:.2f} GB\n", layout->specs.size(),
             static_cast<double>(layout->total_bytes()) / 1e9);

  std::unique_ptr<WeightSource> source;
  if (o.load_format == "dummy") {
    source = std::make_unique<DummyWeights>(*layout, o.seed);
  } else {
    auto checkpoint = CheckpointWeights::open(o.model);
    if (!checkpoint) return fail(checkpoint.error());
    source = std::move(*checkpoint);
  }
  fmt::print("weights: {}\n", source->description());
  auto report = check_weights(*source, *layout);
  if (!report) return fail(report.error());
  fmt::print("check: every tensor present with the expected shape and dtype");
  if (!report->unused.empty()) {
    fmt::print("; {} unused (e.g. {})", report->unused.size(), report->unused.front());
  }
  fmt::print("\n");

  if (o.list_tensors) {
    for (const auto& spec : layout->specs) {
      fmt::print("  {:<72} {:<8} {}\n", spec.name, dtype_name(spec.dtype), spec.shape.to_string());
    }
  }
  if (o.materialize) {
    // Reads (or generates) every byte once, as a load would, and reports the rate.
    auto start = std::chrono::steady_clock::now();
    uint64_t bytes = 0, checksum = 0;
    for (const auto& spec : layout->specs) {
      auto t = source->tensor(spec.name);
      if (!t) return fail(t.error());
      const auto* p = static_cast<const uint8_t*>(t->raw_data());
      for (size_t i = 0; i < t->nbytes(); i += 4096)
        checksum += p[i];
      bytes += t->nbytes();
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("materialized {:.2f} GB in {:.2f} s ({:.2f} GB/s, checksum {})\n",
               static_cast<double>(bytes) / 1e9, seconds,
               static_cast<double>(bytes) / 1e9 / seconds, checksum);
  }
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, Runner& run) {
  auto options = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand(
      "inspect", "Parse a model's config.json and check its safetensors checkpoint");
  cmd->add_option("model", options->model, "Model directory (config.json + *.safetensors)")
      ->required();
  cmd->add_option("--load-format", options->load_format,
                  "auto: read the checkpoint; dummy: generate deterministic random weights")
      ->check(CLI::IsMember({"auto", "dummy"}));
  cmd->add_option("--seed", options->seed, "Seed of the dummy weights");
  cmd->add_flag("--list-tensors", options->list_tensors, "Print every tensor of the layout");
  cmd->add_flag("--materialize", options->materialize,
                "Read or generate every tensor once and report the rate");
  cmd->callback([&run, options] { run = [options] { return run_inspect(*options); }; });
}

}  // namespace locus::cli
