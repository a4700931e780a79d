// Scheduler: budget and sequence caps, order (running first, FCFS or priority), chunked
// prefill, preemption by recompute, aborts, token-level stop conditions, admission errors.
#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace locus {
namespace {

std::vector<int32_t> prompt_of(int n, int32_t start = 1) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

EngineCoreRequest make(RequestId id, int prompt_len, int max_tokens = 16, int priority = 0,
                       double arrival = 0.0) {
  EngineCoreRequest r;
  r.request_id = id;
  r.prompt_token_ids = prompt_of(prompt_len, static_cast<int32_t>(id) * 1000);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.priority = priority;
  r.arrival_time = arrival == 0.0 ? static_cast<double>(id) : arrival;
  return r;
}

std::unique_ptr<Scheduler> make_scheduler(SchedulerConfig config, int num_blocks = 64,
                                          int block_size = 4, bool caching = true) {
  config.max_model_len = std::min(config.max_model_len, num_blocks * block_size);
  auto s = Scheduler::create(config, {num_blocks, block_size, caching});
  EXPECT_TRUE(s.has_value()) << s.error().to_string();
  return std::move(*s);
}

// Completes a step with `token` sampled for every request that samples.
std::vector<EngineCoreOutput> finish_step(Scheduler& s, const SchedulerOutput& out,
                                          int32_t token = 5) {
  ModelRunnerOutput mo;
  for (const auto& r : out.scheduled)
    mo.sampled_token_ids.push_back(r.needs_sample ? token : -1);
  auto res = s.update_from_output(out, mo);
  EXPECT_TRUE(res.has_value());
  return res.has_value() ? std::move(*res) : std::vector<EngineCoreOutput>{};
}

int tokens_of(const SchedulerOutput& out, RequestId id) {
  for (const auto& r : out.scheduled) {
    if (r.request->id == id) return r.num_new_tokens;
  }
  return 0;
}

TEST(Scheduler, PrefillThenDecodeOneTokenPerStep) {
  SchedulerConfig c;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 10, 3)).is_ok());
  SchedulerOutput o1 = s->schedule();
  ASSERT_EQ(o1.scheduled.size(), 1u);
  EXPECT_EQ(o1.scheduled[0].num_new_tokens, 10);
  EXPECT_TRUE(o1.scheduled[0].is_prefill);
  EXPECT_TRUE(o1.scheduled[0].is_new);
  EXPECT_TRUE(o1.scheduled[0].needs_sample);
  EXPECT_EQ(o1.scheduled[0].block_ids.size(), 3u);
  auto outs = finish_step(*s, o1);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].new_token_ids, std::vector<int32_t>{5});
  SchedulerOutput o2 = s->schedule();
  ASSERT_EQ(o2.scheduled.size(), 1u);
  EXPECT_EQ(o2.scheduled[0].num_computed_tokens, 10);
  EXPECT_EQ(o2.scheduled[0].num_new_tokens, 1);
  EXPECT_FALSE(o2.scheduled[0].is_prefill);
  EXPECT_FALSE(o2.scheduled[0].is_new);
  finish_step(*s, o2);
  SchedulerOutput o3 = s->schedule();
  auto last = finish_step(*s, o3);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].finish_reason, FinishReason::kLength);
  EXPECT_FALSE(s->has_unfinished_requests());
  EXPECT_EQ(s->kv_cache_manager().num_free_blocks(), 64);
  SchedulerOutput o4 = s->schedule();
  EXPECT_TRUE(o4.empty());
  EXPECT_EQ(o4.finished, std::vector<RequestId>{1});
}

TEST(Scheduler, TokenBudgetChunksLongPrompts) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 8;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 20, 2)).is_ok());
  std::vector<int> chunks;
  while (true) {
    SchedulerOutput o = s->schedule();
    ASSERT_EQ(o.scheduled.size(), 1u);
    chunks.push_back(o.scheduled[0].num_new_tokens);
    EXPECT_LE(o.total_num_scheduled_tokens, 8);
    const bool sampled = o.scheduled[0].needs_sample;
    auto outs = finish_step(*s, o);
    EXPECT_EQ(outs.size(), sampled ? 1u : 0u);  // middle chunks produce nothing
    if (sampled) break;
  }
  EXPECT_EQ(chunks, (std::vector<int>{8, 8, 4}));
}

