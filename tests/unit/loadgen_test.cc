// The load generator's pure parts (#8): stream parsing and every metric against scripted chunk
// timings (exact expected TTFT/TPOT/ITL/E2EL/goodput/throughputs), SLO parsing, the arrival
// process's statistics, and the random dataset.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "loadgen/arrivals.h"
#include "loadgen/datasets.h"
#include "loadgen/random_dataset.h"
#include "loadgen/serve_metrics.h"
#include "loadgen/server_metrics.h"
#include "loadgen/stream_recorder.h"

namespace locus::loadgen {
namespace {

constexpr double kEps = 1e-9;

struct Event {
  double t;
  std::string data;  // the JSON (or [DONE]) of one SSE event
};

// Replays a scripted stream; `bytewise` feeds one byte at a time (events split anywhere).
RequestRecord replay(double start, int64_t prompt_tokens, const std::vector<Event>& events,
                     bool bytewise = false) {
  StreamRecorder rec(start, prompt_tokens);
  for (const Event& e : events) {
    const std::string wire = "data: " + e.data + "\r\n\r\n";
    if (bytewise) {
      for (char c : wire)
        rec.feed(std::string_view(&c, 1), e.t);
    } else {
      rec.feed(wire, e.t);
    }
  }
  return rec.finish(events.empty() ? start : events.back().t);
}

std::string chat_delta(const std::string& content) {
  return R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":")" +
         content + R"("},"finish_reason":null}]})";
}
std::string text_chunk(const std::string& text) {
  return R"({"object":"text_completion","choices":[{"index":0,"text":")" + text +
         R"(","finish_reason":null}]})";
}

// A: chat, role chunk first, usage at the end. B: completions, no usage (chunks counted).
// C: failed. D: one token, overlapping B.
std::vector<RequestRecord> scripted_run() {
  std::vector<RequestRecord> records;
  records.push_back(
      replay(0.0, 99,
             {{0.05, R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})"},
              {0.10, chat_delta("Hello")},
              {0.13, chat_delta(" world")},
              {0.19, chat_delta("!")},
              {0.19, R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})"},
              {0.20, R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}})"},
              {0.20, "[DONE]"}},
             /*bytewise=*/true));
  records.push_back(
      replay(0.5, 7, {{0.8, text_chunk("a")}, {0.9, text_chunk("b")}, {0.9, "[DONE]"}}));
  StreamRecorder failed(0.6, 3);
  records.push_back(failed.fail("HTTP 500: boom"));
  records.push_back(replay(0.85, 4, {{1.05, text_chunk("z")}, {1.05, "[DONE]"}}));
  return records;
}

TEST(StreamRecorder, TimesContentChunksAndReadsUsage) {
  const auto r = scripted_run();
  ASSERT_TRUE(r[0].success) << r[0].error;
  EXPECT_NEAR(r[0].ttft_s, 0.10, kEps);
  ASSERT_EQ(r[0].itl_s.size(), 2u);
  EXPECT_NEAR(r[0].itl_s[0], 0.03, kEps);
  EXPECT_NEAR(r[0].itl_s[1], 0.06, kEps);
  EXPECT_NEAR(r[0].latency_s, 0.19, kEps);
  EXPECT_EQ(r[0].output_tokens, 3);
  EXPECT_EQ(r[0].prompt_tokens, 5);  // the server's usage wins over the request's count
  ASSERT_TRUE(r[1].success) << r[1].error;
  EXPECT_NEAR(r[1].ttft_s, 0.3, kEps);
  EXPECT_EQ(r[1].output_tokens, 2);  // no usage: content chunks
  EXPECT_EQ(r[1].prompt_tokens, 7);
  EXPECT_FALSE(r[2].success);
  EXPECT_EQ(r[2].error, "HTTP 500: boom");
  ASSERT_TRUE(r[3].success) << r[3].error;
  EXPECT_TRUE(r[3].itl_s.empty());
}

TEST(StreamRecorder, BrokenStreamsFailWithAReason) {
  auto e = replay(0, 1, {{0.1, text_chunk("a")}, {0.2, R"({"error":{"message":"x","code":500}})"}});
  EXPECT_FALSE(e.success);
  EXPECT_NE(e.error.find("error event"), std::string::npos) << e.error;
  auto cut = replay(0, 1, {{0.1, text_chunk("a")}});  // neither [DONE] nor a finish_reason
  EXPECT_FALSE(cut.success);
  EXPECT_NE(cut.error.find("without [DONE]"), std::string::npos) << cut.error;
  auto empty = replay(0, 1, {{0.1, "[DONE]"}});
  EXPECT_FALSE(empty.success);
  EXPECT_EQ(empty.error, "no content in the stream");
  auto garbage = replay(0, 1, {{0.1, "{not json"}, {0.2, text_chunk("a")}, {0.3, "[DONE]"}});
  EXPECT_FALSE(garbage.success);
  EXPECT_NE(garbage.error.find("unparsable"), std::string::npos) << garbage.error;
  // A finish_reason without [DONE] (servers that close right after) is a complete stream.
  auto closed =
      replay(0, 1, {{0.1, R"({"choices":[{"index":0,"text":"a","finish_reason":"stop"}]})"}});
  EXPECT_TRUE(closed.success) << closed.error;
}

