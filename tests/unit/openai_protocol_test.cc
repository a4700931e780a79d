// The OpenAI wire format, requests: validation (status, message, param as vLLM gives them); the
// response shapes are in openai_responses_test.cc.
#include "server/openai_protocol.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace locus::openai {
namespace {

using nlohmann::json;

Limits test_limits() {
  Limits limits;
  limits.vocab_size = 1000;
  limits.max_model_len = 100;
  limits.max_logprobs = 20;
  limits.max_n = 8;
  return limits;
}

std::string chat_body(const std::string& extra = {}) {
  std::string body = R"({"messages":[{"role":"user","content":"hi"}])";
  if (!extra.empty()) body += "," + extra;
  return body + "}";
}

template <typename T>
T expect_ok(const ApiResult<T>& result, std::string_view body) {
  if (const auto* error = std::get_if<ApiError>(&result)) {
    ADD_FAILURE() << "unexpected error for " << body << ": " << error->message << " (param "
                  << error->param << ")";
    return T{};
  }
  return std::get<T>(result);
}

ChatCompletionRequest chat_ok(const std::string& body, const SamplingParams& defaults = {}) {
  return expect_ok(parse_chat_completion_request(body, defaults, test_limits()), body);
}

CompletionRequest completion_ok(const std::string& body, const SamplingParams& defaults = {}) {
  return expect_ok(parse_completion_request(body, defaults, test_limits()), body);
}

// --- request errors: one table, every case names its status, param and message ---------------

enum class Endpoint { kChat, kCompletion, kTokenize, kDetokenize };

struct ErrorCase {
  Endpoint endpoint;
  std::string body;
  std::string param;    // expected ApiError::param
  std::string message;  // a fragment the message must contain
};

std::optional<ApiError> error_of(const ErrorCase& c) {
  const SamplingParams defaults;
  auto pick = [](const auto& result) -> std::optional<ApiError> {
    if (const auto* e = std::get_if<ApiError>(&result)) return *e;
    return std::nullopt;
  };
  switch (c.endpoint) {
    case Endpoint::kChat:
      return pick(parse_chat_completion_request(c.body, defaults, test_limits()));
    case Endpoint::kCompletion:
      return pick(parse_completion_request(c.body, defaults, test_limits()));
    case Endpoint::kTokenize:
      return pick(parse_tokenize_request(c.body));
    case Endpoint::kDetokenize:
      return pick(parse_detokenize_request(c.body, test_limits()));
  }
  return std::nullopt;
}

class RequestError : public testing::TestWithParam<ErrorCase> {};

TEST_P(RequestError, Is400WithParamAndMessage) {
  const ErrorCase& c = GetParam();
  std::optional<ApiError> error = error_of(c);
  ASSERT_TRUE(error.has_value()) << "accepted: " << c.body;
  EXPECT_EQ(error->status, 400) << c.body;
  EXPECT_EQ(error->param, c.param) << c.body << " -> " << error->message;
  EXPECT_NE(error->message.find(c.message), std::string::npos)
      << c.body << " -> " << error->message << " (wanted '" << c.message << "')";
}

std::string many_stops(int count) {
  std::string list = "[";
  for (int i = 0; i < count; ++i)
    list += (i ? ",\"s" : "\"s") + std::to_string(i) + "\"";
  return list + "]";
}

std::string deep_content(int depth) {
  return R"({"messages":[{"role":"user","content":"x","extra":)" + std::string(depth, '[') +
         std::string(depth, ']') + "}]}";
}

const std::string kTwoPow70 = "1180591620717411303424";

std::vector<ErrorCase> chat_error_cases() {
  const Endpoint k = Endpoint::kChat;
  return {
      // Body level.
      {k, "[1,2]", "", "not valid JSON"},
      {k, "null", "", "not valid JSON"},
      {k, "", "", "not valid JSON"},
      {k, R"({"messages": [)", "", "not valid JSON"},
      {k, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "", "UTF-8"},
      {k, chat_body(R"("max_tokens":1e400)"), "", "not valid JSON"},
      {k, deep_content(300), "", "nested"},
      // Types, named by param.
      {k, chat_body(R"("temperature":"hot")"), "temperature", "valid number"},
      {k, chat_body(R"("temperature":true)"), "temperature", "valid number"},
      {k, chat_body(R"("temperature":1e300)"), "temperature", "out of range"},
      {k, chat_body(R"("temperature":-0.5)"), "temperature", "temperature must be non-negative"},
      {k, chat_body(R"("model":5)"), "model", "valid string"},
      {k, chat_body(R"("stream":"yes")"), "stream", "valid boolean"},
      {k, chat_body(R"("ignore_eos":1)"), "ignore_eos", "valid boolean"},
      {k, chat_body(R"("logprobs":"yes")"), "logprobs", "valid boolean"},
      // max_tokens.
      {k, chat_body(R"("max_tokens":-1)"), "max_tokens", "max_tokens must be at least 1, got -1."},
      {k, chat_body(R"("max_tokens":0)"), "max_tokens", "max_tokens must be at least 1, got 0."},
      {k, chat_body(R"("max_tokens":)" + kTwoPow70), "max_tokens", "out of range"},
      {k, chat_body(R"("max_tokens":2.5)"), "max_tokens", "fractional"},
      {k, chat_body(R"("max_tokens":5,"max_completion_tokens":0)"), "max_completion_tokens",
       "at least 1"},
      {k, chat_body(R"("min_tokens":5,"max_tokens":2)"), "min_tokens",
       "min_tokens must be less than or equal to max_tokens=2"},
      // n and seed.
      {k, chat_body(R"("n":0)"), "n", "n must be at least 1, got 0."},
      {k, chat_body(R"("n":9)"), "n", "n must be at most 8, got 9."},
      {k, chat_body(R"("n":)" + kTwoPow70), "n", "out of range"},
      {k, chat_body(R"("n":1.5)"), "n", "fractional"},
      {k, chat_body(R"("seed":)" + kTwoPow70), "seed", "out of range"},
      {k, chat_body(R"("seed":18446744073709551615)"), "seed", "out of range"},
      {k, chat_body(R"("seed":"1")"), "seed", "valid integer"},
      // Sampling ranges (SamplingParams::validate wording).
      {k, chat_body(R"("top_p":0)"), "top_p", "top_p must be in (0, 1], got 0."},
      {k, chat_body(R"("top_k":-2)"), "top_k", "top_k must be 0 or -1"},
      {k, chat_body(R"("presence_penalty":3)"), "presence_penalty", "[-2, 2]"},
      {k, chat_body(R"("repetition_penalty":0)"), "repetition_penalty", "greater than zero"},
      {k, chat_body(R"("min_p":1.5)"), "min_p", "min_p must be in [0, 1]"},
      // Logprobs.
      {k, chat_body(R"("top_logprobs":3)"), "top_logprobs", "`logprobs` must be set to true"},
      {k, chat_body(R"("logprobs":false,"top_logprobs":2)"), "top_logprobs",
       "`logprobs` must be set to true"},
      {k, chat_body(R"("logprobs":true,"top_logprobs":21)"), "top_logprobs",
       "Requested sample logprobs of 21, which is greater than max allowed: 20"},
      {k, chat_body(R"("logprobs":true,"top_logprobs":-1)"), "top_logprobs", "positive"},
      {k, chat_body(R"("prompt_logprobs":21)"), "prompt_logprobs", "greater than max allowed"},
      {k, chat_body(R"("prompt_logprobs":1,"stream":true)"), "prompt_logprobs", "stream=True"},
      // logit_bias.
      {k, chat_body(R"("logit_bias":{"abc":1})"), "logit_bias", "not a token id"},
      {k, chat_body(R"("logit_bias":{"5":101})"), "logit_bias", "[-100, 100]"},
      {k, chat_body(R"("logit_bias":{"5":"x"})"), "logit_bias", "should be a number"},
      {k, chat_body(R"("logit_bias":{"1000":1,"3":1})"), "logit_bias",
       "token_id(s) 1000 in logit_bias contain out-of-vocab token ids"},
      {k, chat_body(R"("logit_bias":{"99999999999":1})"), "logit_bias", "out of vocabulary"},
      {k, chat_body(R"("logit_bias":[1])"), "logit_bias", "dictionary"},
      // stop.
      {k, chat_body(R"("stop":5)"), "stop", "string or a list of strings"},
      {k, chat_body(R"("stop":["a",3])"), "stop", "stop[1]"},
      {k, chat_body(R"("stop":[""])"), "stop", "stop cannot contain an empty string."},
      {k, chat_body(R"("stop":"")"), "stop", "stop cannot contain an empty string."},
      {k, chat_body(R"("stop":)" + many_stops(65)), "stop", "at most 64"},
      {k, chat_body(R"("stop_token_ids":[1000])"), "stop_token_ids", "out-of-vocab token id 1000"},
      {k, chat_body(R"("stop_token_ids":[-1])"), "stop_token_ids", "out-of-vocab token id -1"},
      {k, chat_body(R"("stop_token_ids":"1")"), "stop_token_ids", "list of integers"},
      // stream_options.
      {k, chat_body(R"("stream_options":{"include_usage":true})"), "stream_options",
       "Stream options can only be defined when `stream=True`."},
      {k, chat_body(R"("stream":false,"stream_options":{"include_usage":true})"), "stream_options",
       "stream=True"},
      {k, chat_body(R"("stream":true,"stream_options":{"include_usage":"yes"})"),
       "stream_options.include_usage", "valid boolean"},
      {k, chat_body(R"("stream":true,"stream_options":5)"), "stream_options", "dictionary"},
      // Unsupported features.
      {k, chat_body(R"("use_beam_search":true)"), "use_beam_search", "not supported"},
      {k, chat_body(R"("response_format":{"type":"json_object"})"), "response_format",
       "not supported"},
      {k, chat_body(R"("guided_json":{"type":"object"})"), "guided_json", "not supported"},
      {k, chat_body(R"("chat_template":"{{ 1 }}")"), "chat_template", "chat template"},
      // Tools and template fields.
      {k,
       chat_body(
           R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required")"),
       "tool_choice", "not supported"},
      {k, chat_body(R"("tool_choice":{"type":"function","function":{"name":"f"}})"), "tool_choice",
       "not supported"},
      {k, chat_body(R"("tool_choice":"sometimes")"), "tool_choice", "tool_choice"},
      {k, chat_body(R"("tools":[{"type":"function"}])"), "tools[0].function", "name"},
      {k, chat_body(R"("tools":[{"type":"retrieval","function":{"name":"f"}}])"), "tools[0].type",
       "function"},
      {k, chat_body(R"("tools":{})"), "tools", "valid list"},
      {k, chat_body(R"("add_generation_prompt":true,"continue_final_message":true)"),
       "continue_final_message", "Cannot set both"},
      {k, chat_body(R"("chat_template_kwargs":[])"), "chat_template_kwargs", "dictionary"},
      // Messages.
      {k, "{}", "messages", "required"},
      {k, R"({"messages":[]})", "messages", "non-empty"},
      {k, R"({"messages":"hi"})", "messages", "non-empty"},
      {k, R"({"messages":[5]})", "messages[0]", "object"},
      {k, R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", "one of"},
      {k, R"({"messages":[{"content":"x"}]})", "messages[0].role", "one of"},
      {k, R"({"messages":[{"role":"user"}]})", "messages[0].content", "needs content"},
      {k, R"({"messages":[{"role":"user","content":null}]})", "messages[0].content",
       "needs content"},
      {k, R"({"messages":[{"role":"user","content":5}]})", "messages[0].content", "string or"},
      {k,
       R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"http://x"}}]}]})",
       "messages[0].content[1].type", "not supported"},
      {k, R"({"messages":[{"role":"user","content":[{"type":"text"}]}]})",
       "messages[0].content[0].text", "string `text`"},
      {k, R"({"messages":[{"role":"user","content":[{"type":"hologram"}]}]})",
       "messages[0].content[0].type", "unknown content part type"},
      {k, R"({"messages":[{"role":"user","content":["a"]}]})", "messages[0].content[0]", "object"},
      {k,
       R"({"messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]})",
       "messages[1].tool_calls[0]", "function"},
  };
}

