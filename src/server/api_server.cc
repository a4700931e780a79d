#include "server/api_server.h"

#include <fmt/format.h>

#include <chrono>
#include <exception>
#include <memory>

#include "core/version.h"

namespace locus {
namespace {

using boost::asio::awaitable;
using openai::ApiError;

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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
  return "none";
}

template <typename T>
const ApiError* error_of(const std::variant<T, ApiError>& v) {
  return std::get_if<ApiError>(&v);
}

}  // namespace

ApiServer::ApiServer(ModelEngine& model, std::optional<ChatTemplate> chat_template,
                     ApiServerOptions options)
    : model_(model),
      engine_(*model.engine),
      tokenizer_(*model.tokenizer),
      chat_template_(std::move(chat_template)),
      options_(std::move(options)),
      defaults_(model.default_sampling_params()),
      metrics_(options_.served_model_names.empty() ? std::string("locus")
                                                   : options_.served_model_names.front(),
               model.num_kv_blocks),
      created_(unix_seconds()) {
  limits_.vocab_size = engine_.vocab_size();
  limits_.max_model_len = engine_.config().scheduler.max_model_len;
  limits_.max_logprobs = options_.max_logprobs;
  limits_.max_n = options_.max_n;
  // generation_config's max_new_tokens is not a request default in vLLM's server (it caps
  // nothing there either); requests without max_tokens run to the context limit.
  defaults_.max_tokens.reset();
}

void ApiServer::register_routes(http::Router& router) {
  router.add("POST", "/v1/chat/completions", guarded(&ApiServer::chat_completions, true));
  router.add("POST", "/v1/completions", guarded(&ApiServer::completions, true));
  router.add("GET", "/v1/models", guarded(&ApiServer::models, true));
  router.add("POST", "/tokenize", guarded(&ApiServer::tokenize, true));
  router.add("POST", "/detokenize", guarded(&ApiServer::detokenize, true));
  router.add("GET", "/health", guarded(&ApiServer::health, false));
  router.add("GET", "/version", guarded(&ApiServer::version, false));
  router.add("GET", "/metrics", guarded(&ApiServer::metrics_route, false));
}

http::Handler ApiServer::guarded(Awaitable (ApiServer::*handler)(const http::Request&,
                                                                 http::Responder&),
                                 bool needs_key) {
  // Not a coroutine itself: a coroutine lambda's captures would die with the std::function
  // copy that called it; the member coroutine keeps everything it needs in its frame.
  return [this, handler, needs_key](const http::Request& req, http::Responder& res) {
    return call_guarded(handler, needs_key, req, res);
  };
}

awaitable<void> ApiServer::call_guarded(Awaitable (ApiServer::*handler)(const http::Request&,
                                                                        http::Responder&),
                                        bool needs_key, const http::Request& req,
                                        http::Responder& res) {
  if (needs_key && options_.api_key) {
    const std::string expected = "Bearer " + *options_.api_key;
    if (req.header("authorization") != expected) {
      metrics_.count_error(401);
      co_await res.send_error(401, "Unauthorized: a valid API key is required");
      co_return;
    }
  }
  co_await (this->*handler)(req, res);
}

awaitable<void> ApiServer::send_api_error(http::Responder& res, const ApiError& error) {
  metrics_.count_error(error.status);
  co_await res.send_error(error.status, error.message, error.param);
}

std::optional<ApiError> ApiServer::check_model(const std::string& model) const {
  if (model.empty()) return std::nullopt;  // vLLM serves the default model then
  for (const std::string& name : options_.served_model_names) {
    if (name == model) return std::nullopt;
  }
  return ApiError{404, fmt::format("The model `{}` does not exist.", model), "model"};
}