TEST(ServeMetrics, ExactValuesOfAScriptedRun) {
  const auto records = scripted_run();
  Slo slo;
  slo.ttft_ms = 250;
  slo.tpot_ms = 80;
  const std::vector<double> pct = {50, 90, 99};
  const ServeMetrics m = compute_serve_metrics(records, 2.0, slo, pct);
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 5 + 7 + 4);
  EXPECT_EQ(m.total_output, 3 + 2 + 1);
  EXPECT_NEAR(m.request_throughput, 1.5, kEps);
  EXPECT_NEAR(m.output_throughput, 3.0, kEps);
  EXPECT_NEAR(m.total_token_throughput, 11.0, kEps);
  EXPECT_EQ(m.peak_concurrency, 2);  // D starts at 0.85 while B runs to 0.9

  // TTFT [100, 300, 200] ms.
  EXPECT_NEAR(m.ttft_ms.mean, 200, 1e-6);
  EXPECT_NEAR(m.ttft_ms.median, 200, 1e-6);
  EXPECT_NEAR(m.ttft_ms.percentiles[1].second, 280, 1e-6);  // numpy: 200 + 0.8 * 100
  EXPECT_NEAR(m.ttft_ms.percentiles[2].second, 298, 1e-6);
  EXPECT_NEAR(m.ttft_ms.std, std::sqrt(20000.0 / 3.0), 1e-6);
  // TPOT: A (190 - 100) / 2 = 45 ms, B 100 ms; D has one token and no TPOT.
  EXPECT_EQ(m.tpot_ms.count, 2);
  EXPECT_NEAR(m.tpot_ms.mean, 72.5, 1e-6);
  EXPECT_NEAR(m.tpot_ms.percentiles[2].second, 45 + 0.99 * 55, 1e-6);
  // ITL: A's 30 and 60 ms, B's 100 ms.
  EXPECT_EQ(m.itl_ms.count, 3);
  EXPECT_NEAR(m.itl_ms.mean, 190.0 / 3, 1e-6);
  EXPECT_NEAR(m.itl_ms.median, 60, 1e-6);
  // E2EL [190, 400, 200] ms.
  EXPECT_NEAR(m.e2el_ms.mean, 790.0 / 3, 1e-6);
  EXPECT_NEAR(m.e2el_ms.max, 400, 1e-6);
  // Goodput: A (100 / 45) and D (200 / 0) meet ttft <= 250 and tpot <= 80; B's TTFT is 300.
  EXPECT_EQ(m.good_requests, 2);
  ASSERT_TRUE(m.goodput.has_value());
  EXPECT_NEAR(*m.goodput, 1.0, kEps);

  slo.e2el_ms = 195;  // now D (200 ms) misses too
  EXPECT_EQ(compute_serve_metrics(records, 2.0, slo, pct).good_requests, 1);
  EXPECT_FALSE(compute_serve_metrics(records, 2.0, Slo{}, pct).goodput.has_value());
}

TEST(ServeMetrics, SloTermsParseOrSayWhy) {
  Slo slo;
  EXPECT_FALSE(parse_slo_term("ttft:500", slo).has_value());
  EXPECT_FALSE(parse_slo_term("tpot:12.5", slo).has_value());
  EXPECT_FALSE(parse_slo_term("e2el:0", slo).has_value());
  EXPECT_EQ(*slo.ttft_ms, 500);
  EXPECT_EQ(*slo.tpot_ms, 12.5);
  EXPECT_EQ(*slo.e2el_ms, 0);
  EXPECT_NE(parse_slo_term("ttft", slo)->find("expected KEY:MILLISECONDS"), std::string::npos);
  EXPECT_NE(parse_slo_term("itl:5", slo)->find("unknown metric 'itl'"), std::string::npos);
  EXPECT_NE(parse_slo_term("ttft:-1", slo)->find("not a non-negative"), std::string::npos);
  EXPECT_NE(parse_slo_term("ttft:5ms", slo)->find("not a non-negative"), std::string::npos);
}