std::vector<ErrorCase> other_error_cases() {
  const Endpoint k = Endpoint::kCompletion;
  const Endpoint t = Endpoint::kTokenize;
  const Endpoint d = Endpoint::kDetokenize;
  return {
      {k, "{}", "prompt", "required"},
      {k, R"({"prompt":[]})", "prompt", "non-empty"},
      {k, R"({"prompt":[[]]})", "prompt[0]", "cannot be empty"},
      {k, R"({"prompt":[1,1000]})", "prompt", "Token id 1000 is out of vocabulary"},
      {k, R"({"prompt":[-1]})", "prompt", "Token id -1 is out of vocabulary"},
      {k, R"({"prompt":[1,"a"]})", "prompt", "valid integer"},
      {k, R"({"prompt":["a",[1]]})", "prompt", "list of strings"},
      {k, R"({"prompt":[[1],[2.5]]})", "prompt[1]", "valid integer"},
      {k, R"({"prompt":5})", "prompt", "Input should be a string"},
      {k, R"({"prompt":"x","suffix":"y"})", "suffix", "not supported"},
      {k, R"({"prompt":"x","best_of":2})", "best_of", "best_of must equal n"},
      {k, R"({"prompt":"x","logprobs":21})", "logprobs",
       "Requested sample logprobs of 21, which is greater than max allowed: 20"},
      {k, R"({"prompt":"x","logprobs":-1})", "logprobs", "positive"},
      {k, R"({"prompt":"x","logprobs":true})", "logprobs", "valid integer"},
      {k, R"({"prompt":"x","max_tokens":-1})", "max_tokens", "at least 1"},
      {k, R"({"prompt":"x","echo":"no"})", "echo", "valid boolean"},
      {k, R"({"prompt":"x","return_tokens_as_token_ids":1})", "return_tokens_as_token_ids",
       "valid boolean"},
      {k, R"({"prompt":"x","stream_options":{}})", "stream_options", "stream=True"},
      {k, R"({"prompt":"x","n":2,"best_of":1})", "best_of", "best_of must equal n"},
      {t, R"({"prompt":"x","messages":[{"role":"user","content":"a"}]})", "messages",
       "Exactly one"},
      {t, R"({"model":"m"})", "prompt", "Exactly one"},
      {t, R"({"prompt":5})", "prompt", "valid string"},
      {t, R"({"messages":[{"role":"nobody","content":"a"}]})", "messages[0].role", "one of"},
      {t, "[]", "", "not valid JSON"},
      {d, R"({"tokens":[1,1000]})", "tokens", "Token id 1000 is out of vocabulary"},
      {d, R"({"tokens":"1 2"})", "tokens", "list of integers"},
      {d, R"({})", "tokens", "required"},
  };
}