std::variant<std::string, ApiError> ApiServer::render_chat(const nlohmann::ordered_json& messages,
                                                           const nlohmann::ordered_json& tools,
                                                           const nlohmann::ordered_json& kwargs,
                                                           bool add_generation_prompt,
                                                           bool continue_final_message) const {
  if (!chat_template_) {
    return ApiError{400,
                    "The model has no chat template (tokenizer_config.json chat_template or "
                    "chat_template.jinja); use /v1/completions",
                    ""};
  }
  if (add_generation_prompt && continue_final_message) {
    return ApiError{400,
                    "Cannot set both `continue_final_message` and `add_generation_prompt` to "
                    "True.",
                    "continue_final_message"};
  }
  ChatTemplateInputs in;
  in.messages = messages;
  in.tools = tools;
  in.add_generation_prompt = add_generation_prompt;
  in.continue_final_message = continue_final_message;
  if (kwargs.is_object()) in.extra_kwargs = kwargs;
  auto rendered = chat_template_->render(in);
  if (!rendered) {
    return ApiError{400, fmt::format("chat template error: {}", rendered.error().message()),
                    "messages"};
  }
  return std::move(*rendered);
}

std::string ApiServer::token_text(int32_t id) const {
  const int32_t ids[1] = {id};
  return tokenizer_.decode(ids, /*skip_special_tokens=*/false);
}

std::string ApiServer::next_id(std::string_view prefix) {
  return fmt::format("{}-{:x}{:08x}", prefix, created_,
                     next_id_.fetch_add(1, std::memory_order_relaxed));
}

