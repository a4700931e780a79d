// OutputProcessor: incremental detokenization, stop strings with hold-back, stop tokens kept
// out of the text, n > 1 fan-in, aborts, UTF-8-safe deltas; RequestStream delivery.
#include "engine/output_processor.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "engine/fake_detokenizer.h"
#include "engine/request_stream.h"

namespace locus {
namespace {

EngineCoreOutput token_out(RequestId id, int32_t token,
                           std::optional<FinishReason> finish = std::nullopt) {
  EngineCoreOutput o;
  o.request_id = id;
  o.new_token_ids = {token};
  o.finish_reason = finish;
  return o;
}

// Token t is the letter 'a' + t.
OutputProcessor letters_processor(std::vector<int32_t> delayed = {}) {
  return OutputProcessor(
      FakeDetokenizer::factory(FakeDetokenizer::letters(26), std::move(delayed)));
}

std::vector<RequestOutput> feed(OutputProcessor& p, RequestId id, std::vector<int32_t> tokens,
                                OutputProcessor::Result* last = nullptr) {
  std::vector<RequestOutput> all;
  for (int32_t t : tokens) {
    const std::vector<EngineCoreOutput> outs = {token_out(id, t)};
    auto r = p.process(outs, 1.0);
    for (auto& o : r.outputs)
      all.push_back(std::move(o));
    if (last) *last = std::move(r);
  }
  return all;
}

std::string joined_text(const std::vector<RequestOutput>& outs) {
  std::string s;
  for (const auto& o : outs)
    s += o.text;
  return s;
}

TEST(OutputProcessor, StreamsTextWithoutAStopString) {
  auto p = letters_processor();
  SamplingParams params;
  const std::vector<RequestId> children = {7};
  p.add_request(7, children, std::vector<int32_t>{0, 1}, params, 0.5);
  auto outs = feed(p, 7, {7, 4, 11, 11, 14});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_EQ(outs[0].text, "h");
  EXPECT_EQ(joined_text(outs), "hello");
  EXPECT_FALSE(outs.back().finished);
}

TEST(OutputProcessor, StopStringAcrossTokensIsHeldBackThenCut) {
  auto p = letters_processor();
  SamplingParams params;
  params.stop = {"cd"};
  const std::vector<RequestId> children = {1};
  p.add_request(1, children, std::vector<int32_t>{0}, params, 0.0);
  OutputProcessor::Result last;
  auto outs = feed(p, 1, {0, 1, 2, 3}, &last);  // "abcd"
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs[0].text, "");  // "a" might start a stop string: held back
  EXPECT_EQ(outs[1].text, "a");
  EXPECT_EQ(outs[2].text, "b");
  EXPECT_EQ(outs[3].text, "");
  EXPECT_TRUE(outs[3].finished);
  EXPECT_TRUE(outs[3].request_finished);
  EXPECT_EQ(outs[3].finish_reason, FinishReason::kStop);
  EXPECT_EQ(std::get<std::string>(outs[3].stop_reason), "cd");
  EXPECT_EQ(outs[3].metrics.num_generation_tokens, 4);
  EXPECT_EQ(last.finished_in_engine, std::vector<RequestId>{1});
  EXPECT_EQ(joined_text(outs), "ab");
  // A late step result for the stopped sequence is dropped.
  EXPECT_TRUE(feed(p, 1, {4}).empty());
  EXPECT_EQ(p.num_requests(), 0u);
}

TEST(OutputProcessor, IncludeStopStrKeepsItAndHoldsNothingBack) {
  auto p = letters_processor();
  SamplingParams params;
  params.stop = {"cd"};
  params.include_stop_str_in_output = true;
  const std::vector<RequestId> children = {1};
  p.add_request(1, children, std::vector<int32_t>{0}, params, 0.0);
  auto outs = feed(p, 1, {0, 1, 2, 3, 4});
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs[0].text, "a");
  EXPECT_EQ(joined_text(outs), "abcd");
}

TEST(OutputProcessor, StopStringsWaitForMinTokens) {
  auto p = letters_processor();
  SamplingParams params;
  params.stop = {"b"};
  params.min_tokens = 2;
  const std::vector<RequestId> children = {1};
  p.add_request(1, children, std::vector<int32_t>{0}, params, 0.0);
  auto outs = feed(p, 1, {1, 2, 1});  // "b" at output 1 is too early; the second one stops
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_FALSE(outs[1].finished);
  EXPECT_TRUE(outs[2].finished);
  EXPECT_EQ(joined_text(outs), "bc");
}

TEST(OutputProcessor, StopTokenIsInTokenIdsButNotInText) {
  auto p = letters_processor();
  SamplingParams params;
  SamplingParams params2 = params;
  p.add_request(1, std::vector<RequestId>{1}, std::vector<int32_t>{0}, params, 0.0);
  params2.include_stop_str_in_output = true;
  p.add_request(2, std::vector<RequestId>{2}, std::vector<int32_t>{0}, params2, 0.0);
  EngineCoreOutput eos = token_out(1, 25, FinishReason::kStop);
  EngineCoreOutput eos2 = token_out(2, 25, FinishReason::kStop);
  eos2.stop_token_id = 25;
  const std::vector<EngineCoreOutput> outs = {token_out(1, 0), eos, token_out(2, 0), eos2};
  auto r = p.process(outs, 2.0);
  ASSERT_EQ(r.outputs.size(), 4u);
  EXPECT_EQ(r.outputs[1].token_ids, std::vector<int32_t>{25});
  EXPECT_EQ(r.outputs[0].text + r.outputs[1].text, "a");
  EXPECT_EQ(r.outputs[2].text + r.outputs[3].text, "az");
  EXPECT_EQ(std::get<int32_t>(r.outputs[3].stop_reason), 25);
  EXPECT_TRUE(r.finished_in_engine.empty());  // the engine already knows
}

