#include "loadgen/agentic.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

namespace locus::loadgen {

using Json = nlohmann::json;

AgenticWorkload make_agentic_workload(const AgenticOptions& o, const Decode& decode) {
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> token(o.id_low, std::max(o.id_low, o.id_high - 1));
  auto block = [&](int64_t len) {
    std::vector<int32_t> ids(static_cast<size_t>(std::max<int64_t>(len, 0)));
    for (int32_t& t : ids)
      t = token(rng);
    return decode(ids);
  };
  AgenticWorkload w;
  w.options = o;
  w.system_prompt = block(o.system_len);
  const auto sessions = static_cast<size_t>(std::max(o.sessions, 0));
  w.first_user.resize(sessions);
  w.tool_results.resize(sessions);
  for (size_t s = 0; s < sessions; ++s) {
    w.first_user[s] = block(o.user_len);
    for (int t = 2; t <= o.turns; ++t)
      w.tool_results[s].push_back(block(o.tool_result_len));
  }
  return w;
}

AgenticConversation::AgenticConversation(const AgenticWorkload& workload, int session)
    : workload_(&workload), session_(session) {
  const AgenticOptions& o = workload.options;
  messages_.push_back({"system", workload.system_prompt});
  messages_.push_back({"user", workload.first_user[static_cast<size_t>(session)]});
  context_tokens_ = o.system_len + o.user_len;
}

std::string AgenticConversation::prompt_text() const {
  std::string text;
  for (const Message& m : messages_)
    text += m.content;
  return text;
}

Json AgenticConversation::request_body(Json base, bool chat) const {
  if (chat) {
    Json messages = Json::array();
    for (const Message& m : messages_)
      messages.push_back({{"role", m.role}, {"content", m.content}});
    base["messages"] = std::move(messages);
  } else {
    base["prompt"] = prompt_text();
  }
  return base;
}

void AgenticConversation::add_reply(const std::string& text, int64_t tokens) {
  messages_.push_back({"assistant", text});
  context_tokens_ += tokens;
  ++turn_;
  if (finished()) return;
  const auto& tools = workload_->tool_results[static_cast<size_t>(session_)];
  messages_.push_back({"user", tools[static_cast<size_t>(turn_ - 2)]});
  context_tokens_ += workload_->options.tool_result_len;
}

AgenticTurnStats agentic_turn_stats(std::span<const RequestRecord> records, int turns,
                                    int64_t first_edge) {
  AgenticTurnStats stats;
  first_edge = std::max<int64_t>(first_edge, 1);
  // Bucket b holds [edge(b-1), edge(b)) with edge(-1) = 0 and edge(b) = first_edge * 2^b.
  auto bucket_of = [&](int64_t tokens) {
    size_t b = 0;
    for (int64_t hi = first_edge; tokens >= hi; hi *= 2)
      ++b;
    return b;
  };
  std::vector<std::vector<double>> ttft_by_bucket;
  std::vector<double> ttft_sum(static_cast<size_t>(std::max(turns, 0)), 0.0);
  std::vector<double> prompt_sum(ttft_sum.size(), 0.0);
  std::vector<int64_t> count(ttft_sum.size(), 0);
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (!r.success || turns <= 0) continue;
    const size_t b = bucket_of(r.prompt_tokens);
    if (ttft_by_bucket.size() <= b) ttft_by_bucket.resize(b + 1);
    ttft_by_bucket[b].push_back(r.ttft_s * 1e3);
    const size_t t = i % static_cast<size_t>(turns);
    ttft_sum[t] += r.ttft_s * 1e3;
    prompt_sum[t] += static_cast<double>(r.prompt_tokens);
    ++count[t];
  }
  const double percentiles[] = {50, 90};
  int64_t lo = 0, hi = first_edge;
  for (std::vector<double>& ttft : ttft_by_bucket) {
    if (!ttft.empty()) {
      stats.by_context.push_back({lo, hi, distribution(std::move(ttft), percentiles)});
    }
    lo = hi;
    hi *= 2;
  }
  for (size_t t = 0; t < count.size(); ++t) {
    TurnTtft turn;
    turn.turn = static_cast<int>(t) + 1;
    turn.count = count[t];
    if (count[t] > 0) {
      turn.mean_ttft_ms = ttft_sum[t] / static_cast<double>(count[t]);
      turn.mean_prompt_tokens = prompt_sum[t] / static_cast<double>(count[t]);
    }
    stats.by_turn.push_back(turn);
  }
  return stats;
}

namespace {

double percentile_of(const Distribution& d, double p) {
  for (const auto& [q, v] : d.percentiles) {
    if (q == p) return v;
  }
  return 0.0;
}

}  // namespace

std::string format_agentic_stats(const AgenticTurnStats& stats) {
  std::string s = fmt::format("{:-^50}\n", "TTFT by context length (prompt tokens)");
  s += fmt::format("{:<17} {:>6} {:>8} {:>8} {:>8}\n", "prompt tokens", "count", "mean ms",
                   "p50 ms", "p90 ms");
  for (const ContextBucket& b : stats.by_context) {
    s += fmt::format("{:<17} {:>6} {:>8.2f} {:>8.2f} {:>8.2f}\n",
                     fmt::format("[{}, {})", b.min_prompt_tokens, b.max_prompt_tokens),
                     b.ttft_ms.count, b.ttft_ms.mean, percentile_of(b.ttft_ms, 50),
                     percentile_of(b.ttft_ms, 90));
  }
  s += fmt::format("{:-^50}\n", "TTFT by turn");
  s += fmt::format("{:<6} {:>6} {:>12} {:>18}\n", "turn", "count", "mean TTFT ms",
                   "mean prompt tokens");
  for (const TurnTtft& t : stats.by_turn) {
    s += fmt::format("{:<6} {:>6} {:>12.2f} {:>18.1f}\n", t.turn, t.count, t.mean_ttft_ms,
                     t.mean_prompt_tokens);
  }
  return s;
}

Json agentic_stats_json(const AgenticTurnStats& stats) {
  Json by_context = Json::array();
  for (const ContextBucket& b : stats.by_context) {
    by_context.push_back({{"min_prompt_tokens", b.min_prompt_tokens},
                          {"max_prompt_tokens", b.max_prompt_tokens},
                          {"count", b.ttft_ms.count},
                          {"mean_ttft_ms", b.ttft_ms.mean},
                          {"p50_ttft_ms", percentile_of(b.ttft_ms, 50)},
                          {"p90_ttft_ms", percentile_of(b.ttft_ms, 90)}});
  }
  Json by_turn = Json::array();
  for (const TurnTtft& t : stats.by_turn) {
    by_turn.push_back({{"turn", t.turn},
                       {"count", t.count},
                       {"mean_ttft_ms", t.mean_ttft_ms},
                       {"mean_prompt_tokens", t.mean_prompt_tokens}});
  }
  return {{"ttft_by_context", std::move(by_context)}, {"ttft_by_turn", std::move(by_turn)}};
}

}  // namespace locus::loadgen
