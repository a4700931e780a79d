// The agentic workload of `locus bench serve` (#8): the drawn text (one shared system prompt),
// the context growth of a session (turn k = turn k-1 + reply + tool result, in characters and in
// tokens), the TTFT tables on scripted records, and whole runs against a fake OpenAI server on
// 127.0.0.1 that records what each turn sent (replies, failures, think time, concurrency cap).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "loadgen/agentic.h"
#include "loadgen/serve_bench.h"
#include "loadgen/stream_recorder.h"
#include "server/http_server.h"

namespace locus::loadgen {
namespace {

using Json = nlohmann::json;
constexpr double kEps = 1e-9;

// One character per token id, so character counts are token counts.
std::string decode_letters(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids)
    s += static_cast<char>('a' + id % 26);
  return s;
}

AgenticOptions small_options(int sessions, int turns) {
  AgenticOptions o;
  o.sessions = sessions;
  o.turns = turns;
  o.system_len = 40;
  o.user_len = 7;
  o.tool_result_len = 11;
  o.output_len = 5;
  o.id_low = 0;
  o.id_high = 26;
  o.seed = 3;
  return o;
}

TEST(StreamRecorder, KeepsTheReplyTextOnlyWhenAsked) {
  const std::string chat_events[] = {
      R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
      R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})",
      R"({"choices":[{"index":0,"delta":{"content":"Hello"}}]})",
      R"({"choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"length"}]})",
      "[DONE]"};
  for (bool keep : {true, false}) {
    StreamRecorder rec(0, 1, keep);
    double t = 0.1;
    for (const std::string& e : chat_events)
      rec.feed("data: " + e + "\n\n", t += 0.1);
    const RequestRecord r = rec.finish(t);
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.generated_text, keep ? "Hello world" : "");  // reasoning is not sent back
  }
  StreamRecorder completions(0, 1, true);
  completions.feed("data: {\"choices\":[{\"index\":0,\"text\":\"ab\"}]}\n\n", 0.1);
  completions.feed(
      "data: {\"choices\":[{\"index\":0,\"text\":\"c\",\"finish_reason\":\"stop\"}]}\n\n", 0.2);
  EXPECT_EQ(completions.finish(0.2).generated_text, "abc");
}

TEST(AgenticWorkload, OneSharedSystemPromptAndExactBlockLengths) {
  const AgenticWorkload w = make_agentic_workload(small_options(3, 4), decode_letters);
  EXPECT_EQ(w.system_prompt.size(), 40u);
  ASSERT_EQ(w.first_user.size(), 3u);
  ASSERT_EQ(w.tool_results.size(), 3u);
  for (size_t s = 0; s < 3; ++s) {
    EXPECT_EQ(w.first_user[s].size(), 7u);
    ASSERT_EQ(w.tool_results[s].size(), 3u);  // turns 2..4
    for (const std::string& t : w.tool_results[s])
      EXPECT_EQ(t.size(), 11u);
  }
  EXPECT_NE(w.first_user[0], w.first_user[1]);  // sessions diverge after the system prompt
  // Every session's turn 1 starts with the same system message, byte for byte.
  const Json base = {{"model", "m"}};
  for (bool chat : {true, false}) {
    const Json b0 = AgenticConversation(w, 0).request_body(base, chat);
    const Json b2 = AgenticConversation(w, 2).request_body(base, chat);
    if (chat) {
      EXPECT_EQ(b0["messages"][0], b2["messages"][0]);
      EXPECT_EQ(b0["messages"][0]["role"], "system");
      EXPECT_EQ(b0["messages"][0]["content"], w.system_prompt);
    } else {
      EXPECT_EQ(b0["prompt"].get<std::string>().substr(0, 40), w.system_prompt);
      EXPECT_EQ(b2["prompt"].get<std::string>().substr(0, 40), w.system_prompt);
    }
  }
  // Deterministic in the seed.
  EXPECT_EQ(make_agentic_workload(small_options(3, 4), decode_letters).tool_results,
            w.tool_results);
}

