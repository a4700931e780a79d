// OpenAI request bodies -> validated requests, with the 400s vLLM gives. Bodies are hostile input:
// every JSON access is type-checked first and no exception may leave this file.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/openai_protocol.h"
#include "server/openai_request_fields.h"

namespace locus::openai {
namespace {

// The typed field readers are this file's vocabulary.
using namespace request_fields;

// vLLM has no limit; this only keeps a hostile body from making the stop matcher quadratic.
constexpr size_t kMaxStopStrings = 64;
// vLLM's CompletionRequest.max_tokens defaults to 16 (OpenAI's legacy default) when the field is
// absent; an explicit null means "up to the context length".
constexpr int kCompletionDefaultMaxTokens = 16;

std::string not_supported(std::string_view field) {
  return fmt::format("`{}` is not supported by this server.", field);
}

// logit_bias: {"<token id>": bias}; ids are checked against the vocabulary by
// validate_for_model, which names every bad id the way vLLM does.
Error get_logit_bias(const Json& body, std::map<int32_t, float>& out) {
  const Json* value = find_field(body, "logit_bias");
  if (value == nullptr) return std::nullopt;
  if (!value->is_object()) {
    return bad_request(
        fmt::format("logit_bias: Input should be a valid dictionary, got {}", value->type_name()),
        "logit_bias");
  }
  std::map<int32_t, float> bias;
  for (auto it = value->begin(); it != value->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = 0;
    bool is_integer = !key.empty() && key.size() <= 12;
    for (size_t i = 0; is_integer && i < key.size(); ++i) {
      const char c = key[i];
      if (c >= '0' && c <= '9') {
        id = id * 10 + (c - '0');
      } else if (!(c == '-' && i == 0 && key.size() > 1)) {
        is_integer = false;
      }
    }
    if (!is_integer) {
      return bad_request(
          fmt::format("logit_bias: key '{}' is not a token id (an integer string)", key),
          "logit_bias");
    }
    if (key[0] == '-') id = -id;
    if (!it.value().is_number()) {
      return bad_request(fmt::format("logit_bias: the bias of token {} should be a number, got {}",
                                     key, it.value().type_name()),
                         "logit_bias");
    }
    const double b = it.value().get<double>();
    if (!(b >= -100.0 && b <= 100.0)) {
      return bad_request(
          fmt::format("logit_bias: the bias of token {} must be in [-100, 100], got {}", key, b),
          "logit_bias");
    }
    // In-range ids are checked against the vocabulary by validate_for_model.
    if (id > std::numeric_limits<int32_t>::max() || id < std::numeric_limits<int32_t>::min()) {
      return bad_request(fmt::format("logit_bias: token id {} is out of vocabulary", key),
                         "logit_bias");
    }
    bias[static_cast<int32_t>(id)] = static_cast<float>(b);
  }
  out = std::move(bias);
  return std::nullopt;
}

Error get_stop(const Json& body, std::vector<std::string>& out) {
  const Json* value = find_field(body, "stop");
  if (value == nullptr) return std::nullopt;
  if (value->is_string()) {
    out = {value->get<std::string>()};
    return std::nullopt;
  }
  if (!value->is_array()) {
    return bad_request(fmt::format("stop: Input should be a string or a list of strings, got {}",
                                   value->type_name()),
                       "stop");
  }
  if (value->size() > kMaxStopStrings) {
    return bad_request(fmt::format("stop: at most {} stop strings are allowed, got {}",
                                   kMaxStopStrings, value->size()),
                       "stop");
  }
  std::vector<std::string> stop;
  for (size_t i = 0; i < value->size(); ++i) {
    if (!(*value)[i].is_string()) {
      return bad_request(fmt::format("stop[{}]: Input should be a valid string, got {}", i,
                                     (*value)[i].type_name()),
                         "stop");
    }
    stop.push_back((*value)[i].get<std::string>());
  }
  out = std::move(stop);
  return std::nullopt;
}

// Fields that would change the output but that locus does not implement: refusing beats
// silently ignoring them (a client asking for JSON mode must not get free text).
Error check_unsupported(const Json& body) {
  bool beam = false;
  if (auto e = get_bool(body, "use_beam_search", beam)) return e;
  if (beam) return bad_request(not_supported("use_beam_search"), "use_beam_search");
  if (const Json* format = find_field(body, "response_format")) {
    const Json* type = format->is_object() ? find_field(*format, "type") : nullptr;
    const bool is_text = type != nullptr && type->is_string() && type->get<std::string>() == "text";
    if (!is_text) {
      return bad_request(
          "`response_format` other than {\"type\": \"text\"} is not supported by "
          "this server.",
          "response_format");
    }
  }
  for (const char* field :
       {"guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs",
        "allowed_token_ids", "prompt_embeds", "truncate_prompt_tokens", "logits_processors"}) {
    if (find_field(body, field) != nullptr) return bad_request(not_supported(field), field);
  }
  if (const Json* bad_words = find_field(body, "bad_words")) {
    if (!bad_words->is_array() || !bad_words->empty()) {
      return bad_request(not_supported("bad_words"), "bad_words");
    }
  }
  return std::nullopt;
}

// The sampling fields both endpoints share (max_tokens and logprobs differ and are read by the
// callers).
Error read_sampling_fields(const Json& body, const Limits& limits, SamplingParams& p) {
  std::optional<int> n;
  if (auto e = get_int(body, "n", n)) return e;
  if (n) {
    if (*n < 1) return bad_request(fmt::format("n must be at least 1, got {}.", *n), "n");
    if (*n > limits.max_n) {
      return bad_request(fmt::format("n must be at most {}, got {}.", limits.max_n, *n), "n");
    }
    p.n = *n;
  }
  if (auto e = get_float(body, "temperature", p.temperature)) return e;
  if (auto e = get_float(body, "top_p", p.top_p)) return e;
  if (auto e = get_int(body, "top_k", p.top_k)) return e;
  if (auto e = get_float(body, "min_p", p.min_p)) return e;
  if (auto e = get_float(body, "presence_penalty", p.presence_penalty)) return e;
  if (auto e = get_float(body, "frequency_penalty", p.frequency_penalty)) return e;
  if (auto e = get_float(body, "repetition_penalty", p.repetition_penalty)) return e;
  if (const Json* seed = find_field(body, "seed")) {
    int64_t v = 0;
    if (auto e = to_int64(*seed, "seed", v)) return e;
    // vLLM accepts any int64; a negative seed keeps its bits (two's complement).
    p.seed = static_cast<uint64_t>(v);
  }
  if (auto e = get_logit_bias(body, p.logit_bias)) return e;
  if (auto e = get_stop(body, p.stop)) return e;
  if (auto e = get_int32_list(body, "stop_token_ids", p.stop_token_ids)) return e;
  if (auto e = get_int(body, "min_tokens", p.min_tokens)) return e;
  if (auto e = get_bool(body, "ignore_eos", p.ignore_eos)) return e;
  if (auto e = get_bool(body, "skip_special_tokens", p.skip_special_tokens)) return e;
  if (auto e = get_bool(body, "spaces_between_special_tokens", p.spaces_between_special_tokens)) {
    return e;
  }
  if (auto e = get_bool(body, "include_stop_str_in_output", p.include_stop_str_in_output)) {
    return e;
  }
  std::optional<int> prompt_logprobs;
  if (auto e = get_int(body, "prompt_logprobs", prompt_logprobs)) return e;
  if (prompt_logprobs) {
    if (*prompt_logprobs < 0) {
      return bad_request("`prompt_logprobs` must be a positive value.", "prompt_logprobs");
    }
    p.prompt_logprobs = prompt_logprobs;
  }
  return std::nullopt;
}

// Which request field a SamplingParams::validate_for_model message is about: its messages start
// with the field name, except the few matched here.
std::string param_of_validation_message(const std::string& message, bool is_chat,
                                        const std::string& max_tokens_field) {
  if (message.starts_with("Requested sample logprobs"))
    return is_chat ? "top_logprobs" : "logprobs";
  if (message.starts_with("Requested prompt logprobs")) return "prompt_logprobs";
  if (message.starts_with("token_id(s)") || message.starts_with("logit_bias")) return "logit_bias";
  const std::string first = message.substr(0, message.find(' '));
  if (first == "max_tokens") return max_tokens_field;
  for (const char* field : {"n", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                            "frequency_penalty", "repetition_penalty", "min_tokens", "logprobs",
                            "prompt_logprobs", "stop", "stop_token_ids"}) {
    if (first == field) return first;
  }
  return {};
}

Error validate_params(const SamplingParams& p, const Limits& limits, bool is_chat,
                      const std::string& max_tokens_field) {
  Status status = p.validate_for_model(limits.vocab_size, limits.max_logprobs);
  if (status.is_ok()) return std::nullopt;
  return bad_request(status.message(),
                     param_of_validation_message(status.message(), is_chat, max_tokens_field));
}

Error read_stream_fields(const Json& body, bool& stream, bool& include_usage,
                         bool& continuous_usage_stats) {
  if (auto e = get_bool(body, "stream", stream)) return e;
  const Json* options = find_field(body, "stream_options");
  if (options == nullptr) return std::nullopt;
  if (!stream) {
    return bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
  }
  if (!options->is_object()) {
    return bad_request(fmt::format("stream_options: Input should be a valid dictionary, got {}",
                                   options->type_name()),
                       "stream_options");
  }
  if (auto e = get_bool(*options, "include_usage", include_usage, "stream_options")) return e;
  return get_bool(*options, "continuous_usage_stats", continuous_usage_stats, "stream_options");
}

Error read_common_fields(const Json& body, std::string& model, int& priority,
                         std::optional<std::string>& request_id) {
  std::optional<std::string> name;
  if (auto e = get_string(body, "model", name)) return e;
  if (name) model = *name;
  if (auto e = get_int(body, "priority", priority)) return e;
  return get_string(body, "request_id", request_id);
}

bool is_known_role(std::string_view role) {
  return role == "system" || role == "developer" || role == "user" || role == "assistant" ||
         role == "tool";
}

bool is_media_part(std::string_view type) {
  return type == "image_url" || type == "input_audio" || type == "audio_url" ||
         type == "video_url" || type == "image" || type == "image_pil" || type == "image_embeds" ||
         type == "input_image" || type == "file" || type == "video" || type == "audio";
}

Error validate_content_parts(const Json& parts, const std::string& param) {
  for (size_t k = 0; k < parts.size(); ++k) {
    const Json& part = parts[k];
    const std::string part_param = fmt::format("{}[{}]", param, k);
    if (!part.is_object()) {
      return bad_request(fmt::format("{}: a content part should be an object, got {}", part_param,
                                     part.type_name()),
                         part_param);
    }
    const Json* type = find_field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return bad_request(fmt::format("{}: a content part needs a string `type`", part_param),
                         part_param + ".type");
    }
    const std::string kind = type->get<std::string>();
    if (kind == "text" || kind == "refusal") {
      const Json* text = find_field(part, kind);
      if (text == nullptr || !text->is_string()) {
        return bad_request(
            fmt::format("{}: a '{}' content part needs a string `{}`", part_param, kind, kind),
            part_param + "." + kind);
      }
    } else if (is_media_part(kind)) {
      return bad_request(fmt::format("{}: content type '{}' is not supported: the served model "
                                     "accepts text only.",
                                     part_param, kind),
                         part_param + ".type");
    } else {
      return bad_request(fmt::format("{}: unknown content part type '{}'", part_param, kind),
                         part_param + ".type");
    }
  }
  return std::nullopt;
}

Error validate_tool_calls(const Json& tool_calls, const std::string& param) {
  if (!tool_calls.is_array()) {
    return bad_request(fmt::format("{}: Input should be a valid list", param), param);
  }
  for (size_t k = 0; k < tool_calls.size(); ++k) {
    const Json& call = tool_calls[k];
    const std::string call_param = fmt::format("{}[{}]", param, k);
    const Json* function = call.is_object() ? find_field(call, "function") : nullptr;
    const Json* name =
        (function != nullptr && function->is_object()) ? find_field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return bad_request(
          fmt::format("{}: a tool call needs a `function` object with a string `name`", call_param),
          call_param);
    }
  }
  return std::nullopt;
}

