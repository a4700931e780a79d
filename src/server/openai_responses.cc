// Engine results -> OpenAI response bodies and Server-Sent Events. Token text may end inside a
// UTF-8 character, so every dump replaces invalid bytes instead of throwing.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "server/http_server.h"
#include "server/openai_protocol.h"

namespace locus::openai {
namespace {

// Response bodies keep OpenAI's field order (id, object, created, model, choices, usage), which
// is what people reading curl output expect; the nested helpers return nlohmann::json.
using Body = nlohmann::ordered_json;
using nlohmann::json;

std::string dump(const Body& body) {
  return body.dump(-1, ' ', /*ensure_ascii=*/false, json::error_handler_t::replace);
}

std::string sse_event(const Body& body) {
  return "data: " + dump(body) + "\n\n";
}

// -inf (a token the model rules out) is not JSON; vLLM and OpenAI report -9999.0 instead.
double json_logprob(float logprob) {
  if (std::isnan(logprob) || logprob < -9999.0f) return -9999.0;
  return static_cast<double>(logprob);
}

std::string token_text(const TokenText& text, int32_t token_id) {
  return text ? text(token_id) : std::to_string(token_id);
}

json utf8_bytes(const std::string& s) {
  json bytes = json::array();
  for (unsigned char c : s)
    bytes.push_back(static_cast<int>(c));
  return bytes;
}

json chat_token_json(const TokenLogprob& token, const TokenText& text) {
  const std::string s = token_text(text, token.token_id);
  return json{{"token", s}, {"logprob", json_logprob(token.logprob)}, {"bytes", utf8_bytes(s)}};
}

// vLLM's prompt_logprobs: one entry per prompt token, null for the first (nothing predicts it),
// else {"<id>": {"logprob", "rank", "decoded_token"}} for the actual token and the top ones.
// The engine reports positions 1..P-1, hence the leading null.
Body prompt_logprobs_json(std::span<const Logprobs> prompt_logprobs, const TokenText& text) {
  if (prompt_logprobs.empty()) return nullptr;
  Body out = Body::array();
  out.push_back(nullptr);
  for (const Logprobs& position : prompt_logprobs) {
    Body entry = Body::object();
    auto add = [&](const TokenLogprob& t) {
      const std::string key = std::to_string(t.token_id);
      if (entry.contains(key)) return;
      entry[key] = Body{{"logprob", json_logprob(t.logprob)},
                        {"rank", t.rank},
                        {"decoded_token", token_text(text, t.token_id)}};
    };
    add(position.token);
    for (const TokenLogprob& t : position.top)
      add(t);
    out.push_back(std::move(entry));
  }
  return out;
}

// The legacy completions logprobs, built one token at a time so that echoed prompt tokens and
// generated tokens share one list.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(size_t first_offset) : offset_(first_offset) {}

  void add(const Logprobs& position, const TokenText& text) {
    const std::string s = token_text(text, position.token.token_id);
    // Like vLLM (and OpenAI's spec): the sampled token plus the top k, so logprobs=0 still
    // shows the sampled token. Two ids with the same text keep the first (more likely) one.
    json top = json::object();
    top.emplace(s, json_logprob(position.token.logprob));
    for (const TokenLogprob& t : position.top) {
      top.emplace(token_text(text, t.token_id), json_logprob(t.logprob));
    }
    append(s, json_logprob(position.token.logprob), std::move(top));
  }
  // A token nothing predicts (the first prompt token): null logprob and null top_logprobs.
  void add_unscored(int32_t token_id, const TokenText& text) {
    append(token_text(text, token_id), nullptr, nullptr);
  }

  json to_json() && {
    return json{{"tokens", std::move(tokens_)},
                {"token_logprobs", std::move(token_logprobs_)},
                {"top_logprobs", std::move(top_logprobs_)},
                {"text_offset", std::move(text_offset_)}};
  }

 private:
  void append(const std::string& s, json logprob, json top) {
    tokens_.push_back(s);
    token_logprobs_.push_back(std::move(logprob));
    top_logprobs_.push_back(std::move(top));
    text_offset_.push_back(offset_);
    offset_ += s.size();
  }

  size_t offset_;
  json tokens_ = json::array();
  json token_logprobs_ = json::array();
  json top_logprobs_ = json::array();
  json text_offset_ = json::array();
};

Body header_fields(const ResponseHeader& header, std::string_view object) {
  return Body{
      {"id", header.id}, {"object", object}, {"created", header.created}, {"model", header.model}};
}

}  // namespace

