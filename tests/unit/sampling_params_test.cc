// SamplingParams validation: vLLM's ranges and messages.
#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <string>

namespace locus {
namespace {

std::string error_of(const SamplingParams& p) {
  Status s = p.validate_for_model(100, 20);
  EXPECT_EQ(s.code(), s.is_ok() ? ErrorCode::kOk : ErrorCode::kInvalidArgument);
  return s.message();
}

TEST(SamplingParams, DefaultsAreValidAndRandom) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().is_ok());
  EXPECT_FALSE(p.is_greedy());
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
}

TEST(SamplingParams, RangeErrorsUseVllmWording) {
  SamplingParams p;
  p.n = 0;
  EXPECT_EQ(error_of(p), "n must be at least 1, got 0.");
  p = {};
  p.temperature = -1.0f;
  EXPECT_EQ(error_of(p), "temperature must be non-negative, got -1.");
  p = {};
  p.top_p = 1.5f;
  EXPECT_EQ(error_of(p), "top_p must be in (0, 1], got 1.5.");
  p = {};
  p.top_p = 0.0f;
  EXPECT_EQ(error_of(p), "top_p must be in (0, 1], got 0.");
  p = {};
  p.top_k = -2;
  EXPECT_EQ(error_of(p), "top_k must be 0 or -1 (disable), or at least 1, got -2.");
  p = {};
  p.min_p = 2.0f;
  EXPECT_EQ(error_of(p), "min_p must be in [0, 1], got 2.");
  p = {};
  p.presence_penalty = 3.0f;
  EXPECT_EQ(error_of(p), "presence_penalty must be in [-2, 2], got 3.");
  p = {};
  p.frequency_penalty = -2.5f;
  EXPECT_EQ(error_of(p), "frequency_penalty must be in [-2, 2], got -2.5.");
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(error_of(p), "repetition_penalty must be greater than zero, got 0.");
  p = {};
  p.max_tokens = 0;
  EXPECT_EQ(error_of(p), "max_tokens must be at least 1, got 0.");
  p = {};
  p.min_tokens = -1;
  EXPECT_EQ(error_of(p), "min_tokens must be greater than or equal to 0, got -1.");
  p = {};
  p.max_tokens = 4;
  p.min_tokens = 5;
  EXPECT_EQ(error_of(p), "min_tokens must be less than or equal to max_tokens=4, got 5.");
  p = {};
  p.logprobs = -1;
  EXPECT_EQ(error_of(p), "logprobs must be non-negative, got -1.");
  p = {};
  p.stop = {"ok", ""};
  EXPECT_EQ(error_of(p), "stop cannot contain an empty string.");
}

TEST(SamplingParams, NanIsRejectedEverywhere) {
  SamplingParams p;
  p.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(p.validate().is_ok());
  p = {};
  p.top_p = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(p.validate().is_ok());
  p = {};
  p.logit_bias[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(p.validate().is_ok());
}

TEST(SamplingParams, ModelDependentChecks) {
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}, {100, 2.0f}, {-1, 1.0f}};
  EXPECT_EQ(
      error_of(p),
      "token_id(s) -1, 100 in logit_bias contain out-of-vocab token ids. Vocabulary size: 100");
  p = {};
  p.stop_token_ids = {7, 200};
  EXPECT_NE(error_of(p).find("out-of-vocab token id 200"), std::string::npos);
  p = {};
  p.logprobs = 21;
  EXPECT_EQ(error_of(p), "Requested sample logprobs of 21, which is greater than max allowed: 20");
  p = {};
  p.prompt_logprobs = 25;
  EXPECT_NE(error_of(p).find("prompt logprobs of 25"), std::string::npos);
  p = {};
  p.logprobs = 20;
  p.top_k = -1;
  p.logit_bias = {{99, -100.0f}};
  EXPECT_EQ(error_of(p), "");
}

}  // namespace
}  // namespace locus