Error validate_messages(const Json* messages) {
  if (messages == nullptr) return bad_request("`messages` is required.", "messages");
  if (!messages->is_array() || messages->empty()) {
    return bad_request("messages: Input should be a non-empty list of messages", "messages");
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& message = (*messages)[i];
    const std::string param = fmt::format("messages[{}]", i);
    if (!message.is_object()) {
      return bad_request(
          fmt::format("{}: a message should be an object, got {}", param, message.type_name()),
          param);
    }
    const Json* role = find_field(message, "role");
    if (role == nullptr || !role->is_string() || !is_known_role(role->get<std::string>())) {
      return bad_request(fmt::format("{}.role: should be one of 'system', 'developer', 'user', "
                                     "'assistant', 'tool'",
                                     param),
                         param + ".role");
    }
    const bool is_assistant = role->get<std::string>() == "assistant";
    const Json* content = find_field(message, "content");
    const std::string content_param = param + ".content";
    if (content == nullptr) {
      // An assistant turn may carry only tool calls, or be an empty prefill to continue.
      if (!is_assistant) {
        return bad_request(
            fmt::format("{}: a {} message needs content", content_param, role->get<std::string>()),
            content_param);
      }
    } else if (content->is_array()) {
      if (auto e = validate_content_parts(*content, content_param)) return e;
    } else if (!content->is_string()) {
      return bad_request(fmt::format("{}: Input should be a string or a list of content parts, "
                                     "got {}",
                                     content_param, content->type_name()),
                         content_param);
    }
    if (const Json* tool_calls = find_field(message, "tool_calls")) {
      if (auto e = validate_tool_calls(*tool_calls, param + ".tool_calls")) return e;
    }
  }
  return std::nullopt;
}