TEST(Arrivals, MeanGapAndBurstinessFollowTheGammaProcess) {
  const int n = 20000;
  for (double burstiness : {1.0, 0.5, 4.0}) {
    const auto t = arrival_times(n, 10.0, burstiness, 42);
    ASSERT_EQ(t.size(), static_cast<size_t>(n));
    EXPECT_EQ(t.front(), 0.0);
    std::vector<double> gaps;
    for (int i = 1; i < n; ++i) {
      ASSERT_GE(t[i], t[i - 1]);
      gaps.push_back(t[i] - t[i - 1]);
    }
    double mean = 0, var = 0;
    for (double g : gaps)
      mean += g;
    mean /= static_cast<double>(gaps.size());
    for (double g : gaps)
      var += (g - mean) * (g - mean);
    var /= static_cast<double>(gaps.size());
    // Mean 1/rate; squared coefficient of variation 1/shape (Poisson: 1).
    EXPECT_NEAR(mean, 0.1, 0.004) << "burstiness " << burstiness;
    EXPECT_NEAR(var / (mean * mean), 1.0 / burstiness, 0.1 / burstiness)
        << "burstiness " << burstiness;
  }
  EXPECT_EQ(arrival_times(100, 5.0, 1.0, 7), arrival_times(100, 5.0, 1.0, 7));
  EXPECT_NE(arrival_times(100, 5.0, 1.0, 7), arrival_times(100, 5.0, 1.0, 8));
  for (double x : arrival_times(50, INFINITY, 1.0, 1))
    EXPECT_EQ(x, 0.0);
}

TEST(RandomDataset, LengthsIdsAndSharedPrefix) {
  RandomDatasetOptions o;
  o.num_prompts = 500;
  o.input_len = 100;
  o.output_len = 20;
  o.range_ratio = 0.25;
  o.prefix_len = 8;
  o.id_low = 10;
  o.id_high = 1000;
  o.seed = 3;
  const auto reqs = random_dataset(o);
  ASSERT_EQ(reqs.size(), 500u);
  int64_t shortest = 1 << 30, longest = 0;
  for (const auto& r : reqs) {
    const auto in = static_cast<int64_t>(r.prompt_ids.size()) - o.prefix_len;
    shortest = std::min(shortest, in);
    longest = std::max(longest, in);
    EXPECT_GE(in, 75);
    EXPECT_LE(in, 125);
    EXPECT_GE(r.output_len, 15);
    EXPECT_LE(r.output_len, 25);
    for (int32_t id : r.prompt_ids) {
      ASSERT_GE(id, 10);
      ASSERT_LT(id, 1000);
    }
    EXPECT_TRUE(std::equal(reqs[0].prompt_ids.begin(), reqs[0].prompt_ids.begin() + 8,
                           r.prompt_ids.begin()));
  }
  EXPECT_LT(shortest, 80);  // the range is actually used
  EXPECT_GT(longest, 120);
  o.range_ratio = 0;
  for (const auto& r : random_dataset(o)) {
    EXPECT_EQ(r.prompt_ids.size(), 108u);
    EXPECT_EQ(r.output_len, 20);
  }
  EXPECT_EQ(random_dataset(o)[7].prompt_ids, random_dataset(o)[7].prompt_ids);
}

}  // namespace
}  // namespace locus::loadgen