TEST(AgenticConversation, EachTurnIsThePreviousContextPlusReplyPlusToolResult) {
  const AgenticWorkload w = make_agentic_workload(small_options(2, 3), decode_letters);
  AgenticConversation c(w, 1);
  EXPECT_EQ(c.turn(), 1);
  ASSERT_EQ(c.messages().size(), 2u);
  EXPECT_EQ(c.prompt_text(), w.system_prompt + w.first_user[1]);
  EXPECT_EQ(c.context_tokens(), 40 + 7);

  std::string previous = c.prompt_text();
  int64_t previous_tokens = c.context_tokens();
  const std::string replies[] = {"first reply", "second", "third"};
  const int64_t reply_tokens[] = {4, 2, 3};
  for (int k = 0; k < 2; ++k) {
    c.add_reply(replies[k], reply_tokens[k]);
    EXPECT_EQ(c.turn(), k + 2);
    const std::string& tool = w.tool_results[1][static_cast<size_t>(k)];
    EXPECT_EQ(c.prompt_text(), previous + replies[k] + tool);
    EXPECT_EQ(c.context_tokens(), previous_tokens + reply_tokens[k] + 11);
    const auto& m = c.messages();
    ASSERT_EQ(m.size(), 2u + 2u * static_cast<size_t>(k + 1));
    EXPECT_EQ(m[m.size() - 2].role, "assistant");
    EXPECT_EQ(m[m.size() - 2].content, replies[k]);
    EXPECT_EQ(m.back().role, "user");  // the tool result (see agentic.h)
    EXPECT_EQ(m.back().content, tool);
    previous = c.prompt_text();
    previous_tokens = c.context_tokens();
  }
  const Json chat = c.request_body({{"max_completion_tokens", 5}}, true);
  EXPECT_EQ(chat["max_completion_tokens"], 5);
  ASSERT_EQ(chat["messages"].size(), 6u);
  EXPECT_EQ(chat["messages"][4]["content"], replies[1]);
  EXPECT_EQ(c.request_body({}, false)["prompt"], c.prompt_text());
  c.add_reply(replies[2], reply_tokens[2]);  // the last turn's reply adds no tool result
  EXPECT_TRUE(c.finished());
  EXPECT_EQ(c.messages().back().role, "assistant");
}

RequestRecord scripted(int64_t prompt_tokens, double ttft_ms) {
  RequestRecord r;
  r.success = true;
  r.prompt_tokens = prompt_tokens;
  r.ttft_s = ttft_ms / 1e3;
  return r;
}

TEST(AgenticTurnStats, BucketsByContextLengthAndMeansByTurnExactly) {
  // Two sessions of three turns, [session][turn]; session 1's last turn failed.
  std::vector<RequestRecord> records = {scripted(50, 10), scripted(150, 20), scripted(250, 40),
                                        scripted(60, 30), scripted(100, 50), RequestRecord{}};
  const AgenticTurnStats s = agentic_turn_stats(records, 3, /*first_edge=*/100);
  ASSERT_EQ(s.by_context.size(), 3u);
  const ContextBucket& b0 = s.by_context[0];
  EXPECT_EQ(b0.min_prompt_tokens, 0);
  EXPECT_EQ(b0.max_prompt_tokens, 100);
  EXPECT_EQ(b0.ttft_ms.count, 2);
  EXPECT_NEAR(b0.ttft_ms.mean, 20, kEps);
  EXPECT_NEAR(b0.ttft_ms.percentiles[0].second, 20, kEps);  // p50
  EXPECT_NEAR(b0.ttft_ms.percentiles[1].second, 28, kEps);  // p90: 10 + 0.9 * 20
  const ContextBucket& b1 = s.by_context[1];                // 100 itself is in [100, 200)
  EXPECT_EQ(b1.min_prompt_tokens, 100);
  EXPECT_EQ(b1.max_prompt_tokens, 200);
  EXPECT_EQ(b1.ttft_ms.count, 2);
  EXPECT_NEAR(b1.ttft_ms.mean, 35, kEps);
  EXPECT_NEAR(b1.ttft_ms.percentiles[1].second, 47, kEps);
  const ContextBucket& b2 = s.by_context[2];
  EXPECT_EQ(b2.min_prompt_tokens, 200);
  EXPECT_EQ(b2.max_prompt_tokens, 400);
  EXPECT_EQ(b2.ttft_ms.count, 1);
  EXPECT_NEAR(b2.ttft_ms.percentiles[1].second, 40, kEps);

  ASSERT_EQ(s.by_turn.size(), 3u);
  EXPECT_EQ(s.by_turn[0].count, 2);
  EXPECT_NEAR(s.by_turn[0].mean_ttft_ms, 20, kEps);
  EXPECT_NEAR(s.by_turn[0].mean_prompt_tokens, 55, kEps);
  EXPECT_EQ(s.by_turn[1].count, 2);
  EXPECT_NEAR(s.by_turn[1].mean_ttft_ms, 35, kEps);
  EXPECT_NEAR(s.by_turn[1].mean_prompt_tokens, 125, kEps);
  EXPECT_EQ(s.by_turn[2].count, 1);
  EXPECT_NEAR(s.by_turn[2].mean_ttft_ms, 40, kEps);

  const Json j = agentic_stats_json(s);
  ASSERT_EQ(j["ttft_by_context"].size(), 3u);
  EXPECT_EQ(j["ttft_by_context"][1]["min_prompt_tokens"], 100);
  EXPECT_NEAR(j["ttft_by_context"][0]["p90_ttft_ms"].get<double>(), 28, kEps);
  EXPECT_EQ(j["ttft_by_turn"][2]["turn"], 3);
  EXPECT_EQ(j["ttft_by_turn"][2]["count"], 1);
  const std::string table = format_agentic_stats(s);
  EXPECT_NE(table.find("[100, 200)"), std::string::npos) << table;
}