INSTANTIATE_TEST_SUITE_P(Chat, RequestError, testing::ValuesIn(chat_error_cases()));
INSTANTIATE_TEST_SUITE_P(Others, RequestError, testing::ValuesIn(other_error_cases()));

// --- valid chat requests ------------------------------------------------------------------------

TEST(ChatRequest, MinimalBodyKeepsDefaults) {
  ChatCompletionRequest r = chat_ok(chat_body());
  EXPECT_EQ(r.model, "");
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_FALSE(r.params.max_tokens.has_value());
  EXPECT_FALSE(r.params.logprobs.has_value());
  EXPECT_EQ(r.params.n, 1);
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_TRUE(r.chat_template_kwargs.is_object());
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0]["content"], "hi");
}

TEST(ChatRequest, GenerationConfigDefaultsApplyUnlessTheBodySetsThem) {
  SamplingParams defaults;
  defaults.temperature = 0.6f;
  defaults.top_p = 0.95f;
  defaults.top_k = 20;
  ChatCompletionRequest plain = chat_ok(chat_body(), defaults);
  EXPECT_FLOAT_EQ(plain.params.temperature, 0.6f);
  EXPECT_FLOAT_EQ(plain.params.top_p, 0.95f);
  EXPECT_EQ(plain.params.top_k, 20);

  ChatCompletionRequest set = chat_ok(chat_body(R"("temperature":0.2,"top_k":-1)"), defaults);
  EXPECT_FLOAT_EQ(set.params.temperature, 0.2f);
  EXPECT_EQ(set.params.top_k, -1);
  EXPECT_FLOAT_EQ(set.params.top_p, 0.95f);

  // null means unset, as with pydantic's Optional fields.
  ChatCompletionRequest null_temp = chat_ok(chat_body(R"("temperature":null)"), defaults);
  EXPECT_FLOAT_EQ(null_temp.params.temperature, 0.6f);
}

