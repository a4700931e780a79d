// `locus serve MODEL_DIR`: the OpenAI-compatible server, with vLLM's flag names. SIGINT/SIGTERM
// stop accepting, give in-flight requests a grace period, then exit 0.
#include <fmt/format.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/device_options.h"
#include "core/logging.h"
#include "engine/model_engine.h"
#include "model/demo_model.h"
#include "server/api_server.h"
#include "server/http_server.h"

namespace locus::cli {
namespace {

struct ServeOptions {
  std::string model;
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_names;
  std::string api_key;
  std::string load_format = "auto";
  std::string kv_cache_dtype = "auto";
  std::string generation_config = "auto";
  int max_model_len = 0;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int block_size = 16;
  bool enable_prefix_caching = true;
  uint64_t seed = 0;
  DeviceCliOptions gpu;
  double kv_cache_memory_gib = 4.0;
  int num_gpu_blocks_override = 0;
  int max_logprobs = 20;
  int max_waiting_requests = 4096;
  double max_request_body_mib = 8.0;
  int io_threads = 2;
  bool cpu_openblas = false;
  int cpu_threads = 0;
  double shutdown_grace_s = 10.0;
};

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

int run_serve(const ServeOptions& o) {
  // Block the stop signals before any thread starts, so that only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (o.kv_cache_dtype != "auto") {
    return fail(unsupported(fmt::format(
        "--kv-cache-dtype {}: only auto is supported (f32 on the CPU backend, bf16 on the GPU)",
        o.kv_cache_dtype)));
  }
  if (o.generation_config != "auto" && o.generation_config != "vllm") {
    return fail(unsupported("--generation-config: only auto (the model's) and vllm are supported"));
  }
  ModelEngineOptions mo;
  mo.model_dir = o.model;
  auto format = parse_load_format(o.load_format);
  if (!format) return fail(format.error());
  mo.load_format = *format;
  mo.weight_seed = o.seed;
  mo.block_size = o.block_size;
  mo.cpu_batch_invariant = !o.cpu_openblas;
  o.gpu.apply(mo);
  mo.cpu_threads = o.cpu_threads;
  mo.engine.scheduler.max_num_seqs = o.max_num_seqs;
  mo.engine.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  mo.engine.scheduler.max_model_len = o.max_model_len;
  mo.engine.enable_prefix_caching = o.enable_prefix_caching;
  mo.engine.num_kv_blocks = o.num_gpu_blocks_override;
  mo.engine.kv_cache_memory_bytes = static_cast<int64_t>(o.kv_cache_memory_gib * (1ull << 30));
  mo.engine.seed = o.seed;
  mo.engine.max_logprobs = o.max_logprobs;
  if (o.gpu.headless()) {
    // A headless node stops on node 0's word or on a signal's default action.
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    return DeviceCliOptions::run_headless(mo);
  }
  auto me = open_model_engine(mo);
  if (!me) return fail(me.error());
  if (o.generation_config == "vllm") me->generation = GenerationConfig{};
  std::optional<ChatTemplate> chat_template;
  if (auto t = load_chat_template(o.model)) {
    chat_template = std::move(*t);
  } else {
    log::warn("no chat template ({}): /v1/chat/completions will refuse requests",
              t.error().message());
  }
  log::info(
      "{} ({}) on {} (attention {}, MoE {}): {}; KV cache {} blocks of {} tokens ({:.1f} MiB); "
      "max_model_len {}",
      o.model, architecture_name(me->config.architecture), me->backend_name, me->attention_backend,
      me->moe_backend, me->weights_description, me->num_kv_blocks, o.block_size,
      static_cast<double>(me->kv_cache_bytes) / (1 << 20),
      me->engine->config().scheduler.max_model_len);