TEST(Scheduler, LongPrefillThresholdCapsOneRequestsChunk) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 32;
  c.long_prefill_token_threshold = 6;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 20)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 3)).is_ok());
  SchedulerOutput o = s->schedule();
  EXPECT_EQ(tokens_of(o, 1), 6);
  EXPECT_EQ(tokens_of(o, 2), 3);
}

TEST(Scheduler, WithoutChunkedPrefillAPromptWaitsForAWholeBudget) {
  SchedulerConfig c;
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 16;
  c.max_model_len = 16;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 10, 4)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 10, 4)).is_ok());
  SchedulerOutput o = s->schedule();
  EXPECT_EQ(o.scheduled.size(), 1u);  // 10 + 10 > 16 and no chunking
  EXPECT_EQ(tokens_of(o, 1), 10);
  finish_step(*s, o);
  SchedulerOutput o2 = s->schedule();
  EXPECT_EQ(tokens_of(o2, 1), 1);
  EXPECT_EQ(tokens_of(o2, 2), 10);
}

TEST(Scheduler, RunningRequestsComeFirstThenWaitingInArrivalOrder) {
  SchedulerConfig c;
  c.max_num_batched_tokens = 12;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 10)).is_ok());
  SchedulerOutput o1 = s->schedule();
  finish_step(*s, o1);
  ASSERT_TRUE(s->add_request(make(2, 10)).is_ok());
  ASSERT_TRUE(s->add_request(make(3, 10)).is_ok());
  SchedulerOutput o2 = s->schedule();
  ASSERT_EQ(o2.scheduled.size(), 3u);
  EXPECT_EQ(o2.scheduled[0].request->id, 1u);  // the decode first
  EXPECT_EQ(o2.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(o2.scheduled[1].request->id, 2u);  // then the waiting ones in arrival order
  EXPECT_EQ(o2.scheduled[1].num_new_tokens, 10);
  EXPECT_EQ(o2.scheduled[2].request->id, 3u);  // chunked to the one token left
  EXPECT_EQ(o2.scheduled[2].num_new_tokens, 1);
  EXPECT_FALSE(o2.scheduled[2].needs_sample);
  EXPECT_EQ(o2.total_num_scheduled_tokens, 12);
}

TEST(Scheduler, MaxNumSeqsCapsRunningRequests) {
  SchedulerConfig c;
  c.max_num_seqs = 2;
  auto s = make_scheduler(c);
  for (RequestId id = 1; id <= 3; ++id)
    ASSERT_TRUE(s->add_request(make(id, 4)).is_ok());
  SchedulerOutput o = s->schedule();
  EXPECT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(s->num_running(), 2);
  EXPECT_EQ(s->num_waiting(), 1);
}

TEST(Scheduler, PriorityPolicyAdmitsLowerValuesFirst) {
  SchedulerConfig c;
  c.policy = SchedulingPolicy::kPriority;
  c.max_num_seqs = 2;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 4, 16, /*priority=*/5)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 4, 16, /*priority=*/0)).is_ok());
  ASSERT_TRUE(s->add_request(make(3, 4, 16, /*priority=*/5)).is_ok());
  ASSERT_TRUE(s->add_request(make(4, 4, 16, /*priority=*/-1)).is_ok());
  SchedulerOutput o = s->schedule();
  ASSERT_EQ(o.scheduled.size(), 2u);
  EXPECT_EQ(o.scheduled[0].request->id, 4u);
  EXPECT_EQ(o.scheduled[1].request->id, 2u);
}