awaitable<void> ApiServer::chat_completions(const http::Request& req, http::Responder& res) {
  auto parsed = openai::parse_chat_completion_request(req.body, defaults_, limits_);
  if (const ApiError* e = error_of(parsed)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  auto& r = std::get<openai::ChatCompletionRequest>(parsed);
  if (auto e = check_model(r.model)) {
    co_await send_api_error(res, *e);
    co_return;
  }

  auto prompt = render_chat(r.messages, r.tools, r.chat_template_kwargs, r.add_generation_prompt,
                            r.continue_final_message);
  if (const ApiError* e = error_of(prompt)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  // The template writes BOS itself (vLLM tokenizes chat prompts without special tokens).
  auto ids = tokenizer_.encode(std::get<std::string>(prompt), /*add_special_tokens=*/false);
  if (!ids) {
    const ApiError error{400, ids.error().message(), "messages"};
    co_await send_api_error(res, error);
    co_return;
  }
  if (auto e = openai::finalize_for_prompt(r.params, *ids, limits_)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  Job job;
  job.chat = true;
  job.stream = r.stream;
  job.include_usage = r.include_usage;
  job.continuous_usage = r.continuous_usage_stats;
  job.want_logprobs = r.params.logprobs.has_value();
  job.tokens_as_ids = r.return_tokens_as_token_ids;
  job.priority = r.priority;
  job.model = r.model.empty() ? options_.served_model_names.front() : r.model;
  job.params = r.params;
  job.prompts.push_back(std::move(*ids));
  co_await run_job(std::move(job), res);
}

awaitable<void> ApiServer::completions(const http::Request& req, http::Responder& res) {
  auto parsed = openai::parse_completion_request(req.body, defaults_, limits_);
  if (const ApiError* e = error_of(parsed)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  auto& r = std::get<openai::CompletionRequest>(parsed);
  if (auto e = check_model(r.model)) {
    co_await send_api_error(res, *e);
    co_return;
  }

  Job job;
  job.stream = r.stream;
  job.include_usage = r.include_usage;
  job.continuous_usage = r.continuous_usage_stats;
  job.want_logprobs = r.params.logprobs.has_value();
  job.tokens_as_ids = r.return_tokens_as_token_ids;
  job.priority = r.priority;
  job.model = r.model.empty() ? options_.served_model_names.front() : r.model;
  job.params = r.params;
  for (size_t i = 0; i < r.prompts.size(); ++i) {
    const openai::PromptInput& p = r.prompts[i];
    std::vector<int32_t> ids;
    if (p.is_tokens) {
      ids = p.token_ids;
    } else {
      auto encoded = tokenizer_.encode(p.text, r.add_special_tokens);
      if (!encoded) {
        const ApiError error{400, encoded.error().message(), "prompt"};
        co_await send_api_error(res, error);
        co_return;
      }
      ids = std::move(*encoded);
    }
    // Every prompt gets its own copy: max_tokens defaults to what its own length leaves.
    SamplingParams params = r.params;
    if (auto e = openai::finalize_for_prompt(params, ids, limits_)) {
      co_await send_api_error(res, *e);
      co_return;
    }
    if (i == 0) job.params = params;
    if (r.echo) job.echo_prefixes.push_back(p.is_tokens ? tokenizer_.decode(ids) : p.text);
    job.prompts.push_back(std::move(ids));
  }
  // One max_tokens for all prompts: the smallest any prompt allows when the body set none.
  if (!r.params.max_tokens) {
    for (const auto& ids : job.prompts) {
      const int left = limits_.max_model_len - static_cast<int>(ids.size());
      job.params.max_tokens = std::min(job.params.max_tokens.value_or(left), left);
    }
  }
  co_await run_job(std::move(job), res);
}

awaitable<void> ApiServer::run_job(Job job, http::Responder& res) {
  const int n = job.params.n;
  const int num_prompts = static_cast<int>(job.prompts.size());
  const int capacity = engine_.config().scheduler.max_num_seqs + options_.max_waiting_requests;
  if (engine_.num_unfinished_requests() + num_prompts > capacity) {
    const ApiError error{503,
                         fmt::format("The server is overloaded: {} requests are already queued; "
                                     "retry later",
                                     engine_.num_unfinished_requests()),
                         ""};
    co_await send_api_error(res, error);
    co_return;
  }

  // Admit every prompt; the engine wakes this coroutine through `signal` from its output thread.
  auto signal = std::make_shared<http::AsyncSignal>(res.executor());
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<RequestId> ids;
  for (const auto& prompt : job.prompts) {
    RequestOptions options;
    options.priority = job.priority;
    auto stream = engine_.add_request(prompt, job.params, options);
    if (!stream) {
      for (RequestId id : ids)
        engine_.abort(id);
      const bool dead = !engine_.health().is_ok();
      const ApiError error{dead ? 503 : 400, stream.error().message(), ""};
      co_await send_api_error(res, error);
      co_return;
    }
    (*stream)->set_on_ready([signal] { signal->notify(); });
    ids.push_back((*stream)->request_id());
    streams.push_back(std::move(*stream));
  }
  res.on_client_gone([this, ids] {
    for (RequestId id : ids)
      engine_.abort(id);
  });

  const openai::ResponseHeader header{next_id(job.chat ? "chatcmpl" : "cmpl"), unix_seconds(),
                                      job.model};
  const openai::TokenText text = [this, as_ids = job.tokens_as_ids](int32_t id) {
    return as_ids ? "token_id:" + std::to_string(id) : token_text(id);
  };
  openai::Usage usage;
  for (const auto& p : job.prompts)
    usage.prompt_tokens += static_cast<int>(p.size());
  std::vector<RequestResult> results(job.prompts.size());
  std::vector<size_t> text_offsets(static_cast<size_t>(num_prompts * n), 0);
  std::vector<double> last_chunk_time(static_cast<size_t>(num_prompts * n), 0.0);
  std::optional<Status> failure;
  bool client_gone = false;

  if (job.stream) {
    co_await res.begin_stream(200);
    if (job.chat) {
      for (int c = 0; c < n; ++c) {
        openai::ChoiceDelta first;
        first.index = c;
        first.first = true;
        std::string chunk = openai::chat_completion_chunk(header, first, text, false);
        if (!co_await res.write(std::move(chunk))) {
          client_gone = true;
          break;
        }
      }
    }
    if (job.echo_prefixes.size() == job.prompts.size()) {
      for (int p = 0; p < num_prompts && !client_gone; ++p) {
        for (int c = 0; c < n; ++c) {
          openai::ChoiceDelta echo;
          echo.index = p * n + c;
          echo.text = job.echo_prefixes[static_cast<size_t>(p)];
          text_offsets[static_cast<size_t>(echo.index)] = echo.text.size();
          std::string chunk = openai::completion_chunk(header, echo, text, false);
          if (!co_await res.write(std::move(chunk))) {
            client_gone = true;
            break;
          }
        }
      }
    }
  }

  std::vector<bool> done(streams.size(), false);
  size_t open = streams.size();
  while (open > 0 && !client_gone) {
    bool progressed = false;
    for (size_t p = 0; p < streams.size() && !client_gone; ++p) {
      if (done[p]) continue;
      while (auto next = streams[p]->try_next()) {
        progressed = true;
        if (!*next) {
          failure = next->error();
          done[p] = true;
          --open;
          break;
        }
        RequestOutput delta = std::move(**next);
        const bool last = delta.request_finished;
        usage.completion_tokens += static_cast<int>(delta.token_ids.size());
        if (delta.finished) {
          if (delta.index == 0) usage.cached_tokens += delta.metrics.num_cached_tokens;
          metrics_.observe_finished(delta.metrics, finish_name(delta.finish_reason),
                                    delta.index == 0);
        }
        if (job.stream) {
          const int index = static_cast<int>(p) * n + delta.index;
          const bool has_logprobs = job.want_logprobs && !delta.logprobs.empty();
          if (!delta.text.empty() || has_logprobs || delta.finish_reason) {
            openai::ChoiceDelta d;
            d.index = index;
            d.text = delta.text;
            d.logprobs = delta.logprobs;
            d.text_offset = text_offsets[static_cast<size_t>(index)];
            d.finish_reason = delta.finish_reason;
            d.stop_reason = delta.stop_reason;
            text_offsets[static_cast<size_t>(index)] += delta.text.size();
            std::optional<openai::Usage> running;
            if (job.include_usage && job.continuous_usage) running = usage;
            std::string chunk =
                job.chat
                    ? openai::chat_completion_chunk(header, d, text, job.want_logprobs, running)
                    : openai::completion_chunk(header, d, text, job.want_logprobs, running);
            const double now = LLMEngine::now();
            double& previous = last_chunk_time[static_cast<size_t>(index)];
            if (previous > 0.0) metrics_.observe_inter_token(now - previous);
            previous = now;
            if (!co_await res.write(std::move(chunk))) {
              client_gone = true;
              break;
            }
          }
        } else {
          accumulate_output(results[p], std::move(delta));
        }
        if (last) {
          done[p] = true;
          --open;
          break;
        }
      }
    }
    if (open > 0 && !progressed && !client_gone) co_await signal->wait();
  }

  if (client_gone || res.client_gone()) {
    // abort() queues each unfinished completion's final delta at once. Count them here: the
    // deltas nobody reads are still finished requests (finished_reason="abort"), whichever of
    // the failed write and the hang-up callback came first.
    for (RequestId id : ids)
      engine_.abort(id);
    for (size_t p = 0; p < streams.size(); ++p) {
      if (done[p]) continue;
      while (auto next = streams[p]->try_next()) {
        if (!*next) break;
        if ((*next)->finished) {
          metrics_.observe_finished((*next)->metrics, finish_name((*next)->finish_reason),
                                    (*next)->index == 0);
        }
        if ((*next)->request_finished) break;
      }
    }
    co_return;
  }
  if (failure) {
    const ApiError error{engine_.health().is_ok() ? 500 : 503, failure->message(), ""};
    metrics_.count_error(error.status);
    if (job.stream) {
      std::string chunk = openai::error_chunk(error);
      co_await res.write(std::move(chunk));
      std::string sse_done(openai::kSseDone);
      co_await res.write(std::move(sse_done));
      co_await res.end_stream();
    } else {
      co_await res.send_error(error.status, error.message);
    }
    co_return;
  }
  if (job.stream) {
    if (job.include_usage) {
      std::string chunk = openai::usage_chunk(
          header, job.chat ? "chat.completion.chunk" : "text_completion", usage);
      co_await res.write(std::move(chunk));
    }
    std::string sse_done(openai::kSseDone);
    co_await res.write(std::move(sse_done));
    co_await res.end_stream();
    co_return;
  }
  if (job.chat) {
    std::string body =
        openai::chat_completion_response(header, results[0], usage, text, job.want_logprobs);
    co_await res.send(200, std::move(body));
  } else {
    std::vector<std::string> echo = job.echo_prefixes;
    std::vector<std::vector<int32_t>> prompt_ids;
    if (!echo.empty()) prompt_ids = job.prompts;  // echo + logprobs scores the prompt too
    std::string body = openai::completion_response(header, results, echo, n, usage, text,
                                                   job.want_logprobs, prompt_ids);
    co_await res.send(200, std::move(body));
  }
}

std::string ApiServer::tokenize_json(const std::vector<int32_t>& ids,
                                     bool return_token_strs) const {
  nlohmann::json body = {
      {"count", ids.size()}, {"max_model_len", limits_.max_model_len}, {"tokens", ids}};
  if (return_token_strs) {
    std::vector<std::string> strs;
    for (int32_t id : ids)
      strs.push_back(tokenizer_.id_to_token(id).value_or(""));
    body["token_strs"] = strs;
  }
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

awaitable<void> ApiServer::tokenize(const http::Request& req, http::Responder& res) {
  auto parsed = openai::parse_tokenize_request(req.body);
  if (const ApiError* e = error_of(parsed)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  auto& r = std::get<openai::TokenizeRequest>(parsed);
  if (auto e = check_model(r.model)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  std::string prompt;
  if (r.messages) {
    auto rendered = render_chat(*r.messages, r.tools, r.chat_template_kwargs,
                                r.add_generation_prompt, r.continue_final_message);
    if (const ApiError* e = error_of(rendered)) {
      co_await send_api_error(res, *e);
      co_return;
    }
    prompt = std::move(std::get<std::string>(rendered));
  } else {
    prompt = r.prompt.value_or("");
  }
  auto ids = tokenizer_.encode(prompt, r.add_special_tokens);
  if (!ids) {
    const ApiError error{400, ids.error().message(), "prompt"};
    co_await send_api_error(res, error);
    co_return;
  }
  std::string body = tokenize_json(*ids, r.return_token_strs);
  co_await res.send(200, std::move(body));
}

awaitable<void> ApiServer::detokenize(const http::Request& req, http::Responder& res) {
  auto parsed = openai::parse_detokenize_request(req.body, limits_);
  if (const ApiError* e = error_of(parsed)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  auto& r = std::get<openai::DetokenizeRequest>(parsed);
  if (auto e = check_model(r.model)) {
    co_await send_api_error(res, *e);
    co_return;
  }
  nlohmann::json body = nlohmann::json::object();
  body["prompt"] = tokenizer_.decode(r.tokens);
  std::string text = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  co_await res.send(200, std::move(text));
}

std::string ApiServer::models_json() const {
  nlohmann::json data = nlohmann::json::array();
  for (const std::string& name : options_.served_model_names) {
    data.push_back({{"id", name},
                    {"object", "model"},
                    {"created", created_},
                    {"owned_by", "locus"},
                    {"root", options_.model_root},
                    {"parent", nullptr},
                    {"max_model_len", limits_.max_model_len}});
  }
  return nlohmann::json{{"object", "list"}, {"data", data}}.dump();
}

awaitable<void> ApiServer::models(const http::Request&, http::Responder& res) {
  // (Assignments instead of brace-initialized JSON: GCC 12 miscompiles initializer lists in
  // coroutines, "array used as initializer".)
  std::string body = models_json();
  co_await res.send(200, std::move(body));
}

awaitable<void> ApiServer::health(const http::Request&, http::Responder& res) {
  const Status status = engine_.health();
  if (status.is_ok()) {
    std::string empty;
    co_await res.send(200, std::move(empty), "text/plain");
    co_return;
  }
  const std::string message = fmt::format("the engine is not running: {}", status.message());
  co_await res.send_error(503, message);
}

std::string ApiServer::version_json() {
  return nlohmann::json{{"version", kVersion}, {"commit", kGitCommit}}.dump();
}

awaitable<void> ApiServer::version(const http::Request&, http::Responder& res) {
  std::string body = version_json();
  co_await res.send(200, std::move(body));
}

awaitable<void> ApiServer::metrics_route(const http::Request&, http::Responder& res) {
  std::string body = metrics_.render(engine_.stats(), engine_.num_unfinished_requests());
  co_await res.send(200, std::move(body), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace locus
