// `locus generate MODEL --prompt ...`: the offline path. Loads the model (CPU backend for now),
// runs every prompt through one LLMEngine with continuous batching, and prints each completion
// with its timing, then the totals. Flags follow vLLM's names.
#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/device_options.h"
#include "engine/model_engine.h"
#include "model/demo_model.h"
#include "tokenizer/chat_template/chat_template.h"

namespace locus::cli {
namespace {

struct GenerateOptions {
  std::string model;
  std::vector<std::string> prompts;
  std::string prompts_file;
  std::vector<std::string> prompt_ids;  // "1,2,3" per prompt, for models without a tokenizer
  bool chat = false;
  std::string system;
  std::string load_format = "auto";
  bool no_tokenizer = false;
  bool cpu_openblas = false;
  int cpu_threads = 0;
  int block_size = 16;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int max_model_len = 0;
  int num_gpu_blocks_override = 0;
  double kv_cache_memory_gib = 4.0;
  DeviceCliOptions gpu;
  bool enable_prefix_caching = true;
  uint64_t seed = 0;
  // Sampling; unset values fall back to generation_config.json, then vLLM's defaults.
  std::optional<float> temperature, top_p, min_p, presence_penalty, frequency_penalty,
      repetition_penalty;
  std::optional<int> top_k, max_tokens;
  std::optional<uint64_t> request_seed;
  int n = 1;
  int min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  bool json = false;
};

int fail(const Status& status) {
  std::fprintf(stderr, "error: %s\n", status.to_string().c_str());
  return 1;
}

Expected<std::vector<int32_t>> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == ',' || c == ' ' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    int32_t id = 0;
    auto [end, error] = std::from_chars(text.data() + i, text.data() + text.size(), id);
    if (error != std::errc() || end == text.data() + i) {
      return invalid_argument(fmt::format("--prompt-ids: '{}' is not a list of token ids", text));
    }
    ids.push_back(id);
    i = static_cast<size_t>(end - text.data());
  }
  if (ids.empty()) return invalid_argument("--prompt-ids: empty list");
  return ids;
}

Expected<std::vector<std::string>> read_prompts_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error(fmt::format("--prompts-file {}: cannot open", path));
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) prompts.push_back(line);
  }
  return prompts;
}

std::string_view finish_name(const std::optional<FinishReason>& reason) {
  if (!reason) return "none";
  switch (*reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
  }
  return "?";
}