TEST(Scheduler, FcfsPreemptsTheLatestRunningRequestAndRequeuesItFirst) {
  // 6 blocks of 4 = 24 slots. Two 8-token prompts use 4 blocks; decoding grows both until a
  // third block each no longer fits.
  SchedulerConfig c;
  c.max_model_len = 24;
  c.max_num_seqs = 2;
  auto s = make_scheduler(c, /*num_blocks=*/6, /*block_size=*/4, /*caching=*/false);
  ASSERT_TRUE(s->add_request(make(1, 8, 14)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 8, 14)).is_ok());
  ASSERT_TRUE(s->add_request(make(3, 8, 14)).is_ok());
  bool preempted = false;
  for (int step = 0; step < 40 && !preempted; ++step) {
    SchedulerOutput o = s->schedule();
    if (!o.preempted.empty()) {
      preempted = true;
      EXPECT_EQ(o.preempted.front(), 2u);  // the latest of the running ones (1 and 2)
      const Request* r2 = s->find_request(2);
      ASSERT_NE(r2, nullptr);
      EXPECT_EQ(r2->status, RequestStatus::kPreempted);
      EXPECT_EQ(r2->num_computed_tokens, 0);
      EXPECT_TRUE(s->kv_cache_manager().block_ids(2).empty());
      EXPECT_EQ(tokens_of(o, 3), 0);  // no admissions in a step that preempted
    }
    finish_step(*s, o);
    ASSERT_TRUE(s->check_invariants().is_ok());
  }
  ASSERT_TRUE(preempted);
  // Request 1 finishing frees room; 2 resumes before 3 (it went back to the queue's front).
  while (s->find_request(1) != nullptr)
    finish_step(*s, s->schedule());
  SchedulerOutput o = s->schedule();
  ASSERT_FALSE(o.scheduled.empty());
  EXPECT_EQ(o.scheduled[0].request->id, 2u);
  EXPECT_TRUE(o.scheduled[0].is_new);
  EXPECT_EQ(o.scheduled[0].num_computed_tokens, 0);  // recompute prompt + outputs so far
  EXPECT_GT(o.scheduled[0].num_new_tokens, 8);
}

TEST(Scheduler, PriorityPolicyPreemptsTheLowestPriority) {
  SchedulerConfig c;
  c.policy = SchedulingPolicy::kPriority;
  c.max_model_len = 24;
  auto s = make_scheduler(c, 6, 4, false);
  // Request 1 (lowest priority) runs first, so it sits before request 2 in the running list
  // and is already planned when request 2 runs out of blocks: the step must un-plan it.
  ASSERT_TRUE(s->add_request(make(1, 8, 14, /*priority=*/9)).is_ok());
  finish_step(*s, s->schedule());
  ASSERT_TRUE(s->add_request(make(2, 11, 12, /*priority=*/0)).is_ok());
  std::vector<RequestId> victims;
  for (int step = 0; step < 30 && victims.empty(); ++step) {
    SchedulerOutput o = s->schedule();
    victims = o.preempted;
    // A victim planned earlier in the same step gives its tokens back.
    int total = 0;
    for (const auto& r : o.scheduled) {
      EXPECT_NE(r.request->status, RequestStatus::kPreempted);
      total += r.num_new_tokens;
    }
    EXPECT_EQ(total, o.total_num_scheduled_tokens);
    finish_step(*s, o);
    ASSERT_TRUE(s->check_invariants().is_ok());
  }
  ASSERT_FALSE(victims.empty());
  EXPECT_EQ(victims.front(), 1u);
}

TEST(Scheduler, AbortFreesEverythingBeforeTheNextStep) {
  SchedulerConfig c;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 10)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 10)).is_ok());
  finish_step(*s, s->schedule());
  ASSERT_TRUE(s->add_request(make(3, 10)).is_ok());  // still waiting
  const std::vector<RequestId> ids = {1, 3, 99};
  s->finish_requests(ids, RequestStatus::kFinishedAborted);
  EXPECT_EQ(s->num_running(), 1);
  EXPECT_EQ(s->num_waiting(), 0);
  EXPECT_TRUE(s->kv_cache_manager().block_ids(1).empty());
  SchedulerOutput o = s->schedule();
  EXPECT_EQ(o.finished, (std::vector<RequestId>{1, 3}));
  ASSERT_EQ(o.scheduled.size(), 1u);
  EXPECT_EQ(o.scheduled[0].request->id, 2u);
  finish_step(*s, o);
  s->finish_requests(std::vector<RequestId>{2}, RequestStatus::kFinishedAborted);
  EXPECT_EQ(s->kv_cache_manager().num_free_blocks(), 64);
  EXPECT_FALSE(s->has_unfinished_requests());
}

