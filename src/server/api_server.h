// The OpenAI-compatible API of `locus serve`: the routes (/v1/chat/completions, /v1/completions,
// /v1/models, /tokenize, /detokenize, /health, /version, /metrics) glued to one engine
// (EngineClient). The wire format lives in openai_protocol.h, the HTTP mechanics in http_server.h;
// this file owns the request life: validate, template, tokenize, admit (or 503), stream deltas out,
// abort when the client goes away.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_engine.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "tokenizer/chat_template/chat_template.h"

namespace locus {

struct ApiServerOptions {
  std::vector<std::string> served_model_names;  // the first is reported; all are accepted
  std::string model_root;                       // the model folder, for /v1/models
  std::optional<std::string> api_key;           // required as "Authorization: Bearer KEY" on /v1
  // Requests beyond max_num_seqs + this many are refused with 503 instead of queueing without
  // bound (--max-waiting-requests).
  int max_waiting_requests = 4096;
  int max_logprobs = 20;
  int max_n = 128;
};

class ApiServer {
 public:
  // `model` must hold an engine and a tokenizer; `chat_template` may be absent (chat requests
  // are then 400, like vLLM without a template).
  ApiServer(ModelEngine& model, std::optional<ChatTemplate> chat_template,
            ApiServerOptions options);

  void register_routes(http::Router& router);
  ServerMetrics& metrics() { return metrics_; }

 private:
  struct Admitted;
  using Awaitable = boost::asio::awaitable<void>;

  Awaitable chat_completions(const http::Request& req, http::Responder& res);
  Awaitable completions(const http::Request& req, http::Responder& res);
  Awaitable tokenize(const http::Request& req, http::Responder& res);
  Awaitable detokenize(const http::Request& req, http::Responder& res);
  Awaitable models(const http::Request& req, http::Responder& res);
  Awaitable health(const http::Request& req, http::Responder& res);
  Awaitable version(const http::Request& req, http::Responder& res);
  Awaitable metrics_route(const http::Request& req, http::Responder& res);

  // Wraps a handler with the API-key check and error accounting.
  http::Handler guarded(Awaitable (ApiServer::*handler)(const http::Request&, http::Responder&),
                        bool needs_key);
  Awaitable call_guarded(Awaitable (ApiServer::*handler)(const http::Request&, http::Responder&),
                         bool needs_key, const http::Request& req, http::Responder& res);
  Awaitable send_api_error(http::Responder& res, const openai::ApiError& error);
  std::optional<openai::ApiError> check_model(const std::string& model) const;
  // Renders the chat template; a template error is a 400 naming it.
  std::variant<std::string, openai::ApiError> render_chat(const nlohmann::ordered_json& messages,
                                                          const nlohmann::ordered_json& tools,
                                                          const nlohmann::ordered_json& kwargs,
                                                          bool add_generation_prompt,
                                                          bool continue_final_message) const;
  std::string token_text(int32_t id) const;
  std::string models_json() const;
  static std::string version_json();
  std::string tokenize_json(const std::vector<int32_t>& ids, bool return_token_strs) const;
  std::string next_id(std::string_view prefix);

  // Runs prompts (each with params.n completions) through the engine and writes the answer:
  // a JSON body, or SSE chunks when `stream`.
  struct Job {
    bool chat = false;
    bool stream = false;
    bool include_usage = false;
    bool continuous_usage = false;
    bool want_logprobs = false;
    bool tokens_as_ids = false;  // return_tokens_as_token_ids
    int priority = 0;
    std::string model;
    SamplingParams params;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::string> echo_prefixes;  // completions echo: prompt text per prompt
  };
  Awaitable run_job(Job job, http::Responder& res);

  ModelEngine& model_;
  EngineClient& engine_;
  const Tokenizer& tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  ApiServerOptions options_;
  openai::Limits limits_;
  SamplingParams defaults_;
  ServerMetrics metrics_;
  int64_t created_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace locus
