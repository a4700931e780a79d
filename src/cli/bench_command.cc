// `locus bench latency MODEL ...`: offline latency of fixed-shape batches (bench/latency.h),
// each batch size next to its memory roofline (bench/roofline.h) on the GPU. Flags follow
// `vllm bench latency` (--input-len, --output-len, --batch-size, --num-iters,
// --num-iters-warmup, --output-json) plus the engine flags of `locus serve`.
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/latency.h"
#include "bench/roofline.h"
#include "cli/bench_engine.h"
#include "cli/commands.h"
#include "cli/device_options.h"
#include "core/version.h"
#include "engine/model_engine.h"

#ifdef LOCUS_HAS_CUDA
#include "backend/cuda/runtime/cuda_backend.h"
#include "backend/device.h"
#endif

namespace locus::cli {
namespace {

struct LatencyCliOptions {
  std::string model;
  std::string load_format = "auto";
  DeviceCliOptions gpu;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  std::vector<int> batch_sizes = {1};
  int iters = 3;
  int warmup_iters = 1;
  int max_model_len = 0;
  int max_num_batched_tokens = 16384;
  int block_size = 16;
  uint64_t seed = 0;
  double hbm_gbps = 0;  // 0 = measure on the GPU
  std::string output_json;
};

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

nlohmann::json to_json(const bench::Percentiles& p) {
  return {{"mean", p.mean}, {"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}};
}

int run_latency_command(const LatencyCliOptions& o) {
  int max_batch = 1;
  for (int b : o.batch_sizes)
    max_batch = std::max(max_batch, b);
  double hbm_gbps = o.hbm_gbps;
  bool gpu = false;
#ifdef LOCUS_HAS_CUDA
  if (o.gpu.device != "cpu" && !query_devices().gpus.empty()) {
    gpu = true;
    if (hbm_gbps <= 0) {
      auto probe = CudaBackend::create();
      if (!probe) return fail(probe.error());
      auto bw = (*probe)->measure_copy_bandwidth();
      if (!bw) return fail(bw.error());
      hbm_gbps = *bw;
    }
  }
#endif
  BenchEngineSpec spec = bench_engine_spec(o);
  spec.max_num_seqs = max_batch;
  spec.max_model_len =
      o.max_model_len > 0 ? o.max_model_len : static_cast<int>(o.input_len + o.output_len);
  double load_seconds = 0;
  auto me = open_bench_engine(spec, &load_seconds);
  if (!me) return fail(me.error());
  // Decode graphs: one GPU or replicas of one GPU; tensor-parallel ranks only when asked, and
  // replicas that share experts step eagerly.
  const bool graphs = gpu && !o.gpu.enforce_eager &&
                      (o.gpu.tensor_parallel_size == 1 || o.gpu.tensor_parallel_cuda_graphs) &&
                      !(o.gpu.data_parallel_size > 1 && o.gpu.enable_expert_parallel) &&
                      o.gpu.nnodes == 1;
  std::fprintf(stderr, "loaded %s on %s in %.1f s: %s; KV cache %d blocks (%.2f GiB)%s\n",
               o.model.c_str(), me->backend_name.c_str(), load_seconds,
               me->weights_description.c_str(), me->num_kv_blocks,
               static_cast<double>(me->kv_cache_bytes) / (1ull << 30),
               gpu ? (graphs ? ", CUDA graphs for decode" : ", eager") : "");
  if (gpu) std::fprintf(stderr, "HBM copy bandwidth %.0f GB/s\n", hbm_gbps);

  bench::LatencyOptions lo;
  lo.input_len = o.input_len;
  lo.output_len = o.output_len;
  lo.iters = o.iters;
  lo.warmup_iters = o.warmup_iters;
  lo.seed = o.seed;
  nlohmann::json results = nlohmann::json::array();
  fmt::print("{:>6} {:>10} {:>10} {:>12} {:>12} {:>8} {:>10} {:>10} {:>12}\n", "batch", "TTFT p50",
             "TPOT p50", "steady TPOT", "roofline", "ratio", "batch lat", "out tok/s",
             "graph/eager");
  for (int b : o.batch_sizes) {
#ifdef LOCUS_HAS_CUDA
    auto* cuda_ops =
        me->runner != nullptr ? dynamic_cast<CudaBackend*>(&me->runner->ops()) : nullptr;
    if (cuda_ops != nullptr) (void)cuda_ops->take_op_profile();  // drop what came before
#endif
    auto r = bench::run_latency(*me, lo, b);
    if (!r) return fail(r.error());
#ifdef LOCUS_HAS_CUDA
    if (cuda_ops != nullptr) {
      if (std::string table = cuda_ops->take_op_profile(); !table.empty()) {
        std::fprintf(stderr, "batch %d: %s", b, table.c_str());
      }
    }
#endif
    auto bytes = bench::decode_step_bytes(me->config, b, o.input_len + o.output_len / 2);
    if (!bytes) return fail(bytes.error());
    const double roof_s = gpu && hbm_gbps > 0 ? bytes->total() / (hbm_gbps * 1e9) : 0.0;
    // A batch that ran in waves has no steady phase of b sequences: its ratio would compare a
    // smaller batch's step with b's roofline.
    const bool fits = r->concurrent >= b;
    if (!fits) {
      std::fprintf(stderr,
                   "batch %d did not fit at once: only %d requests were decoding together (KV "
                   "cache %d blocks, --max-num-seqs); no roofline ratio\n",
                   b, r->concurrent, me->num_kv_blocks);
    }
    if (r->fed_steps > 0 || o.gpu.async_scheduling == 1) {
      std::fprintf(stderr, "batch %d: %lld of %lld steps queued ahead (async scheduling)\n", b,
                   static_cast<long long>(r->fed_steps),
                   static_cast<long long>(r->graph_steps + r->eager_steps));
    }
    fmt::print(
        "{:>6} {:>8.2f}ms {:>8.3f}ms {:>10.3f}ms {:>10.3f}ms {:>8} {:>9.3f}s {:>10.1f} "
        "{:>6}/{}\n",
        b, r->ttft_s.p50 * 1e3, r->tpot_s.p50 * 1e3, r->steady_tpot_s.p50 * 1e3, roof_s * 1e3,
        roof_s > 0 && fits ? fmt::format("{:.2f}x", r->steady_tpot_s.p50 / roof_s) : "n/a",
        r->batch_latency_s.p50, r->output_tokens_per_s, r->graph_steps, r->eager_steps);
    results.push_back({{"batch_size", b},
                       {"ttft_s", to_json(r->ttft_s)},
                       {"tpot_s", to_json(r->tpot_s)},
                       {"steady_tpot_s", to_json(r->steady_tpot_s)},
                       {"batch_latency_s", to_json(r->batch_latency_s)},
                       {"output_tokens_per_s", r->output_tokens_per_s},
                       {"graph_steps", r->graph_steps},
                       {"eager_steps", r->eager_steps},
                       {"async_queued_steps", r->fed_steps},
                       {"concurrent", r->concurrent},
                       {"roofline_s", roof_s},
                       {"roofline_bytes",
                        {{"dense_weights", bytes->dense_weight_bytes},
                         {"active_expert_weights", bytes->expert_weight_bytes},
                         {"kv", bytes->kv_bytes},
                         {"expected_active_experts", bytes->expected_active_experts}}}});
  }
  if (!o.output_json.empty()) {
    nlohmann::json doc = {{"command", "bench latency"},
                          {"locus", kVersion},
                          {"commit", kGitCommit},
                          {"model", o.model},
                          {"backend", me->backend_name},
                          {"load_format", o.load_format},
                          {"input_len", o.input_len},
                          {"output_len", o.output_len},
                          {"enforce_eager", o.gpu.enforce_eager},
                          {"async_scheduling", o.gpu.async_scheduling < 0    ? "default"
                                               : o.gpu.async_scheduling == 1 ? "on"
                                                                             : "off"},
                          {"cuda_graphs", graphs},
                          {"attention_backend", me->attention_backend},
                          {"moe_backend", me->moe_backend},
                          {"hbm_gbps", hbm_gbps},
                          {"results", results}};
    std::ofstream f(o.output_json);
    f << doc.dump(2) << "\n";
    if (!f) return fail(invalid_argument(fmt::format("cannot write {}", o.output_json)));
  }
  me->engine->shutdown();
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Runner& run) {
  CLI::App* bench =
      app.add_subcommand("bench", "Benchmarks (latency, throughput, serve, sweep, plot)");
  bench->require_subcommand(1);
  add_bench_serve_command(bench, run);
  add_bench_sweep_command(bench, run);
  add_bench_plot_command(bench, run);
  add_bench_throughput_command(bench, run);
  auto o = std::make_shared<LatencyCliOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "latency", "Offline latency of fixed-shape batches, with the decode roofline on the GPU");
  cmd->add_option("model", o->model, "Model directory (config.json; weights unless dummy)")
      ->required();
  cmd->add_option("--load-format", o->load_format, "auto | safetensors | dummy");
  o->gpu.add_to(cmd);
  cmd->add_option("--input-len", o->input_len, "Prompt tokens per request")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--output-len", o->output_len, "Generated tokens per request")
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--batch-size", o->batch_sizes, "Batch sizes (repeat or comma-separate)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters", o->iters, "Measured iterations per batch size")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-iters-warmup", o->warmup_iters, "Warm-up iterations per batch size")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-model-len", o->max_model_len, "Context length (default in + out)");
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--seed", o->seed, "Seed of the prompts and dummy weights");
  cmd->add_option("--hbm-bandwidth-gbps", o->hbm_gbps, "Roofline bandwidth (0 = measure)");
  cmd->add_option("--output-json", o->output_json, "Write every number to this JSON file");
  cmd->callback([o, &run] { run = [o] { return run_latency_command(*o); }; });
}

}  // namespace locus::cli
