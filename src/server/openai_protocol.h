// The OpenAI / vLLM wire format, as pure functions: JSON request bodies in -> typed, validated
// requests (or an ApiError with the HTTP status and message vLLM would give); engine results in
// -> response bodies and Server-Sent-Event chunks. No I/O, no engine calls: api_server.cc glues
// these to the HTTP layer and the LLMEngine.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/request_output.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace locus::openai {

// A request the server refuses: the status (400, 404, 413, ...), the message and the field
// at fault ("messages[0].content", "temperature"); rendered with http::error_body.
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;
};

template <typename T>
using ApiResult = std::variant<T, ApiError>;

// What validation needs to know about the served model and the server's limits.
struct Limits {
  int vocab_size = 0;
  int max_model_len = 0;
  int max_logprobs = 20;  // --max-logprobs: top_logprobs / logprobs above it are 400
  int max_n = 128;        // n above it is 400 ("absurd n")
};

// One prompt of /v1/completions: text, or token ids (a list of ints).
struct PromptInput {
  bool is_tokens = false;
  std::string text;
  std::vector<int32_t> token_ids;
};

// The sampling fields shared by both endpoints are read into SamplingParams, starting from
// `defaults` (the model's generation_config.json) for fields the body does not set:
//   n, temperature, top_p, top_k, min_p, seed, presence_penalty, frequency_penalty,
//   repetition_penalty, logit_bias (keys are token-id strings), stop (string or list),
//   stop_token_ids, max_tokens / max_completion_tokens (chat; max_completion_tokens wins),
//   min_tokens, ignore_eos, skip_special_tokens, spaces_between_special_tokens,
//   include_stop_str_in_output, prompt_logprobs.
// Types are checked strictly (a string temperature is 400 naming "temperature"); ranges follow
// SamplingParams::validate_for_model and vLLM's messages. Unknown fields are ignored, like
// vLLM; fields locus does not implement but would change the output (e.g. "suffix",
// "best_of" > n, "response_format" other than text, "use_beam_search": true) are 400 saying so.
struct ChatCompletionRequest {
  std::string model;
  nlohmann::ordered_json messages;  // non-empty array; each has a known role and valid content
  nlohmann::ordered_json tools;     // null or an array
  nlohmann::ordered_json tool_choice;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool echo = false;
  // vLLM's return_tokens_as_token_ids: logprob tokens as "token_id:<id>" instead of their text.
  bool return_tokens_as_token_ids = false;
  SamplingParams params;  // logprobs: true + top_logprobs k -> params.logprobs = k (0 if absent)
  bool stream = false;
  bool include_usage = false;           // stream_options.include_usage
  bool continuous_usage_stats = false;  // stream_options.continuous_usage_stats (vLLM)
  int priority = 0;
  std::optional<std::string> request_id;  // vLLM's "request_id" extra field
};

struct CompletionRequest {
  std::string model;
  std::vector<PromptInput> prompts;  // "prompt": string | [string] | [int] | [[int]]; non-empty
  SamplingParams params;             // "logprobs": k -> params.logprobs = k
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage_stats = false;
  bool echo = false;
  bool return_tokens_as_token_ids = false;
  bool add_special_tokens = true;
  int priority = 0;
  std::optional<std::string> request_id;
};

// POST /tokenize: {"model", "prompt", "add_special_tokens"} or {"model", "messages",
// "add_generation_prompt", "continue_final_message", "chat_template_kwargs", "tools"}.
struct TokenizeRequest {
  std::string model;
  std::optional<std::string> prompt;  // exactly one of prompt / messages
  std::optional<nlohmann::ordered_json> messages;
  nlohmann::ordered_json tools;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_special_tokens = true;  // default true for prompt, false for messages (vLLM)
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  bool return_token_strs = false;
};

// POST /detokenize: {"model", "tokens": [int]}.
struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> tokens;
};

// Bodies that are not JSON objects are 400 "... is not valid JSON" (with the parser's
// position); invalid UTF-8 anywhere in the body is 400. `model` may be absent (vLLM then uses
// the served model); checking it against the served names is the caller's job.
ApiResult<ChatCompletionRequest> parse_chat_completion_request(std::string_view body,
                                                               const SamplingParams& defaults,
                                                               const Limits& limits);