json usage_json(const Usage& usage) {
  json out{{"prompt_tokens", usage.prompt_tokens},
           {"completion_tokens", usage.completion_tokens},
           {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
  if (usage.cached_tokens > 0) {
    out["prompt_tokens_details"] = json{{"cached_tokens", usage.cached_tokens}};
  }
  return out;
}

json finish_reason_json(const std::optional<FinishReason>& reason) {
  if (!reason) return nullptr;
  return std::string(finish_reason_name(*reason));
}

json stop_reason_json(const StopReason& reason) {
  if (const auto* id = std::get_if<int32_t>(&reason)) return *id;
  if (const auto* s = std::get_if<std::string>(&reason)) return *s;
  return nullptr;
}

json chat_logprobs_json(std::span<const Logprobs> logprobs, const TokenText& text) {
  json content = json::array();
  for (const Logprobs& position : logprobs) {
    json entry = chat_token_json(position.token, text);
    json top = json::array();
    for (const TokenLogprob& t : position.top)
      top.push_back(chat_token_json(t, text));
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return json{{"content", std::move(content)}};
}

json completion_logprobs_json(std::span<const Logprobs> logprobs, const TokenText& text,
                              size_t first_offset) {
  CompletionLogprobs out(first_offset);
  for (const Logprobs& position : logprobs)
    out.add(position, text);
  return std::move(out).to_json();
}

std::string chat_completion_response(const ResponseHeader& header, const RequestResult& result,
                                     const Usage& usage, const TokenText& text,
                                     bool want_logprobs) {
  Body choices = Body::array();
  for (const CompletionResult& c : result.completions) {
    Body message{{"role", "assistant"}, {"content", c.text}, {"tool_calls", Body::array()}};
    Body choice{{"index", c.index}, {"message", std::move(message)}};
    choice["logprobs"] = want_logprobs ? Body(chat_logprobs_json(c.logprobs, text)) : Body();
    choice["finish_reason"] = finish_reason_json(c.finish_reason);
    choice["stop_reason"] = stop_reason_json(c.stop_reason);
    choices.push_back(std::move(choice));
  }
  Body body = header_fields(header, "chat.completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(usage);
  body["prompt_logprobs"] = prompt_logprobs_json(result.prompt_logprobs, text);
  return dump(body);
}

std::string completion_response(const ResponseHeader& header,
                                std::span<const RequestResult> results,
                                std::span<const std::string> echo_prefixes, int n,
                                const Usage& usage, const TokenText& text, bool want_logprobs,
                                std::span<const std::vector<int32_t>> prompt_token_ids) {
  Body choices = Body::array();
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string empty;
    const std::string& prefix = i < echo_prefixes.size() ? echo_prefixes[i] : empty;
    const Body prompt_logprobs = prompt_logprobs_json(results[i].prompt_logprobs, text);
    for (const CompletionResult& c : results[i].completions) {
      Body choice{{"index", static_cast<int64_t>(i) * n + c.index}, {"text", prefix + c.text}};
      if (want_logprobs) {
        const bool scores_prompt =
            i < echo_prefixes.size() && i < prompt_token_ids.size() && !prompt_token_ids[i].empty();
        CompletionLogprobs logprobs(scores_prompt ? 0 : prefix.size());
        if (scores_prompt) {
          const std::vector<int32_t>& ids = prompt_token_ids[i];
          logprobs.add_unscored(ids[0], text);
          // prompt_logprobs[k] scores ids[k + 1]; without them the tokens are still listed.
          for (size_t k = 1; k < ids.size(); ++k) {
            if (k - 1 < results[i].prompt_logprobs.size()) {
              logprobs.add(results[i].prompt_logprobs[k - 1], text);
            } else {
              logprobs.add_unscored(ids[k], text);
            }
          }
        }
        for (const Logprobs& position : c.logprobs)
          logprobs.add(position, text);
        choice["logprobs"] = Body(std::move(logprobs).to_json());
      } else {
        choice["logprobs"] = nullptr;
      }
      choice["finish_reason"] = finish_reason_json(c.finish_reason);
      choice["stop_reason"] = stop_reason_json(c.stop_reason);
      choice["prompt_logprobs"] = prompt_logprobs;
      choices.push_back(std::move(choice));
    }
  }
  Body body = header_fields(header, "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage_json(usage);
  return dump(body);
}

std::string chat_completion_chunk(const ResponseHeader& header, const ChoiceDelta& delta,
                                  const TokenText& text, bool want_logprobs,
                                  const std::optional<Usage>& usage) {
  Body delta_json = Body::object();
  if (delta.first) {
    delta_json["role"] = "assistant";
    delta_json["content"] = delta.text;
  } else if (!delta.text.empty() || !delta.finish_reason) {
    delta_json["content"] = delta.text;
  }
  Body choice{{"index", delta.index}, {"delta", std::move(delta_json)}};
  choice["logprobs"] = want_logprobs ? Body(chat_logprobs_json(delta.logprobs, text)) : Body();
  choice["finish_reason"] = finish_reason_json(delta.finish_reason);
  choice["stop_reason"] = stop_reason_json(delta.stop_reason);
  Body body = header_fields(header, "chat.completion.chunk");
  body["choices"] = Body::array({std::move(choice)});
  if (usage) body["usage"] = usage_json(*usage);
  return sse_event(body);
}

std::string completion_chunk(const ResponseHeader& header, const ChoiceDelta& delta,
                             const TokenText& text, bool want_logprobs,
                             const std::optional<Usage>& usage) {
  Body choice{{"index", delta.index}, {"text", delta.text}};
  choice["logprobs"] = want_logprobs
                           ? Body(completion_logprobs_json(delta.logprobs, text, delta.text_offset))
                           : Body();
  choice["finish_reason"] = finish_reason_json(delta.finish_reason);
  choice["stop_reason"] = stop_reason_json(delta.stop_reason);
  Body body = header_fields(header, "text_completion");
  body["choices"] = Body::array({std::move(choice)});
  if (usage) body["usage"] = usage_json(*usage);
  return sse_event(body);
}

std::string usage_chunk(const ResponseHeader& header, std::string_view object, const Usage& usage) {
  Body body = header_fields(header, object);
  body["choices"] = Body::array();
  body["usage"] = usage_json(usage);
  return sse_event(body);
}

std::string error_chunk(const ApiError& error) {
  // The same error object as a non-streamed error response, as one SSE event.
  return "data: " +
         http::error_body(error.status, error.message, http::error_type_for_status(error.status),
                          error.param) +
         "\n\n";
}

}  // namespace locus::openai