TEST(ChatRequest, ReadsEverySamplingField) {
  ChatCompletionRequest r = chat_ok(chat_body(
      R"("model":"qwen","n":2.0,"temperature":0,"top_p":0.5,"top_k":7,"min_p":0.1,"seed":-1,)"
      R"("presence_penalty":0.5,"frequency_penalty":-0.5,"repetition_penalty":1.1,)"
      R"("logit_bias":{"5":2.5,"7":-100},"stop":"END","stop_token_ids":[3,4],"min_tokens":2,)"
      R"("ignore_eos":true,"skip_special_tokens":false,"spaces_between_special_tokens":false,)"
      R"("include_stop_str_in_output":true,"prompt_logprobs":2,"max_tokens":30,"priority":-3,)"
      R"("request_id":"abc","user":"ignored","echo":true,"return_tokens_as_token_ids":true)"));
  const SamplingParams& p = r.params;
  EXPECT_EQ(r.model, "qwen");
  EXPECT_EQ(p.n, 2);
  EXPECT_TRUE(p.is_greedy());
  EXPECT_FLOAT_EQ(p.top_p, 0.5f);
  EXPECT_EQ(p.top_k, 7);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  ASSERT_TRUE(p.seed.has_value());
  EXPECT_EQ(*p.seed, std::numeric_limits<uint64_t>::max());  // -1, two's complement
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_FLOAT_EQ(p.logit_bias.at(5), 2.5f);
  EXPECT_FLOAT_EQ(p.logit_bias.at(7), -100.0f);
  EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(p.min_tokens, 2);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_FALSE(p.skip_special_tokens);
  EXPECT_FALSE(p.spaces_between_special_tokens);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.prompt_logprobs, 2);
  EXPECT_EQ(p.max_tokens, 30);
  EXPECT_EQ(r.priority, -3);
  EXPECT_EQ(r.request_id, "abc");
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.return_tokens_as_token_ids);
}