TEST(OutputProcessor, DelayedPiecesArriveWithTheNextToken) {
  auto p = letters_processor(/*delayed=*/{4});
  SamplingParams params;
  p.add_request(1, std::vector<RequestId>{1}, std::vector<int32_t>{0}, params, 0.0);
  auto outs = feed(p, 1, {4, 5});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].text, "");
  EXPECT_EQ(outs[0].token_ids, std::vector<int32_t>{4});
  EXPECT_EQ(outs[1].text, "ef");
}

TEST(OutputProcessor, DeltasNeverSplitAUtf8Character) {
  auto pieces = std::make_shared<std::vector<std::string>>(
      std::vector<std::string>{"\xC3\xA9", "x", "y"});  // "é", "x", "y"
  OutputProcessor p(FakeDetokenizer::factory(pieces));
  SamplingParams params;
  params.stop = {"wxyz"};  // hold back 3 bytes
  p.add_request(1, std::vector<RequestId>{1}, std::vector<int32_t>{1}, params, 0.0);
  auto outs = feed(p, 1, {0, 0, 1, 1, 1});
  std::string sent;
  for (const auto& o : outs) {
    sent += o.text;
    // Every prefix sent so far ends on a character boundary.
    if (!sent.empty()) {
      EXPECT_NE(static_cast<unsigned char>(sent.back()), 0xC3);
    }
  }
  EXPECT_EQ(sent, "\xC3\xA9\xC3\xA9");  // "xxx" (3 bytes) is still held back
}

TEST(OutputProcessor, FanInOfNCompletionsAndCumulativeLogprobs) {
  auto p = letters_processor();
  SamplingParams params;
  params.n = 2;
  params.logprobs = 0;
  const std::vector<RequestId> children = {11, 12};
  p.add_request(10, children, std::vector<int32_t>{0}, params, 0.0);
  EngineCoreOutput a = token_out(11, 0, FinishReason::kLength);
  a.new_logprobs.push_back({{0, -0.5f, 1}, {}});
  EngineCoreOutput b = token_out(12, 1);
  b.new_logprobs.push_back({{1, -1.5f, 2}, {}});
  EngineCoreOutput b2 = token_out(12, 2, FinishReason::kLength);
  b2.new_logprobs.push_back({{2, -0.25f, 1}, {}});
  auto r1 = p.process(std::vector<EngineCoreOutput>{a, b}, 1.0);
  ASSERT_EQ(r1.outputs.size(), 2u);
  EXPECT_EQ(r1.outputs[0].request_id, 10u);
  EXPECT_EQ(r1.outputs[0].index, 0);
  EXPECT_TRUE(r1.outputs[0].finished);
  EXPECT_FALSE(r1.outputs[0].request_finished);
  EXPECT_EQ(r1.outputs[1].index, 1);
  auto r2 = p.process(std::vector<EngineCoreOutput>{b2}, 2.0);
  ASSERT_EQ(r2.outputs.size(), 1u);
  EXPECT_TRUE(r2.outputs[0].request_finished);
  EXPECT_DOUBLE_EQ(r2.outputs[0].cumulative_logprob, -1.75);
  EXPECT_EQ(p.num_requests(), 0u);
}

TEST(OutputProcessor, AbortEndsEveryUnfinishedCompletion) {
  auto p = letters_processor();
  SamplingParams params;
  params.stop = {"zz"};
  const std::vector<RequestId> children = {21, 22};
  p.add_request(20, children, std::vector<int32_t>{0}, params, 0.0);
  feed(p, 21, {0, 1});  // "ab", "b" held back
  auto r = p.abort(20, 3.0);
  EXPECT_EQ(r.aborted_in_engine, (std::vector<RequestId>{21, 22}));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_EQ(r.outputs[0].text, "b");  // the held-back text is flushed
  EXPECT_EQ(r.outputs[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(r.outputs[1].request_finished);
  EXPECT_TRUE(p.abort(20, 4.0).outputs.empty());
}

TEST(RequestStream, DeliversInOrderThenEndsOrFails) {
  RequestStream s(5);
  EXPECT_FALSE(s.try_next().has_value());
  std::thread producer([&] {
    RequestOutput a;
    a.text = "x";
    s.push(a);
    RequestOutput b;
    b.text = "y";
    b.finished = b.request_finished = true;
    s.push(b);
    s.push(a);  // nothing after the end
  });
  auto result = s.collect();
  producer.join();
  ASSERT_TRUE(result.has_value());
  ASSERT_EQ(result->completions.size(), 1u);
  EXPECT_EQ(result->completions[0].text, "xy");
  EXPECT_EQ(s.next().error().code(), ErrorCode::kOutOfRange);

  RequestStream f(6);
  int notified = 0;
  f.set_on_ready([&] { ++notified; });
  f.fail(resource_exhausted("gone"));
  EXPECT_EQ(notified, 1);
  EXPECT_EQ(f.next().error().code(), ErrorCode::kResourceExhausted);
  EXPECT_FALSE(f.next_for(std::chrono::milliseconds(1)).value().has_value());
}

}  // namespace
}  // namespace locus