// A fake OpenAI server: streams "R<n>" (n counts requests) in two chunks, reports the prompt's
// character count as prompt_tokens, and records each body. fail_if decides a 500 instead.
struct FakeServer {
  std::mutex mutex;
  std::vector<Json> bodies;
  std::function<bool(const Json&)> fail_if = [](const Json&) { return false; };
  std::chrono::milliseconds delay{0};  // before the first chunk
  std::unique_ptr<http::HttpServer> server;

  void start() {
    http::Router router;
    for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
      const bool chat = std::string(path) == "/v1/chat/completions";
      router.add("POST", path,
                 [this, chat](const http::Request& request,
                              http::Responder& responder) -> boost::asio::awaitable<void> {
                   const Json body = Json::parse(request.body);
                   int n = 0;
                   bool fail = false;
                   {
                     std::lock_guard lock(mutex);
                     n = static_cast<int>(bodies.size());
                     bodies.push_back(body);
                     fail = fail_if(body);
                   }
                   if (fail) {
                     co_await responder.send_error(500, "scripted failure");
                     co_return;
                   }
                   size_t prompt_chars = 0;
                   if (chat) {
                     for (const Json& m : body["messages"])
                       prompt_chars += m["content"].get_ref<const std::string&>().size();
                   } else {
                     prompt_chars = body["prompt"].get_ref<const std::string&>().size();
                   }
                   const std::string reply = fmt::format("R{}", n);
                   auto chunk = [&](const std::string& text, const char* finish) {
                     Json choice = {{"index", 0}, {"finish_reason", nullptr}};
                     if (chat) {
                       choice["delta"] = {{"content", text}};
                     } else {
                       choice["text"] = text;
                     }
                     if (finish != nullptr) choice["finish_reason"] = finish;
                     return "data: " + Json{{"choices", {choice}}}.dump() + "\n\n";
                   };
                   const std::string usage =
                       "data: " +
                       Json{
                           {"choices", Json::array()},
                           {"usage",
                            {{"prompt_tokens", prompt_chars}, {"completion_tokens", reply.size()}}}}
                           .dump() +
                       "\n\n";
                   std::string first = chunk(reply.substr(0, 1), nullptr);
                   std::string second = chunk(reply.substr(1), "length");
                   std::string done = "data: [DONE]\n\n";
                   if (delay.count() > 0) {
                     boost::asio::steady_timer timer(responder.executor(), delay);
                     co_await timer.async_wait(boost::asio::use_awaitable);
                   }
                   co_await responder.begin_stream(200);
                   co_await responder.write(std::move(first));
                   co_await responder.write(std::move(second));
                   std::string usage_copy = usage;
                   co_await responder.write(std::move(usage_copy));
                   co_await responder.write(std::move(done));
                   co_await responder.end_stream();
                 });
    }
    http::ServerOptions options;
    options.host = "127.0.0.1";
    options.port = 0;
    options.io_threads = 1;
    auto started = http::HttpServer::start(options, std::move(router));
    ASSERT_TRUE(started.has_value()) << started.status().to_string();
    server = std::move(*started);
  }

  ServeBenchOptions bench_options(const std::string& endpoint,
                                  std::shared_ptr<const AgenticWorkload> workload) const {
    ServeBenchOptions o;
    o.server = {"127.0.0.1", std::to_string(server->port()), ""};
    o.endpoint = endpoint;
    o.model = "fake";
    o.agentic = std::move(workload);
    o.progress = false;
    o.percentiles = {50, 99};
    return o;
  }
};

