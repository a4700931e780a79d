// The OpenAI wire format, responses: the exact JSON shapes of every response body and SSE event
// (requests are in openai_protocol_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "server/openai_protocol.h"

namespace locus::openai {
namespace {

using nlohmann::json;

std::string fake_text(int32_t id) {
  if (id == 1) return "\xc3\xa9";  // "é": two UTF-8 bytes
  if (id == 2) return "\xe2\x82";  // half a character, as a byte-level token can be
  return "t" + std::to_string(id);
}

const ResponseHeader kHeader{"chatcmpl-1", 1700000000, "qwen"};

Logprobs make_logprobs(int32_t token, float lp, std::vector<TokenLogprob> top = {}) {
  Logprobs l;
  l.token = TokenLogprob{token, lp, 1};
  l.top = std::move(top);
  return l;
}

// Strips the SSE framing, checking it: one "data: " line ended by a blank line.
json parse_event(const std::string& event) {
  EXPECT_TRUE(event.starts_with("data: ")) << event;
  EXPECT_TRUE(event.ends_with("\n\n")) << event;
  const std::string payload = event.substr(6, event.size() - 8);
  EXPECT_EQ(payload.find('\n'), std::string::npos) << event;
  return json::parse(payload);
}

TEST(Responses, UsageAndReasons) {
  json u = usage_json({10, 5, 0});
  EXPECT_EQ(u, json::parse(R"({"prompt_tokens":10,"completion_tokens":5,"total_tokens":15})"));
  json cached = usage_json({10, 5, 4});
  EXPECT_EQ(cached["prompt_tokens_details"]["cached_tokens"], 4);

  EXPECT_TRUE(finish_reason_json(std::nullopt).is_null());
  EXPECT_EQ(finish_reason_json(FinishReason::kStop), "stop");
  EXPECT_EQ(finish_reason_json(FinishReason::kLength), "length");
  EXPECT_EQ(finish_reason_json(FinishReason::kAbort), "abort");
  EXPECT_TRUE(stop_reason_json(StopReason{}).is_null());
  EXPECT_EQ(stop_reason_json(StopReason{int32_t{151645}}), 151645);
  EXPECT_EQ(stop_reason_json(StopReason{std::string("END")}), "END");
}

TEST(Responses, ChatLogprobsHaveBytesAndClampNegativeInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Logprobs> lps = {
      make_logprobs(1, -0.25f, {{1, -0.25f, 1}, {7, -2.0f, 2}}),
      make_logprobs(3, -inf, {}),
  };
  json j = chat_logprobs_json(lps, fake_text);
  ASSERT_EQ(j["content"].size(), 2u);
  const json& first = j["content"][0];
  EXPECT_EQ(first["token"], "\xc3\xa9");
  EXPECT_DOUBLE_EQ(first["logprob"].get<double>(), -0.25);
  EXPECT_EQ(first["bytes"], json::parse("[195,169]"));
  ASSERT_EQ(first["top_logprobs"].size(), 2u);
  EXPECT_EQ(first["top_logprobs"][1]["token"], "t7");
  EXPECT_EQ(first["top_logprobs"][1]["bytes"], json::parse("[116,55]"));
  EXPECT_DOUBLE_EQ(first["top_logprobs"][1]["logprob"].get<double>(), -2.0);
  EXPECT_DOUBLE_EQ(j["content"][1]["logprob"].get<double>(), -9999.0);
  EXPECT_TRUE(j["content"][1]["top_logprobs"].empty());
}

TEST(Responses, CompletionLogprobsOffsetsAndTopMaps) {
  std::vector<Logprobs> lps = {
      make_logprobs(5, -0.5f, {{6, -0.1f, 1}, {5, -0.5f, 2}}),
      make_logprobs(1, -1.0f),
  };
  json j = completion_logprobs_json(lps, fake_text, 10);
  EXPECT_EQ(j["tokens"], json::parse(R"(["t5","\u00e9"])"));
  EXPECT_EQ(j["token_logprobs"], json::parse("[-0.5,-1.0]"));
  EXPECT_EQ(j["text_offset"], json::parse("[10,12]"));  // "t5" is 2 bytes
  ASSERT_EQ(j["top_logprobs"].size(), 2u);
  EXPECT_EQ(j["top_logprobs"][0].size(), 2u);  // sampled t5 + t6, t5 not repeated
  EXPECT_DOUBLE_EQ(j["top_logprobs"][0]["t6"].get<double>(), -0.1f);
  // logprobs=0: the sampled token alone, as vLLM reports it.
  EXPECT_EQ(j["top_logprobs"][1].size(), 1u);
  EXPECT_DOUBLE_EQ(j["top_logprobs"][1]["\xc3\xa9"].get<double>(), -1.0);
}

RequestResult two_completions() {
  RequestResult result;
  CompletionResult a;
  a.index = 0;
  a.text = "Hello";
  a.logprobs = {make_logprobs(4, -0.1f)};
  a.finish_reason = FinishReason::kStop;
  a.stop_reason = int32_t{42};
  CompletionResult b;
  b.index = 1;
  b.text = "cut \xe2\x82";  // ends inside a character
  b.finish_reason = FinishReason::kLength;
  result.completions = {a, b};
  return result;
}

TEST(Responses, ChatCompletionBody) {
  const std::string body = chat_completion_response(kHeader, two_completions(), {7, 3, 2},
                                                    fake_text, /*want_logprobs=*/false);
  json j = json::parse(body);
  EXPECT_EQ(j["id"], "chatcmpl-1");
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["created"], 1700000000);
  EXPECT_EQ(j["model"], "qwen");
  ASSERT_EQ(j["choices"].size(), 2u);
  const json& c0 = j["choices"][0];
  EXPECT_EQ(c0["index"], 0);
  EXPECT_EQ(c0["message"]["role"], "assistant");
  EXPECT_EQ(c0["message"]["content"], "Hello");
  EXPECT_EQ(c0["message"]["tool_calls"], json::array());
  EXPECT_TRUE(c0.contains("logprobs"));
  EXPECT_TRUE(c0["logprobs"].is_null());
  EXPECT_EQ(c0["finish_reason"], "stop");
  EXPECT_EQ(c0["stop_reason"], 42);
  const json& c1 = j["choices"][1];
  EXPECT_EQ(c1["message"]["content"], "cut \xef\xbf\xbd");  // replaced, not thrown
  EXPECT_EQ(c1["finish_reason"], "length");
  EXPECT_TRUE(c1["stop_reason"].is_null());
  EXPECT_EQ(j["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 10);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_TRUE(j["prompt_logprobs"].is_null());
  EXPECT_TRUE(body.starts_with(R"({"id":"chatcmpl-1","object":"chat.completion",)")) << body;

  json with =
      json::parse(chat_completion_response(kHeader, two_completions(), {7, 3, 0}, fake_text, true));
  EXPECT_EQ(with["choices"][0]["logprobs"]["content"][0]["token"], "t4");
  EXPECT_EQ(with["choices"][1]["logprobs"]["content"], json::array());
  EXPECT_FALSE(with["usage"].contains("prompt_tokens_details"));
}

TEST(Responses, PromptLogprobsStartWithNull) {
  RequestResult result = two_completions();
  result.prompt_logprobs = {make_logprobs(8, -1.5f, {{9, -0.5f, 1}})};
  json j = json::parse(chat_completion_response(kHeader, result, {2, 3, 0}, fake_text, false));
  ASSERT_EQ(j["prompt_logprobs"].size(), 2u);
  EXPECT_TRUE(j["prompt_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(j["prompt_logprobs"][1]["8"]["logprob"].get<double>(), -1.5);
  EXPECT_EQ(j["prompt_logprobs"][1]["9"]["decoded_token"], "t9");
  EXPECT_EQ(j["prompt_logprobs"][1]["9"]["rank"], 1);
}

TEST(Responses, CompletionBodyIndexesAndEcho) {
  std::vector<RequestResult> results = {two_completions(), two_completions()};
  std::vector<std::string> echo = {"P0 ", "P1 "};
  json j = json::parse(
      completion_response({"cmpl-9", 5, "m"}, results, echo, 2, {4, 6, 0}, fake_text, true));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"], "cmpl-9");
  ASSERT_EQ(j["choices"].size(), 4u);
  EXPECT_EQ(j["choices"][3]["index"], 3);  // prompt 1, completion 1: 1 * n + 1
  EXPECT_EQ(j["choices"][2]["index"], 2);
  EXPECT_EQ(j["choices"][2]["text"], "P1 Hello");
  EXPECT_EQ(j["choices"][2]["finish_reason"], "stop");
  EXPECT_EQ(j["choices"][2]["stop_reason"], 42);
  EXPECT_EQ(j["choices"][2]["logprobs"]["text_offset"], json::parse("[3]"));
  EXPECT_EQ(j["usage"]["total_tokens"], 10);

  json plain = json::parse(
      completion_response({"cmpl-9", 5, "m"}, results, {}, 2, {4, 6, 0}, fake_text, false));
  EXPECT_EQ(plain["choices"][0]["text"], "Hello");
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
}

TEST(Responses, EchoedCompletionLogprobsCoverThePromptFirst) {
  RequestResult result;
  result.prompt_logprobs = {make_logprobs(9, -2.0f, {{7, -0.5f, 1}})};  // scores prompt id 9
  CompletionResult c;
  c.text = "t5";
  c.logprobs = {make_logprobs(5, -0.25f)};
  result.completions = {c};
  std::vector<RequestResult> results = {result};
  std::vector<std::string> echo = {"t8t9"};
  std::vector<std::vector<int32_t>> prompt_ids = {{8, 9}};
  json j = json::parse(completion_response({"cmpl-2", 1, "m"}, results, echo, 1, {2, 1, 0},
                                           fake_text, true, prompt_ids));
  const json& lp = j["choices"][0]["logprobs"];
  EXPECT_EQ(j["choices"][0]["text"], "t8t9t5");
  EXPECT_EQ(lp["tokens"], json::parse(R"(["t8","t9","t5"])"));
  EXPECT_EQ(lp["token_logprobs"], json::parse("[null,-2.0,-0.25]"));
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_DOUBLE_EQ(lp["top_logprobs"][1]["t7"].get<double>(), -0.5);
  EXPECT_EQ(lp["text_offset"], json::parse("[0,2,4]"));
}

TEST(Responses, ChatChunksCarryRoleFirstThenContent) {
  ChoiceDelta first;
  first.first = true;
  first.text = "He";
  json a = parse_event(chat_completion_chunk(kHeader, first, fake_text, false));
  EXPECT_EQ(a["object"], "chat.completion.chunk");
  EXPECT_EQ(a["id"], "chatcmpl-1");
  ASSERT_EQ(a["choices"].size(), 1u);
  EXPECT_EQ(a["choices"][0]["delta"], json::parse(R"({"role":"assistant","content":"He"})"));
  EXPECT_TRUE(a["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(a["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(a.contains("usage"));

  ChoiceDelta next;
  next.index = 1;
  next.text = "llo";
  next.logprobs = {make_logprobs(4, -0.5f)};
  json b = parse_event(chat_completion_chunk(kHeader, next, fake_text, true, Usage{3, 2, 0}));
  EXPECT_EQ(b["choices"][0]["index"], 1);
  EXPECT_EQ(b["choices"][0]["delta"], json::parse(R"({"content":"llo"})"));
  EXPECT_EQ(b["choices"][0]["logprobs"]["content"][0]["token"], "t4");
  EXPECT_EQ(b["usage"]["total_tokens"], 5);  // continuous usage stats

  ChoiceDelta last;
  last.finish_reason = FinishReason::kStop;
  last.stop_reason = std::string("END");
  json c = parse_event(chat_completion_chunk(kHeader, last, fake_text, false));
  EXPECT_EQ(c["choices"][0]["delta"], json::object());
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["choices"][0]["stop_reason"], "END");
}

TEST(Responses, CompletionChunkAndUsageChunk) {
  ChoiceDelta d;
  d.index = 2;
  d.text = "t5";
  d.text_offset = 7;
  d.logprobs = {make_logprobs(5, -0.5f)};
  d.finish_reason = FinishReason::kLength;
  json j = parse_event(completion_chunk({"cmpl-1", 9, "m"}, d, fake_text, true));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["index"], 2);
  EXPECT_EQ(j["choices"][0]["text"], "t5");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["text_offset"], json::parse("[7]"));

  json u = parse_event(usage_chunk({"cmpl-1", 9, "m"}, "text_completion", {4, 6, 1}));
  EXPECT_EQ(u["object"], "text_completion");
  EXPECT_EQ(u["choices"], json::array());
  EXPECT_EQ(u["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(u["usage"]["prompt_tokens_details"]["cached_tokens"], 1);

  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(Responses, ErrorChunk) {
  json e = parse_event(error_chunk({400, "bad \"thing\"", "temperature"}));
  EXPECT_EQ(e["error"]["message"], "bad \"thing\"");
  EXPECT_EQ(e["error"]["type"], "BadRequestError");
  EXPECT_EQ(e["error"]["param"], "temperature");
  EXPECT_EQ(e["error"]["code"], 400);
  json no_param = parse_event(error_chunk({500, "boom", ""}));
  EXPECT_TRUE(no_param["error"]["param"].is_null());
  EXPECT_EQ(no_param["error"]["type"], "InternalServerError");
}

}  // namespace
}  // namespace locus::openai