namespace locus::loadgen {
namespace {

// ShareGPT: the first two turns, vLLM's filters, the seed's shuffle, text prompts, and errors
// that name the file. Tokens here are whitespace-separated words.
Expected<std::vector<int32_t>> words(const std::string& text) {
  std::vector<int32_t> ids;
  bool in_word = false;
  for (char c : text) {
    if (c != ' ' && !in_word) ids.push_back(static_cast<int32_t>(ids.size()));
    in_word = c != ' ';
  }
  return ids;
}

std::filesystem::path write_file(const std::string& name, const std::string& body) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << body;
  return path;
}

TEST(ShareGpt, TurnsFiltersShuffleAndErrors) {
  const auto path = write_file("locus_sharegpt_test.json", R"([
    {"id": "a", "conversations": [{"from": "human", "value": "one two three four"},
                                  {"from": "gpt", "value": "w x y z"}]},
    {"id": "b", "conversations": [{"from": "human", "value": "too short"},
                                  {"from": "gpt", "value": "a b c d e"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "only one turn here ok"}]},
    {"id": "d", "conversations": [{"from": "human", "value": "p q r s t u"},
                                  {"from": "gpt", "value": "r1 r2 r3 r4 r5 r6 r7"},
                                  {"from": "human", "value": "ignored third turn"}]},
    {"id": "e", "conversations": [{"from": "human", "value": "fine prompt of five"},
                                  {"from": "gpt", "value": "no"}]},
    "not an object"
  ])");
  ShareGptOptions o;
  o.num_prompts = 2;
  o.seed = 1;
  auto reqs = sharegpt_dataset(path, o, words);
  ASSERT_TRUE(reqs.has_value()) << reqs.status().to_string();
  ASSERT_EQ(reqs->size(), 2u);  // a and d pass; b (2-token prompt), c (one turn), e (reply < 4)
  std::vector<std::string> texts = {(*reqs)[0].prompt_text, (*reqs)[1].prompt_text};
  std::sort(texts.begin(), texts.end());
  EXPECT_EQ(texts[0], "one two three four");
  EXPECT_EQ(texts[1], "p q r s t u");
  for (const auto& r : *reqs) {
    EXPECT_EQ(r.output_len, r.prompt_text[0] == 'o' ? 4 : 7);
    EXPECT_EQ(r.prompt_ids.size(), r.prompt_text[0] == 'o' ? 4u : 6u);
  }
  o.output_len = 3;  // fixed output: e's one-word reply no longer filters it out
  o.num_prompts = 3;
  auto fixed = sharegpt_dataset(path, o, words);
  ASSERT_TRUE(fixed.has_value()) << fixed.status().to_string();
  for (const auto& r : *fixed)
    EXPECT_EQ(r.output_len, 3);
  o.num_prompts = 4;
  auto short_of = sharegpt_dataset(path, o, words);
  ASSERT_FALSE(short_of.has_value());
  EXPECT_NE(short_of.status().message().find("only 3 conversations pass"), std::string::npos)
      << short_of.status().message();
  auto missing = sharegpt_dataset("/nonexistent/sg.json", o, words);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("/nonexistent/sg.json"), std::string::npos);
  auto bad = sharegpt_dataset(write_file("locus_sharegpt_bad.json", "{\"x\": 1}"), o, words);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("expected a JSON array"), std::string::npos);
}

TEST(PrefixRepetition, EqualSharesOfEachPrefixShuffled) {
  PrefixRepetitionOptions o;
  o.num_prompts = 40;
  o.prefix_len = 16;
  o.suffix_len = 5;
  o.num_prefixes = 4;
  o.output_len = 9;
  o.id_low = 100;
  o.id_high = 200;
  o.seed = 5;
  const auto reqs = prefix_repetition_dataset(o);
  ASSERT_EQ(reqs.size(), 40u);
  std::map<std::vector<int32_t>, int> per_prefix;
  bool shuffled = false;
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(reqs[i].prompt_ids.size(), 21u);
    EXPECT_EQ(reqs[i].output_len, 9);
    for (int32_t id : reqs[i].prompt_ids) {
      ASSERT_GE(id, 100);
      ASSERT_LT(id, 200);
    }
    std::vector<int32_t> prefix(reqs[i].prompt_ids.begin(), reqs[i].prompt_ids.begin() + 16);
    ++per_prefix[prefix];
    if (i >= 4 && prefix != std::vector<int32_t>(reqs[i - 4].prompt_ids.begin(),
                                                 reqs[i - 4].prompt_ids.begin() + 16)) {
      shuffled = true;  // not simply round-robin in order
    }
  }
  ASSERT_EQ(per_prefix.size(), 4u);
  for (const auto& [prefix, count] : per_prefix)
    EXPECT_EQ(count, 10);
  EXPECT_TRUE(shuffled);
}

}  // namespace
}  // namespace locus::loadgen

namespace locus::loadgen {
namespace {

TEST(ServerMetrics, PrefixCacheCountersSumOverLabels) {
  const std::string page =
      "# HELP vllm:prefix_cache_queries_total Prefix cache queries\n"
      "# TYPE vllm:prefix_cache_queries_total counter\n"
      "vllm:prefix_cache_queries_total{model_name=\"a\"} 804\n"
      "vllm:prefix_cache_queries_total{model_name=\"b\",engine=\"1\"} 96 1700000000\n"
      "vllm:prefix_cache_hits_total{model_name=\"a\"} 512\n"
      "vllm:prefix_cache_hits_total 8\n"
      "vllm:num_requests_running{model_name=\"a\"} 3\n";
  auto c = parse_prefix_cache_counters(page);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->queries, 900);
  EXPECT_EQ(c->hits, 520);
  EXPECT_FALSE(parse_prefix_cache_counters("vllm:num_requests_running 1\n").has_value());
  EXPECT_FALSE(parse_prefix_cache_counters("").has_value());
}

}  // namespace
}  // namespace locus::loadgen