TEST(ChatRequest, SeedKeepsTheFullInt64Range) {
  EXPECT_EQ(chat_ok(chat_body(R"("seed":9223372036854775807)")).params.seed,
            uint64_t{9223372036854775807u});
  EXPECT_EQ(chat_ok(chat_body(R"("seed":-9223372036854775808)")).params.seed, uint64_t{1} << 63);
  EXPECT_EQ(chat_ok(chat_body(R"("seed":0)")).params.seed, uint64_t{0});
}

TEST(ChatRequest, MaxCompletionTokensWinsOverMaxTokens) {
  EXPECT_EQ(chat_ok(chat_body(R"("max_tokens":5,"max_completion_tokens":7)")).params.max_tokens, 7);
  EXPECT_EQ(chat_ok(chat_body(R"("max_tokens":5)")).params.max_tokens, 5);
  EXPECT_EQ(chat_ok(chat_body(R"("max_completion_tokens":9)")).params.max_tokens, 9);
}

TEST(ChatRequest, LogprobsAndTopLogprobs) {
  EXPECT_EQ(chat_ok(chat_body(R"("logprobs":true)")).params.logprobs, 0);
  EXPECT_EQ(chat_ok(chat_body(R"("logprobs":true,"top_logprobs":5)")).params.logprobs, 5);
  EXPECT_EQ(chat_ok(chat_body(R"("logprobs":true,"top_logprobs":20)")).params.logprobs, 20);
  EXPECT_FALSE(chat_ok(chat_body(R"("logprobs":false)")).params.logprobs.has_value());
  EXPECT_FALSE(chat_ok(chat_body(R"("top_logprobs":null)")).params.logprobs.has_value());
  // top_logprobs: 0 asks for nothing, so vLLM lets it through without logprobs.
  EXPECT_FALSE(chat_ok(chat_body(R"("top_logprobs":0)")).params.logprobs.has_value());
}