Error validate_tools(const Json& body) {
  const Json* tools = find_field(body, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) {
    return bad_request(
        fmt::format("tools: Input should be a valid list, got {}", tools->type_name()), "tools");
  }
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& tool = (*tools)[i];
    const std::string param = fmt::format("tools[{}]", i);
    if (!tool.is_object()) {
      return bad_request(fmt::format("{}: a tool should be an object", param), param);
    }
    if (const Json* type = find_field(tool, "type");
        type != nullptr && (!type->is_string() || type->get<std::string>() != "function")) {
      return bad_request(fmt::format("{}.type: only 'function' tools are supported", param),
                         param + ".type");
    }
    const Json* function = find_field(tool, "function");
    const Json* name =
        (function != nullptr && function->is_object()) ? find_field(*function, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return bad_request(
          fmt::format("{}.function: a tool needs a `function` object with a string `name`", param),
          param + ".function");
    }
  }
  return std::nullopt;
}

// "none" and "auto" leave the output free text; "required" and a named function need
// constrained decoding, which locus does not have.
Error validate_tool_choice(const Json& body) {
  const Json* choice = find_field(body, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string mode = choice->get<std::string>();
    if (mode == "none" || mode == "auto") return std::nullopt;
    if (mode == "required") {
      return bad_request("`tool_choice` \"required\" is not supported by this server.",
                         "tool_choice");
    }
  } else if (choice->is_object()) {
    return bad_request("A named function in `tool_choice` is not supported by this server.",
                       "tool_choice");
  }
  return bad_request("tool_choice: should be \"none\", \"auto\", \"required\" or a named function",
                     "tool_choice");
}