TEST(Scheduler, StopsOnEosUnlessIgnoredAndOnlyAfterMinTokens) {
  SchedulerConfig c;
  auto s = make_scheduler(c);
  EngineCoreRequest a = make(1, 4, 10);
  a.eos_token_id = 5;
  a.params.min_tokens = 2;
  EngineCoreRequest b = make(2, 4, 3);
  b.eos_token_id = 5;
  b.params.ignore_eos = true;
  ASSERT_TRUE(s->add_request(std::move(a)).is_ok());
  ASSERT_TRUE(s->add_request(std::move(b)).is_ok());
  auto o1 = finish_step(*s, s->schedule(), 5);
  EXPECT_FALSE(o1[0].finished());  // min_tokens=2 not reached
  auto o2 = finish_step(*s, s->schedule(), 5);
  ASSERT_EQ(o2.size(), 2u);
  EXPECT_EQ(o2[0].finish_reason, FinishReason::kStop);
  EXPECT_FALSE(o2[0].stop_token_id.has_value());  // EOS: no stop_reason
  EXPECT_FALSE(o2[1].finished());
  auto o3 = finish_step(*s, s->schedule(), 5);
  EXPECT_EQ(o3[0].finish_reason, FinishReason::kLength);  // ignore_eos ran to max_tokens
}

TEST(Scheduler, StopTokenIdsReportTheirId) {
  SchedulerConfig c;
  auto s = make_scheduler(c);
  EngineCoreRequest a = make(1, 4, 10);
  a.params.stop_token_ids = {42, 43};
  ASSERT_TRUE(s->add_request(std::move(a)).is_ok());
  finish_step(*s, s->schedule(), 1);
  auto o = finish_step(*s, s->schedule(), 43);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].finish_reason, FinishReason::kStop);
  EXPECT_EQ(o[0].stop_token_id, 43);
}

TEST(Scheduler, MaxModelLenEndsWithLength) {
  SchedulerConfig c;
  c.max_model_len = 12;
  auto s = make_scheduler(c);
  EngineCoreRequest a = make(1, 10, 100);
  ASSERT_TRUE(s->add_request(std::move(a)).is_ok());
  finish_step(*s, s->schedule());
  auto o = finish_step(*s, s->schedule());
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].finish_reason, FinishReason::kLength);
}

TEST(Scheduler, AdmissionErrorsAreVllmLike) {
  SchedulerConfig c;
  c.max_model_len = 16;
  auto s = make_scheduler(c);
  Status too_long = s->add_request(make(1, 16));
  EXPECT_EQ(too_long.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("The decoder prompt (length 16) is longer than the maximum "
                                    "model length of 16"),
            std::string::npos);
  EXPECT_FALSE(s->add_request(make(2, 0)).is_ok());
  ASSERT_TRUE(s->add_request(make(3, 4)).is_ok());
  EXPECT_NE(s->add_request(make(3, 4)).message().find("already exists"), std::string::npos);
  EngineCoreRequest bad = make(4, 4);
  bad.params.top_p = 0.0f;
  EXPECT_NE(s->add_request(std::move(bad)).message().find("top_p must be in (0, 1]"),
            std::string::npos);
}

TEST(Scheduler, CreateRejectsAPoolSmallerThanOneMaxLengthSequence) {
  SchedulerConfig c;
  c.max_model_len = 100;
  auto s = Scheduler::create(c, {10, 4, true});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(s.error().message().find("max seq len (100)"), std::string::npos);
  SchedulerConfig no_chunk;
  no_chunk.enable_chunked_prefill = false;
  no_chunk.max_num_batched_tokens = 10;
  no_chunk.max_model_len = 20;
  EXPECT_FALSE(Scheduler::create(no_chunk, {10, 4, true}).has_value());
}

TEST(Scheduler, UpdateRejectsMismatchedRunnerOutput) {
  SchedulerConfig c;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 4)).is_ok());
  SchedulerOutput o = s->schedule();
  ModelRunnerOutput empty;
  auto r = s->update_from_output(o, empty);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInternal);
}

TEST(Scheduler, StatsCountRunningWaitingAndUsage) {
  SchedulerConfig c;
  c.max_num_seqs = 1;
  auto s = make_scheduler(c);
  ASSERT_TRUE(s->add_request(make(1, 8)).is_ok());
  ASSERT_TRUE(s->add_request(make(2, 8)).is_ok());
  finish_step(*s, s->schedule());
  SchedulerStats st = s->stats();
  EXPECT_EQ(st.num_running_reqs, 1);
  EXPECT_EQ(st.num_waiting_reqs, 1);
  EXPECT_NEAR(st.kv_cache_usage, 2.0 / 64.0, 1e-12);
}

}  // namespace
}  // namespace locus