  ApiServerOptions ao;
  ao.served_model_names = o.served_model_names;
  if (ao.served_model_names.empty()) ao.served_model_names.push_back(o.model);
  ao.model_root = o.model;
  if (!o.api_key.empty()) {
    ao.api_key = o.api_key;
  } else if (const char* env = std::getenv("VLLM_API_KEY")) {
    ao.api_key = env;
  }
  ao.max_waiting_requests = o.max_waiting_requests;
  ao.max_logprobs = o.max_logprobs;
  ApiServer api(*me, std::move(chat_template), ao);
  http::Router router;
  api.register_routes(router);

  http::ServerOptions so;
  so.host = o.host;
  so.port = static_cast<uint16_t>(o.port);
  so.io_threads = o.io_threads;
  so.max_body_bytes = static_cast<size_t>(o.max_request_body_mib * (1 << 20));
  auto server = http::HttpServer::start(so, std::move(router));
  if (!server) return fail(server.error());
  // Tests and scripts wait for this exact line.
  std::printf("locus: serving %s on http://%s:%u\n", ao.served_model_names.front().c_str(),
              o.host.c_str(), static_cast<unsigned>((*server)->port()));
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  log::info("signal {}: shutting down (grace {:.0f} s)", signal_number, o.shutdown_grace_s);
  (*server)->stop(std::chrono::milliseconds(static_cast<int64_t>(o.shutdown_grace_s * 1000)));
  (*server)->wait();
  me->engine->shutdown();
  server->reset();
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand("serve", "Serve a model with an OpenAI-compatible HTTP API");
  cmd->add_option("model", o->model,
                  "Model directory (config.json, safetensors, tokenizer.json); default: the "
                  "trained demo model in models/demo, served as \"demo\"");
  cmd->add_option("--host", o->host, "Address to listen on");
  cmd->add_option("--port", o->port, "Port to listen on (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--served-model-name", o->served_model_names,
                  "Model name(s) the API answers to (default: the model path)");
  cmd->add_option("--api-key", o->api_key, "Require this key (also $VLLM_API_KEY)");
  cmd->add_option("--load-format", o->load_format, "auto | safetensors | dummy");
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "KV cache dtype (auto)");
  cmd->add_option("--generation-config", o->generation_config,
                  "auto: sampling defaults from the model's generation_config.json; vllm: none");
  cmd->add_option("--max-model-len", o->max_model_len, "Context length (default: the model's)");
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Requests per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o->enable_prefix_caching,
                "Automatic prefix caching (default on)");
  cmd->add_option("--seed", o->seed, "Engine seed");
  o->gpu.add_to(cmd);
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory_gib, "CPU KV cache budget in GiB")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--num-gpu-blocks-override", o->num_gpu_blocks_override, "KV blocks");
  cmd->add_option("--max-logprobs", o->max_logprobs, "Largest logprobs / top_logprobs allowed");
  cmd->add_option("--max-waiting-requests", o->max_waiting_requests,
                  "Queued requests beyond max-num-seqs before 503");
  cmd->add_option("--max-request-body-mib", o->max_request_body_mib, "Larger bodies get 413");
  cmd->add_option("--io-threads", o->io_threads, "HTTP I/O threads")->check(CLI::Range(1, 64));
  cmd->add_flag("--cpu-openblas", o->cpu_openblas,
                "CPU GEMMs through OpenBLAS: faster, but a row's result depends on its batch");
  cmd->add_option("--cpu-threads", o->cpu_threads, "CPU backend threads (0 = all cores)");
  cmd->add_option("--shutdown-grace", o->shutdown_grace_s,
                  "Seconds in-flight requests get after SIGINT/SIGTERM");
  cmd->callback([&run, o] {
    run = [o] {
      bool demo = false;
      if (Status s = use_demo_model_if_unnamed(o->model, &demo); !s.is_ok()) return fail(s);
      if (demo && o->served_model_names.empty()) o->served_model_names.push_back(kDemoModelName);
      return run_serve(*o);
    };
  });
}

}  // namespace locus::cli