ApiResult<CompletionRequest> parse_completion_request(std::string_view body,
                                                      const SamplingParams& defaults,
                                                      const Limits& limits);
ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body);
ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body, const Limits& limits);

// After tokenization (the caller knows the prompt length): max_tokens unset -> max_model_len -
// prompt_len; prompt_len >= max_model_len or prompt_len + max_tokens > max_model_len -> 400 with
// vLLM's message ("This model's maximum context length is N tokens. However, you requested M
// tokens (P in the messages, C in the completion). Please reduce the length of the messages or
// completion."); token ids outside the vocabulary -> 400.
std::optional<ApiError> finalize_for_prompt(SamplingParams& params, std::span<const int32_t> prompt,
                                            const Limits& limits);

// --- responses -------------------------------------------------------------------------------

// The text of one token as logprobs show it (the tokenizer's decode of that id alone); the
// UTF-8 bytes of that text go into the chat format's "bytes".
using TokenText = std::function<std::string(int32_t token_id)>;

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;  // reported as prompt_tokens_details.cached_tokens when > 0
};
nlohmann::json usage_json(const Usage& usage);

// "stop" | "length" | "abort"; null when unset.
nlohmann::json finish_reason_json(const std::optional<FinishReason>& reason);
// vLLM's stop_reason: null, the stop token id, or the stop string.
nlohmann::json stop_reason_json(const StopReason& reason);

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
nlohmann::json chat_logprobs_json(std::span<const Logprobs> logprobs, const TokenText& text);
// Completions logprobs: {"tokens", "token_logprobs", "top_logprobs": [{tok: lp}], "text_offset"},
// offsets counted from `first_offset` (bytes of text before these tokens).
nlohmann::json completion_logprobs_json(std::span<const Logprobs> logprobs, const TokenText& text,
                                        size_t first_offset);

struct ResponseHeader {
  std::string id;  // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;
  std::string model;
};

// Non-streaming bodies. Chat: one choice per completion of `result`, "message": {"role":
// "assistant", "content": text}. Completions: results[i] belongs to prompts[i]; choice index is
// i * n + completion index; echo prepends the prompt text. With echo and logprobs, pass each
// prompt's token ids too: the logprobs then cover the prompt tokens first (vLLM's echo format,
// what lm-eval's loglikelihood reads; the first token's logprob is null, the others come from
// results[i].prompt_logprobs, which parse_completion_request asks for), then the completion.
std::string chat_completion_response(const ResponseHeader& header, const RequestResult& result,
                                     const Usage& usage, const TokenText& text, bool want_logprobs);
std::string completion_response(const ResponseHeader& header,
                                std::span<const RequestResult> results,
                                std::span<const std::string> echo_prefixes, int n,
                                const Usage& usage, const TokenText& text, bool want_logprobs,
                                std::span<const std::vector<int32_t>> prompt_token_ids = {});

// Streaming: each returns one complete SSE event "data: {...}\n\n".
struct ChoiceDelta {
  int index = 0;
  bool first = false;  // chat: the first chunk of a choice carries "role": "assistant"
  std::string text;
  std::vector<Logprobs> logprobs;
  size_t text_offset = 0;  // completions logprobs: bytes of this choice's text before `text`
  std::optional<FinishReason> finish_reason;
  StopReason stop_reason;
};
std::string chat_completion_chunk(const ResponseHeader& header, const ChoiceDelta& delta,
                                  const TokenText& text, bool want_logprobs,
                                  const std::optional<Usage>& usage = std::nullopt);
std::string completion_chunk(const ResponseHeader& header, const ChoiceDelta& delta,
                             const TokenText& text, bool want_logprobs,
                             const std::optional<Usage>& usage = std::nullopt);
// The last chunk when stream_options.include_usage: "choices": [] and "usage".
std::string usage_chunk(const ResponseHeader& header, std::string_view object, const Usage& usage);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
// An error in the middle of a stream (vLLM sends the error object as a data event).
std::string error_chunk(const ApiError& error);

}  // namespace locus::openai