// The chat-template fields shared by /v1/chat/completions and /tokenize.
Error read_template_fields(const Json& body, Json& tools, Json& chat_template_kwargs,
                           bool& add_generation_prompt, bool& continue_final_message) {
  if (auto e = validate_tools(body)) return e;
  if (const Json* t = find_field(body, "tools")) tools = *t;
  if (auto e = get_object(body, "chat_template_kwargs", chat_template_kwargs)) return e;
  if (find_field(body, "chat_template") != nullptr) {
    return bad_request(
        "A chat template passed with the request is not accepted; the server "
        "uses the model's template.",
        "chat_template");
  }
  if (auto e = get_bool(body, "add_generation_prompt", add_generation_prompt)) return e;
  if (auto e = get_bool(body, "continue_final_message", continue_final_message)) return e;
  if (add_generation_prompt && continue_final_message) {
    return bad_request(
        "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        "continue_final_message");
  }
  return std::nullopt;
}

Error parse_chat(const Json& body, const Limits& limits, ChatCompletionRequest& r) {
  if (auto e = check_unsupported(body)) return e;
  if (auto e = read_common_fields(body, r.model, r.priority, r.request_id)) return e;
  const Json* messages = find_field(body, "messages");
  if (auto e = validate_messages(messages)) return e;
  r.messages = *messages;
  if (auto e = read_template_fields(body, r.tools, r.chat_template_kwargs, r.add_generation_prompt,
                                    r.continue_final_message)) {
    return e;
  }
  if (auto e = validate_tool_choice(body)) return e;
  if (const Json* choice = find_field(body, "tool_choice")) r.tool_choice = *choice;
  if (auto e = get_bool(body, "echo", r.echo)) return e;
  if (auto e = get_bool(body, "return_tokens_as_token_ids", r.return_tokens_as_token_ids)) {
    return e;
  }
  if (auto e = read_stream_fields(body, r.stream, r.include_usage, r.continuous_usage_stats)) {
    return e;
  }

  SamplingParams& p = r.params;
  if (auto e = read_sampling_fields(body, limits, p)) return e;
  std::optional<int> max_tokens;
  std::optional<int> max_completion_tokens;
  if (auto e = get_int(body, "max_tokens", max_tokens)) return e;
  if (auto e = get_int(body, "max_completion_tokens", max_completion_tokens)) return e;
  std::string max_tokens_field = "max_tokens";
  if (max_completion_tokens) {
    p.max_tokens = max_completion_tokens;
    max_tokens_field = "max_completion_tokens";
  } else if (max_tokens) {
    p.max_tokens = max_tokens;
  }

  bool logprobs = false;
  std::optional<int> top_logprobs;
  if (auto e = get_bool(body, "logprobs", logprobs)) return e;
  if (auto e = get_int(body, "top_logprobs", top_logprobs)) return e;
  if (top_logprobs) {
    if (*top_logprobs < 0) {
      return bad_request("`top_logprobs` must be a positive value.", "top_logprobs");
    }
    // vLLM lets top_logprobs: 0 through without logprobs (it asks for nothing).
    if (*top_logprobs > 0 && !logprobs) {
      return bad_request("when using `top_logprobs`, `logprobs` must be set to true.",
                         "top_logprobs");
    }
  }
  // The defaults never ask for logprobs; the body alone decides.
  p.logprobs = logprobs ? std::optional<int>(top_logprobs.value_or(0)) : std::nullopt;
  if (r.stream && p.prompt_logprobs && *p.prompt_logprobs > 0) {
    return bad_request("`prompt_logprobs` are not available when `stream=True`.",
                       "prompt_logprobs");
  }
  return validate_params(p, limits, /*is_chat=*/true, max_tokens_field);
}

// One element of "prompt" given as token ids.
Error read_token_prompt(const Json& ids, const std::string& param, const Limits& limits,
                        PromptInput& out) {
  if (ids.empty()) {
    return bad_request(fmt::format("{}: a token prompt cannot be empty", param), param);
  }
  out.is_tokens = true;
  out.token_ids.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer()) {
      return bad_request(fmt::format("{}[{}]: Input should be a valid integer, got {}", param, i,
                                     ids[i].type_name()),
                         param);
    }
    const int64_t id = ids[i].is_number_unsigned()
                           ? static_cast<int64_t>(std::min<uint64_t>(
                                 ids[i].get<uint64_t>(),
                                 static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
                           : ids[i].get<int64_t>();
    if (id < 0 || id >= limits.vocab_size) {
      return bad_request(fmt::format("Token id {} is out of vocabulary", id), param);
    }
    out.token_ids.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

Error read_prompts(const Json& body, const Limits& limits, std::vector<PromptInput>& prompts) {
  const Json* prompt = find_field(body, "prompt");
  if (prompt == nullptr) return bad_request("`prompt` is required.", "prompt");
  if (prompt->is_string()) {
    prompts.push_back(PromptInput{false, prompt->get<std::string>(), {}});
    return std::nullopt;
  }
  const char* kForms =
      "prompt: Input should be a string, a list of strings, a list of token ids or a list of lists "
      "of token ids";
  if (!prompt->is_array()) return bad_request(kForms, "prompt");
  if (prompt->empty()) {
    return bad_request("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  }
  const Json& first = (*prompt)[0];
  if (first.is_number_integer()) {
    PromptInput input;
    if (auto e = read_token_prompt(*prompt, "prompt", limits, input)) return e;
    prompts.push_back(std::move(input));
    return std::nullopt;
  }
  for (size_t i = 0; i < prompt->size(); ++i) {
    const Json& item = (*prompt)[i];
    const std::string param = fmt::format("prompt[{}]", i);
    if (first.is_string() && item.is_string()) {
      prompts.push_back(PromptInput{false, item.get<std::string>(), {}});
    } else if (first.is_array() && item.is_array()) {
      PromptInput input;
      if (auto e = read_token_prompt(item, param, limits, input)) return e;
      prompts.push_back(std::move(input));
    } else {
      return bad_request(kForms, "prompt");
    }
  }
  return std::nullopt;
}

Error parse_completion(const Json& body, const Limits& limits, CompletionRequest& r) {
  if (auto e = check_unsupported(body)) return e;
  if (auto e = read_common_fields(body, r.model, r.priority, r.request_id)) return e;
  if (auto e = read_prompts(body, limits, r.prompts)) return e;
  if (const Json* suffix = find_field(body, "suffix")) {
    if (!suffix->is_string() || !suffix->get<std::string>().empty()) {
      return bad_request(not_supported("suffix"), "suffix");
    }
  }
  if (auto e = get_bool(body, "echo", r.echo)) return e;
  if (auto e = get_bool(body, "return_tokens_as_token_ids", r.return_tokens_as_token_ids)) {
    return e;
  }
  if (auto e = get_bool(body, "add_special_tokens", r.add_special_tokens)) return e;
  if (auto e = read_stream_fields(body, r.stream, r.include_usage, r.continuous_usage_stats)) {
    return e;
  }

  SamplingParams& p = r.params;
  if (auto e = read_sampling_fields(body, limits, p)) return e;
  std::optional<int> best_of;
  if (auto e = get_int(body, "best_of", best_of)) return e;
  if (best_of && *best_of != p.n) {
    return bad_request(
        fmt::format("best_of must equal n ({}); best_of > n is not supported by this server, got "
                    "{}.",
                    p.n, *best_of),
        "best_of");
  }
  if (!body.contains("max_tokens")) {
    // Only an absent field gets vLLM's default; null asks for the rest of the context.
    p.max_tokens = p.max_tokens ? std::min(*p.max_tokens, kCompletionDefaultMaxTokens)
                                : kCompletionDefaultMaxTokens;
  } else if (body.at("max_tokens").is_null()) {
    p.max_tokens = std::nullopt;
  } else if (auto e = get_int(body, "max_tokens", p.max_tokens)) {
    return e;
  }
  std::optional<int> logprobs;
  if (auto e = get_int(body, "logprobs", logprobs)) return e;
  if (logprobs && *logprobs < 0) {
    return bad_request("`logprobs` must be a positive value.", "logprobs");
  }
  p.logprobs = logprobs;
  if (r.stream && p.prompt_logprobs && *p.prompt_logprobs > 0) {
    return bad_request("`prompt_logprobs` are not available when `stream=True`.",
                       "prompt_logprobs");
  }
  // echo + logprobs scores the prompt too (vLLM; lm-eval's loglikelihood depends on it).
  if (r.echo && logprobs && !p.prompt_logprobs && !r.stream) p.prompt_logprobs = logprobs;
  return validate_params(p, limits, /*is_chat=*/false, "max_tokens");
}

Error parse_tokenize(const Json& body, TokenizeRequest& r) {
  std::optional<std::string> model;
  if (auto e = get_string(body, "model", model)) return e;
  if (model) r.model = *model;
  const Json* messages = find_field(body, "messages");
  const bool has_prompt = find_field(body, "prompt") != nullptr;
  if (has_prompt == (messages != nullptr)) {
    return bad_request("Exactly one of `prompt` and `messages` must be given.",
                       has_prompt ? "messages" : "prompt");
  }
  if (has_prompt) {
    if (auto e = get_string(body, "prompt", r.prompt)) return e;
    r.add_special_tokens = true;
  } else {
    if (auto e = validate_messages(messages)) return e;
    r.messages = *messages;
    r.add_special_tokens = false;  // the chat template already places the special tokens
    if (auto e = read_template_fields(body, r.tools, r.chat_template_kwargs,
                                      r.add_generation_prompt, r.continue_final_message)) {
      return e;
    }
  }
  if (auto e = get_bool(body, "add_special_tokens", r.add_special_tokens)) return e;
  return get_bool(body, "return_token_strs", r.return_token_strs);
}

Error parse_detokenize(const Json& body, const Limits& limits, DetokenizeRequest& r) {
  std::optional<std::string> model;
  if (auto e = get_string(body, "model", model)) return e;
  if (model) r.model = *model;
  if (find_field(body, "tokens") == nullptr) return bad_request("`tokens` is required.", "tokens");
  if (auto e = get_int32_list(body, "tokens", r.tokens)) return e;
  for (int32_t t : r.tokens) {
    if (t < 0 || t >= limits.vocab_size) {
      return bad_request(fmt::format("Token id {} is out of vocabulary", t), "tokens");
    }
  }
  return std::nullopt;
}

// Runs one parser behind the body checks, turning anything unexpected into a 400 so that no
// exception (e.g. bad_alloc from a huge body) leaves this file.
template <typename Request, typename Parse>
ApiResult<Request> parse_with(std::string_view body, Parse&& parse) {
  try {
    ApiResult<Json> json = parse_body(body);
    if (auto* error = std::get_if<ApiError>(&json)) return std::move(*error);
    Request request;
    if (auto e = parse(std::get<Json>(json), request)) return std::move(*e);
    return request;
  } catch (const std::exception& e) {
    return bad_request(fmt::format("The request body could not be read: {}", e.what()));
  }
}

}  // namespace

ApiResult<ChatCompletionRequest> parse_chat_completion_request(std::string_view body,
                                                               const SamplingParams& defaults,
                                                               const Limits& limits) {
  return parse_with<ChatCompletionRequest>(body, [&](const Json& json, ChatCompletionRequest& r) {
    r.params = defaults;
    return parse_chat(json, limits, r);
  });
}

ApiResult<CompletionRequest> parse_completion_request(std::string_view body,
                                                      const SamplingParams& defaults,
                                                      const Limits& limits) {
  return parse_with<CompletionRequest>(body, [&](const Json& json, CompletionRequest& r) {
    r.params = defaults;
    return parse_completion(json, limits, r);
  });
}

ApiResult<TokenizeRequest> parse_tokenize_request(std::string_view body) {
  return parse_with<TokenizeRequest>(body, parse_tokenize);
}

ApiResult<DetokenizeRequest> parse_detokenize_request(std::string_view body, const Limits& limits) {
  return parse_with<DetokenizeRequest>(body, [&](const Json& json, DetokenizeRequest& r) {
    return parse_detokenize(json, limits, r);
  });
}

std::optional<ApiError> finalize_for_prompt(SamplingParams& params, std::span<const int32_t> prompt,
                                            const Limits& limits) {
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt_len == 0) return bad_request("The decoder prompt cannot be empty", "prompt");
  for (int32_t t : prompt) {
    if (t < 0 || t >= limits.vocab_size) {
      return bad_request(fmt::format("Token id {} is out of vocabulary", t), "prompt");
    }
  }
  if (!params.max_tokens) {
    if (prompt_len >= limits.max_model_len) {
      return bad_request(
          fmt::format("This model's maximum context length is {} tokens. However, you requested "
                      "{} tokens in the messages, Please reduce the length of the messages.",
                      limits.max_model_len, prompt_len),
          "messages");
    }
    params.max_tokens = static_cast<int>(limits.max_model_len - prompt_len);
    return std::nullopt;
  }
  const int64_t max_tokens = *params.max_tokens;
  if (prompt_len + max_tokens > limits.max_model_len) {
    return bad_request(
        fmt::format("This model's maximum context length is {} tokens. However, you requested {} "
                    "tokens ({} in the messages, {} in the completion). Please reduce the length "
                    "of the messages or completion.",
                    limits.max_model_len, prompt_len + max_tokens, prompt_len, max_tokens),
        "messages");
  }
  return std::nullopt;
}

}  // namespace locus::openai