TEST(ChatRequest, StopAsListAndStreamOptions) {
  ChatCompletionRequest r = chat_ok(chat_body(
      R"("stop":["a","bc"],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true})"));
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.continuous_usage_stats);
  // null stream_options with stream=false is "unset", not an error.
  ChatCompletionRequest plain = chat_ok(chat_body(R"("stream_options":null)"));
  EXPECT_FALSE(plain.include_usage);
}

TEST(ChatRequest, MessagesPassThroughUnchanged) {
  const std::string body =
      R"({"messages":[{"role":"system","content":"be brief","zeta":1,"alpha":2},)"
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function",)"
      R"("function":{"name":"f","arguments":"{\"x\":1}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"42"},)"
      R"({"role":"developer","content":"d"},{"role":"tool","content":"no id is fine"}],)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto",)"
      R"("chat_template_kwargs":{"enable_thinking":false}})";
  ChatCompletionRequest r = chat_ok(body);
  const nlohmann::ordered_json expected = nlohmann::ordered_json::parse(body);
  EXPECT_EQ(r.messages.dump(), expected["messages"].dump());  // order and content as given
  EXPECT_TRUE(r.messages[1]["content"].is_array());
  EXPECT_EQ(r.tools.dump(), expected["tools"].dump());
  EXPECT_EQ(r.tool_choice, "auto");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
}

TEST(ChatRequest, AssistantPrefillWithContinueFinalMessage) {
  ChatCompletionRequest r = chat_ok(
      R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}],)"
      R"("add_generation_prompt":false,"continue_final_message":true})");
  EXPECT_FALSE(r.add_generation_prompt);
  EXPECT_TRUE(r.continue_final_message);
  chat_ok(R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant"}]})");
}

TEST(ChatRequest, InvalidUtf8ErrorMessageIsItselfValidUtf8) {
  auto result = parse_chat_completion_request(
      "{\"messages\":[{\"role\":\"user\",\"content\":\"ab\xff\xc3\"}]}", {}, test_limits());
  ASSERT_TRUE(std::holds_alternative<ApiError>(result));
  const std::string& message = std::get<ApiError>(result).message;
  EXPECT_NE(message.find("UTF-8"), std::string::npos) << message;
  // A strict dump throws on invalid UTF-8; the message must survive one.
  EXPECT_NO_THROW((void)json(message).dump());
}

TEST(ChatRequest, NestingUpToTheLimitIsAccepted) {
  chat_ok(deep_content(100));
}