// The prompt of a recorded body as one text (chat: every message's content).
std::string sent_text(const Json& body) {
  if (!body.contains("messages")) return body["prompt"];
  std::string text;
  for (const Json& m : body["messages"])
    text += m["content"].get<std::string>();
  return text;
}

TEST(AgenticRun, EveryTurnResendsTheContextWithTheActualReplyOnBothEndpoints) {
  for (const std::string endpoint : {"/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(endpoint);
    FakeServer fake;
    fake.start();
    auto workload = std::make_shared<const AgenticWorkload>(
        make_agentic_workload(small_options(2, 3), decode_letters));
    const ServeBenchOptions o = fake.bench_options(endpoint, workload);
    auto result = run_serve_bench(o);
    ASSERT_TRUE(result.has_value()) << result.status().to_string();
    EXPECT_EQ(result->metrics.completed, 6);
    EXPECT_EQ(result->metrics.failed, 0)
        << (result->first_errors.empty() ? "" : result->first_errors[0]);
    ASSERT_EQ(fake.bodies.size(), 6u);

    // Group the received bodies by session (its first user message), in arrival order.
    std::map<int, std::vector<Json>> by_session;
    for (const Json& body : fake.bodies) {
      const std::string text = sent_text(body);
      for (int s = 0; s < 2; ++s) {
        if (text.compare(40, 7, workload->first_user[static_cast<size_t>(s)]) == 0) {
          by_session[s].push_back(body);
        }
      }
    }
    for (int s = 0; s < 2; ++s) {
      ASSERT_EQ(by_session[s].size(), 3u);
      int64_t expected_tokens = 40 + 7;
      for (int t = 0; t < 3; ++t) {
        const RequestRecord& r = result->records[static_cast<size_t>(s * 3 + t)];
        ASSERT_TRUE(r.success) << r.error;
        EXPECT_TRUE(r.generated_text.empty());  // kept for the next turn, then dropped
        const Json& body = by_session[s][static_cast<size_t>(t)];
        EXPECT_EQ(body[endpoint == "/v1/completions" ? "max_tokens" : "max_completion_tokens"], 5);
        const std::string now = sent_text(body);
        if (t > 0) {
          // Turn t + 1 = turn t's context + the server's reply ("R<n>", whatever n it had) +
          // the tool result.
          const std::string before = sent_text(by_session[s][static_cast<size_t>(t - 1)]);
          ASSERT_GT(now.size(), before.size());
          ASSERT_EQ(now.compare(0, before.size(), before), 0) << "turn " << t + 1;
          const std::string& tool = workload->tool_results[static_cast<size_t>(s)][t - 1];
          const std::string reply =
              now.substr(before.size(), now.size() - before.size() - tool.size());
          EXPECT_EQ(reply.front(), 'R');
          EXPECT_EQ(now.substr(now.size() - tool.size()), tool);
          if (body.contains("messages")) {
            const Json& m = body["messages"];
            ASSERT_EQ(m.size(), 2u + 2u * static_cast<size_t>(t));
            EXPECT_EQ(m[m.size() - 2]["role"], "assistant");
            EXPECT_EQ(m[m.size() - 2]["content"], reply);
            EXPECT_EQ(m.back()["role"], "user");
          }
          expected_tokens += static_cast<int64_t>(reply.size()) + 11;
        }
        EXPECT_EQ(static_cast<int64_t>(now.size()), expected_tokens);
        // The server counted the prompt's characters: one per token drawn or replied.
        EXPECT_EQ(r.prompt_tokens, expected_tokens);
      }
    }
    ASSERT_TRUE(result->agentic.has_value());
    ASSERT_EQ(result->agentic->by_turn.size(), 3u);
    for (const TurnTtft& t : result->agentic->by_turn)
      EXPECT_EQ(t.count, 2);
    const Json doc = serve_result_json(*result);
    EXPECT_EQ(doc["completed"], 6);
    EXPECT_EQ(doc["agentic"]["ttft_by_turn"].size(), 3u);
    EXPECT_EQ(doc["agentic"]["ttft_by_context"][0]["count"], 6);  // all under 1024 tokens
  }
}

TEST(AgenticRun, AFailedTurnEndsItsSessionAndTheRestCountAsNotSent) {
  FakeServer fake;
  auto workload = std::make_shared<const AgenticWorkload>(
      make_agentic_workload(small_options(2, 3), decode_letters));
  const std::string doomed = workload->first_user[1];
  fake.fail_if = [doomed](const Json& body) {
    return body["messages"].size() == 4 && body["messages"][1]["content"] == doomed;
  };
  fake.start();
  auto result = run_serve_bench(fake.bench_options("/v1/chat/completions", workload));
  ASSERT_TRUE(result.has_value()) << result.status().to_string();
  EXPECT_EQ(result->metrics.completed, 4);
  EXPECT_EQ(result->metrics.failed, 2);
  EXPECT_EQ(fake.bodies.size(), 5u);  // session 1's third turn was never sent
  EXPECT_TRUE(result->records[3].success);
  EXPECT_EQ(result->records[4].error.rfind("HTTP 500", 0), 0u) << result->records[4].error;
  EXPECT_EQ(result->records[5].error, "not sent: an earlier turn of its session failed");
  EXPECT_EQ(result->first_errors.size(), 2u);
  EXPECT_EQ(result->agentic->by_turn[2].count, 1);
}

TEST(AgenticRun, ThinkTimeSeparatesTurnsAndMaxConcurrencyCapsRequests) {
  FakeServer fake;
  fake.start();
  AgenticOptions ao = small_options(3, 2);
  ao.think_time_s = 0.05;
  auto workload =
      std::make_shared<const AgenticWorkload>(make_agentic_workload(ao, decode_letters));
  ServeBenchOptions o = fake.bench_options("/v1/completions", workload);
  o.max_concurrency = 1;
  auto result = run_serve_bench(o);
  ASSERT_TRUE(result.has_value()) << result.status().to_string();
  ASSERT_EQ(result->metrics.completed, 6);
  EXPECT_EQ(result->metrics.peak_concurrency, 1);
  for (int s = 0; s < 3; ++s) {
    const RequestRecord& first = result->records[static_cast<size_t>(2 * s)];
    const RequestRecord& second = result->records[static_cast<size_t>(2 * s + 1)];
    // A timer never fires early: the next turn leaves at least the think time after the reply.
    EXPECT_GE(second.start_s, first.start_s + first.latency_s + 0.05);
  }
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Sessions waiting side by side for a concurrency slot sleep until a request finishes. (They once
// re-armed the shared wake-up timer, which cancelled each other's waits: a busy loop that took a
// core from the server under test.)
TEST(AgenticRun, SessionsWaitingForASlotDoNotSpin) {
  FakeServer fake;
  fake.delay = std::chrono::milliseconds(40);
  fake.start();
  auto workload = std::make_shared<const AgenticWorkload>(
      make_agentic_workload(small_options(6, 1), decode_letters));
  ServeBenchOptions o = fake.bench_options("/v1/completions", workload);
  o.max_concurrency = 1;
  const double cpu_before = thread_cpu_seconds();
  auto result = run_serve_bench(o);
  const double cpu = thread_cpu_seconds() - cpu_before;
  ASSERT_TRUE(result.has_value()) << result.status().to_string();
  ASSERT_EQ(result->metrics.completed, 6);
  // Six replies of >= 40 ms one after another: >= 240 ms of waiting, nearly all of it asleep.
  EXPECT_GE(result->metrics.duration_s, 0.24);
  EXPECT_LT(cpu, 0.5 * result->metrics.duration_s) << "the I/O thread was busy while waiting";
}

}  // namespace
}  // namespace locus::loadgen
