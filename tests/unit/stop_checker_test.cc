// Stop conditions: token-level checks and stop strings across token boundaries.
#include "sampling/stop_checker.h"

#include <gtest/gtest.h>

#include <string>

namespace locus {
namespace {

TEST(TokenStop, OrderAndMinTokens) {
  SamplingParams p;
  p.stop_token_ids = {9};
  p.min_tokens = 2;
  // EOS before min_tokens: ignored; the length limit still applies.
  EXPECT_FALSE(check_token_stop(p, 1, 1, 1, 5, 10, 100).has_value());
  auto s = check_token_stop(p, 1, 1, 2, 6, 10, 100);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->reason, FinishReason::kStop);
  EXPECT_FALSE(s->stop_token_id.has_value());
  s = check_token_stop(p, 1, 9, 3, 7, 10, 100);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->stop_token_id, 9);
  // A stop token that is also the last allowed token reports stop.
  s = check_token_stop(p, 1, 9, 10, 14, 10, 100);
  EXPECT_EQ(s->reason, FinishReason::kStop);
  s = check_token_stop(p, 1, 4, 10, 14, 10, 100);
  EXPECT_EQ(s->reason, FinishReason::kLength);
  s = check_token_stop(p, 1, 4, 3, 100, 10, 100);
  EXPECT_EQ(s->reason, FinishReason::kLength);  // max_model_len
  p.ignore_eos = true;
  EXPECT_FALSE(check_token_stop(p, 1, 1, 5, 9, 10, 100).has_value());
  EXPECT_EQ(finish_reason_name(FinishReason::kLength), "length");
}

TEST(StopStrings, MatchAcrossTokenBoundariesAndTruncate) {
  SamplingParams p;
  p.stop = {"END", "\n\n"};
  StopStringMatcher m(p);
  EXPECT_EQ(m.holdback(), 2u);
  std::string text = "hello E";
  EXPECT_FALSE(m.find(text, 7).has_value());
  text += "N";
  EXPECT_FALSE(m.find(text, 1).has_value());
  text += "D and more";
  auto match = m.find(text, 10);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->stop_string, "END");
  EXPECT_EQ(text.substr(0, match->truncate_to), "hello ");
}

TEST(StopStrings, EarliestMatchWinsAndIncludeKeepsIt) {
  SamplingParams p;
  p.stop = {"cd", "b"};
  p.include_stop_str_in_output = true;
  StopStringMatcher m(p);
  EXPECT_EQ(m.holdback(), 0u);
  auto match = m.find("abcd", 4);
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->stop_string, "b");
  EXPECT_EQ(match->truncate_to, 2u);  // "ab"
}

TEST(StopStrings, OldTextIsNotSearchedAgain) {
  SamplingParams p;
  p.stop = {"xx"};
  StopStringMatcher m(p);
  // "xx" lies wholly in text checked earlier (e.g. before min_tokens): not reported now.
  EXPECT_FALSE(m.find("axxbc", 2).has_value());
  EXPECT_TRUE(m.find("axxbcx", 1) == std::nullopt);
  EXPECT_TRUE(m.find("axxbcxx", 1).has_value());
}

}  // namespace
}  // namespace locus