TEST(ChatRequest, ParseNeverThrowsOnGarbage) {
  const std::vector<std::string> bodies = {
      std::string("\0\0\0", 3), "{\"messages\":",
      "{\"a\":\"\\ud800\"}",    "1e999999",
      std::string(10000, '['),  "{\"messages\":[{\"role\":\"user\",\"content\":\"\\u0000\"}]}"};
  for (const std::string& body : bodies) {
    auto result = parse_chat_completion_request(body, {}, test_limits());
    if (body.find("\\u0000") != std::string::npos) {
      EXPECT_TRUE(std::holds_alternative<ChatCompletionRequest>(result));
    } else {
      ASSERT_TRUE(std::holds_alternative<ApiError>(result)) << body.substr(0, 40);
      EXPECT_EQ(std::get<ApiError>(result).status, 400);
    }
  }
}

// --- valid completion requests -------------------------------------------------------------------

TEST(CompletionRequestParse, PromptForms) {
  CompletionRequest text = completion_ok(R"({"prompt":"hello"})");
  ASSERT_EQ(text.prompts.size(), 1u);
  EXPECT_FALSE(text.prompts[0].is_tokens);
  EXPECT_EQ(text.prompts[0].text, "hello");

  CompletionRequest texts = completion_ok(R"({"prompt":["a","b",""]})");
  ASSERT_EQ(texts.prompts.size(), 3u);
  EXPECT_EQ(texts.prompts[1].text, "b");
  EXPECT_EQ(texts.prompts[2].text, "");

  CompletionRequest ids = completion_ok(R"({"prompt":[1,2,999]})");
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_tokens);
  EXPECT_EQ(ids.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 999}));

  CompletionRequest batches = completion_ok(R"({"prompt":[[1],[0,5]]})");
  ASSERT_EQ(batches.prompts.size(), 2u);
  EXPECT_TRUE(batches.prompts[1].is_tokens);
  EXPECT_EQ(batches.prompts[1].token_ids, (std::vector<int32_t>{0, 5}));

  EXPECT_EQ(completion_ok(R"({"prompt":""})").prompts[0].text, "");
}

TEST(CompletionRequestParse, MaxTokensDefaultsTo16OnlyWhenAbsent) {
  EXPECT_EQ(completion_ok(R"({"prompt":"x"})").params.max_tokens, 16);
  EXPECT_FALSE(completion_ok(R"({"prompt":"x","max_tokens":null})").params.max_tokens.has_value());
  EXPECT_EQ(completion_ok(R"({"prompt":"x","max_tokens":50})").params.max_tokens, 50);
  SamplingParams defaults;
  defaults.max_tokens = 8;
  EXPECT_EQ(completion_ok(R"({"prompt":"x"})", defaults).params.max_tokens, 8);
}

TEST(CompletionRequestParse, FieldsAndDefaults) {
  SamplingParams defaults;
  defaults.temperature = 0.6f;
  CompletionRequest r = completion_ok(
      R"({"model":"m","prompt":"x","logprobs":3,"echo":true,"add_special_tokens":false,)"
      R"("return_tokens_as_token_ids":true,)"
      R"("n":2,"best_of":2,"suffix":"","stream":true,"stream_options":{"include_usage":true}})",
      defaults);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.return_tokens_as_token_ids);
  EXPECT_FALSE(r.add_special_tokens);
  EXPECT_EQ(r.params.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.continuous_usage_stats);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.6f);
  EXPECT_EQ(completion_ok(R"({"prompt":"x","logprobs":0})").params.logprobs, 0);
  EXPECT_FALSE(completion_ok(R"({"prompt":"x","logprobs":0})").params.prompt_logprobs.has_value());
  EXPECT_FALSE(completion_ok(R"({"prompt":"x"})").params.logprobs.has_value());
}

TEST(CompletionRequestParse, EchoWithLogprobsScoresThePrompt) {
  CompletionRequest r = completion_ok(R"({"prompt":"x","echo":true,"logprobs":1,"max_tokens":1})");
  EXPECT_EQ(r.params.logprobs, 1);
  EXPECT_EQ(r.params.prompt_logprobs, 1);
  // An explicit prompt_logprobs wins; streaming cannot carry prompt logprobs.
  EXPECT_EQ(completion_ok(R"({"prompt":"x","echo":true,"logprobs":1,"prompt_logprobs":3})")
                .params.prompt_logprobs,
            3);
  EXPECT_FALSE(completion_ok(R"({"prompt":"x","echo":true,"logprobs":1,"stream":true})")
                   .params.prompt_logprobs.has_value());
  EXPECT_FALSE(completion_ok(R"({"prompt":"x","logprobs":1})").params.prompt_logprobs.has_value());
}