int run_generate(const GenerateOptions& o) {
  ModelEngineOptions mo;
  mo.model_dir = o.model;
  auto format = parse_load_format(o.load_format);
  if (!format) return fail(format.error());
  mo.load_format = *format;
  mo.weight_seed = o.seed;
  mo.block_size = o.block_size;
  mo.load_tokenizer = !o.no_tokenizer;
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

  if (o.gpu.headless()) return DeviceCliOptions::run_headless(mo);
  const double load_start = LLMEngine::now();
  auto me = open_model_engine(mo);
  if (!me) return fail(me.error());
  std::fprintf(
      stderr, "loaded %s (%s) on %s in %.2f s: %s; KV cache %d blocks of %d tokens (%.1f MiB)\n",
      o.model.c_str(), architecture_name(me->config.architecture).data(), me->backend_name.c_str(),
      LLMEngine::now() - load_start, me->weights_description.c_str(), me->num_kv_blocks,
      o.block_size, static_cast<double>(me->kv_cache_bytes) / (1 << 20));

  // Prompts: text (encoded, optionally through the chat template) and raw ids.
  std::vector<std::string> texts = o.prompts;
  if (!o.prompts_file.empty()) {
    auto more = read_prompts_file(o.prompts_file);
    if (!more) return fail(more.error());
    texts.insert(texts.end(), more->begin(), more->end());
  }
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> labels;
  if (!texts.empty() && !me->tokenizer) {
    return fail(invalid_argument("text prompts need a tokenizer; use --prompt-ids"));
  }
  std::optional<ChatTemplate> chat_template;
  if (o.chat) {
    auto t = load_chat_template(o.model);
    if (!t) return fail(t.error());
    chat_template = std::move(*t);
  }
  for (const std::string& text : texts) {
    std::string rendered = text;
    bool add_special = true;
    if (chat_template) {
      ChatTemplateInputs in;
      if (!o.system.empty()) in.messages.push_back({{"role", "system"}, {"content", o.system}});
      in.messages.push_back({{"role", "user"}, {"content", text}});
      in.add_generation_prompt = true;
      auto r = chat_template->render(in);
      if (!r) return fail(r.error());
      rendered = std::move(*r);
      add_special = false;  // the template writes BOS itself (vLLM's chat path)
    }
    auto ids = me->tokenizer->encode(rendered, add_special);
    if (!ids) return fail(ids.error());
    prompts.push_back(std::move(*ids));
    labels.push_back(text);
  }
  for (const std::string& s : o.prompt_ids) {
    auto ids = parse_ids(s);
    if (!ids) return fail(ids.error());
    prompts.push_back(std::move(*ids));
    labels.push_back(fmt::format("[{}]", s));
  }
  if (prompts.empty())
    return fail(invalid_argument("no prompts: give --prompt, --prompts-file or --prompt-ids"));

  SamplingParams params = me->default_sampling_params();
  if (o.temperature) params.temperature = *o.temperature;
  if (o.top_p) params.top_p = *o.top_p;
  if (o.top_k) params.top_k = *o.top_k;
  if (o.min_p) params.min_p = *o.min_p;
  if (o.presence_penalty) params.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) params.frequency_penalty = *o.frequency_penalty;
  if (o.repetition_penalty) params.repetition_penalty = *o.repetition_penalty;
  params.max_tokens = o.max_tokens.value_or(params.max_tokens.value_or(16));
  params.seed = o.request_seed;
  params.n = o.n;
  params.min_tokens = o.min_tokens;
  params.ignore_eos = o.ignore_eos;
  params.stop = o.stop;

  const double start = LLMEngine::now();
  auto results = me->engine->generate(prompts, params);
  if (!results) return fail(results.error());
  const double elapsed = LLMEngine::now() - start;

  int64_t prompt_tokens = 0, generated = 0, cached = 0;
  nlohmann::json json_out = nlohmann::json::array();
  for (size_t i = 0; i < results->size(); ++i) {
    const RequestResult& r = (*results)[i];
    prompt_tokens += static_cast<int64_t>(prompts[i].size());
    for (const CompletionResult& c : r.completions) {
      const RequestMetrics& m = c.metrics;
      generated += m.num_generation_tokens;
      cached += m.num_cached_tokens;
      if (o.json) {
        json_out.push_back({{"prompt", labels[i]},
                            {"index", c.index},
                            {"text", c.text},
                            {"token_ids", c.token_ids},
                            {"finish_reason", finish_name(c.finish_reason)},
                            {"prompt_tokens", prompts[i].size()},
                            {"cached_tokens", m.num_cached_tokens},
                            {"ttft_s", m.time_to_first_token()},
                            {"e2e_s", m.e2e_latency()}});
        continue;
      }
      fmt::print("--- prompt {}{}: {}\n", i,
                 r.completions.size() > 1 ? fmt::format(" #{}", c.index) : "", labels[i]);
      fmt::print("{}\n",
                 me->tokenizer ? c.text : fmt::format("[{}]", fmt::join(c.token_ids, ", ")));
      const double decode_s = m.e2e_latency() - m.time_to_first_token();
      fmt::print(
          "    {} prompt tokens ({} cached), {} generated, finish {}; TTFT {:.1f} ms, e2e {:.1f} "
          "ms, {:.1f} tok/s decode\n",
          prompts[i].size(), m.num_cached_tokens, m.num_generation_tokens,
          finish_name(c.finish_reason), m.time_to_first_token() * 1e3, m.e2e_latency() * 1e3,
          m.num_generation_tokens > 1 && decode_s > 0 ? (m.num_generation_tokens - 1) / decode_s
                                                      : 0.0);
    }
  }
  if (o.json) {
    fmt::print("{}\n", json_out.dump(2));
  } else {
    fmt::print(
        "=== {} requests in {:.2f} s: {} prompt tokens ({} cached), {} generated; "
        "{:.1f} output tok/s, {:.1f} total tok/s\n",
        results->size(), elapsed, prompt_tokens, cached, generated, generated / elapsed,
        (prompt_tokens + generated) / elapsed);
  }
  me->engine->shutdown();
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate",
                                 "Run prompts through a model offline and print the completions");
  cmd->add_option("model", o->model,
                  "Model directory (config.json, safetensors, tokenizer.json); default: the "
                  "trained demo model in models/demo");
  cmd->add_option("--model", o->model, "Same as the positional argument");
  cmd->add_option("--prompt,-p", o->prompts, "A prompt (repeat for a batch)");
  cmd->add_option("--prompts-file", o->prompts_file, "A file with one prompt per line");
  cmd->add_option("--prompt-ids", o->prompt_ids, "A prompt as token ids, e.g. 1,2,3 (repeatable)");
  cmd->add_flag("--chat", o->chat, "Render each prompt as a user message with the chat template");
  cmd->add_option("--system", o->system, "System message for --chat");
  cmd->add_option("--load-format", o->load_format, "auto | safetensors | dummy");
  cmd->add_flag("--skip-tokenizer-init", o->no_tokenizer, "Token ids in and out, no tokenizer");
  cmd->add_flag("--cpu-openblas", o->cpu_openblas,
                "CPU GEMMs through OpenBLAS: faster, but a row's result depends on its batch");
  cmd->add_option("--cpu-threads", o->cpu_threads, "CPU backend threads (0 = all cores)");
  cmd->add_option("--block-size", o->block_size, "Tokens per KV block")->check(CLI::Range(1, 1024));
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Requests per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-model-len", o->max_model_len,
                  "Prompt + output limit (default: the model's)");
  cmd->add_option("--num-gpu-blocks-override", o->num_gpu_blocks_override,
                  "KV blocks (overrides the budget)");
  o->gpu.add_to(cmd);
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory_gib, "CPU KV cache budget in GiB")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o->enable_prefix_caching,
                "Automatic prefix caching (default on)");
  cmd->add_option("--seed", o->seed, "Engine seed (and dummy-weight seed)");
  cmd->add_option("--temperature", o->temperature, "Sampling temperature (0 = greedy)");
  cmd->add_option("--top-p", o->top_p, "Nucleus sampling");
  cmd->add_option("--top-k", o->top_k, "Top-k sampling (0 or -1 = off)");
  cmd->add_option("--min-p", o->min_p, "Min-p sampling");
  cmd->add_option("--presence-penalty", o->presence_penalty, "Presence penalty");
  cmd->add_option("--frequency-penalty", o->frequency_penalty, "Frequency penalty");
  cmd->add_option("--repetition-penalty", o->repetition_penalty, "Repetition penalty");
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate per completion (default 16)");
  cmd->add_option("--min-tokens", o->min_tokens, "Suppress EOS/stop ids before this many tokens");
  cmd->add_option("--request-seed", o->request_seed, "Per-request sampling seed");
  cmd->add_option("-n", o->n, "Completions per prompt")->check(CLI::PositiveNumber);
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Do not stop at EOS");
  cmd->add_option("--stop", o->stop, "Stop string (repeatable)");
  cmd->add_flag("--json", o->json, "Print the completions as JSON");
  cmd->callback([&run, o] {
    run = [o] {
      if (Status s = use_demo_model_if_unnamed(o->model); !s.is_ok()) return fail(s);
      return run_generate(*o);
    };
  });
}

}  // namespace locus::cli