// --- tokenize / detokenize
// ------------------------------------------------------------------------

TEST(TokenizeRequestParse, PromptAndMessagesDefaults) {
  auto prompt = expect_ok(parse_tokenize_request(R"({"model":"m","prompt":"hi"})"), "prompt");
  EXPECT_EQ(prompt.prompt, "hi");
  EXPECT_TRUE(prompt.add_special_tokens);
  EXPECT_FALSE(prompt.messages.has_value());

  auto chat = expect_ok(
      parse_tokenize_request(
          R"({"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false,"return_token_strs":true})"),
      "messages");
  ASSERT_TRUE(chat.messages.has_value());
  EXPECT_FALSE(chat.add_special_tokens);
  EXPECT_FALSE(chat.add_generation_prompt);
  EXPECT_TRUE(chat.return_token_strs);

  auto forced =
      expect_ok(parse_tokenize_request(
                    R"({"messages":[{"role":"user","content":"hi"}],"add_special_tokens":true})"),
                "forced");
  EXPECT_TRUE(forced.add_special_tokens);
}

TEST(DetokenizeRequestParse, ReadsTokens) {
  auto r = expect_ok(parse_detokenize_request(R"({"tokens":[0,5,999]})", test_limits()), "tokens");
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{0, 5, 999}));
  auto empty = expect_ok(parse_detokenize_request(R"({"tokens":[]})", test_limits()), "empty");
  EXPECT_TRUE(empty.tokens.empty());
}

// --- finalize_for_prompt -----------------------------------------------------------------------

TEST(FinalizeForPrompt, FillsMaxTokensWithTheRestOfTheContext) {
  SamplingParams p;
  std::vector<int32_t> prompt(30, 1);
  EXPECT_FALSE(finalize_for_prompt(p, prompt, test_limits()).has_value());
  EXPECT_EQ(p.max_tokens, 70);
}

TEST(FinalizeForPrompt, RequestedLengthThatExactlyFitsIsAccepted) {
  SamplingParams p;
  p.max_tokens = 40;
  std::vector<int32_t> prompt(60, 1);
  EXPECT_FALSE(finalize_for_prompt(p, prompt, test_limits()).has_value());
  EXPECT_EQ(p.max_tokens, 40);
}

TEST(FinalizeForPrompt, TooLongForTheContextUsesVllmWording) {
  SamplingParams p;
  p.max_tokens = 50;
  std::vector<int32_t> prompt(60, 1);
  std::optional<ApiError> e = finalize_for_prompt(p, prompt, test_limits());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
  EXPECT_EQ(e->message,
            "This model's maximum context length is 100 tokens. However, you requested 110 tokens "
            "(60 in the messages, 50 in the completion). Please reduce the length of the messages "
            "or completion.");

  SamplingParams unset;
  std::vector<int32_t> full(100, 1);
  e = finalize_for_prompt(unset, full, test_limits());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message,
            "This model's maximum context length is 100 tokens. However, you requested 100 tokens "
            "in the messages, Please reduce the length of the messages.");
  EXPECT_FALSE(unset.max_tokens.has_value());
}

TEST(FinalizeForPrompt, RejectsOutOfVocabAndEmptyPrompts) {
  SamplingParams p;
  std::vector<int32_t> prompt = {1, 1000};
  std::optional<ApiError> e = finalize_for_prompt(p, prompt, test_limits());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "Token id 1000 is out of vocabulary");
  e = finalize_for_prompt(p, std::span<const int32_t>{}, test_limits());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->status, 400);
}

}  // namespace
}  // namespace locus::openai
