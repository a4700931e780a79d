// The `agentic` workload of `locus bench serve` (#8): many sessions, each a multi-turn loop in
// which every turn re-sends the whole growing context and waits for the reply before the next.
// This file is the pure part (the text, the context, the per-turn statistics); the session
// coroutines live in agentic_session.cc. It never talks to a server.
//
// Turn 1 sends the system prompt (a block standing in for instructions + tool definitions,
// identical in every session so a prefix cache can share it) and the session's first user
// message. Turn k > 1 sends turn k-1's context + the assistant's actual reply + a new tool result.
// Chat: the tool result is a "user" message: a "tool" message needs the tool_call_id of an
// assistant tool call, which vLLM's and llama.cpp's templates reject or mangle without one.
// Completions: the same pieces concatenated with nothing between them, so turn k's prompt is
// exactly turn k-1's prompt + reply + tool result.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "loadgen/serve_metrics.h"

namespace locus::loadgen {

struct AgenticOptions {
  int sessions = 8;
  int turns = 10;
  int64_t system_len = 2000;      // tokens of the shared system prompt + tool definitions
  int64_t user_len = 100;         // tokens of each session's first user message
  int64_t tool_result_len = 500;  // tokens of the tool result each later turn adds
  int64_t output_len = 200;       // max tokens per reply
  double think_time_s = 0;        // pause between a reply and the next turn
  // Token ids are drawn from [id_low, id_high), ordinary vocabulary entries, then decoded.
  int32_t id_low = 0;
  int32_t id_high = 0;
  uint64_t seed = 0;
};

// Token ids -> text (the caller's tokenizer).
using Decode = std::function<std::string(const std::vector<int32_t>&)>;

// Every text a run sends except the replies, drawn before the run so that the I/O thread never
// decodes (decoding a long block would delay the timestamps of every other stream).
struct AgenticWorkload {
  AgenticOptions options;
  std::string system_prompt;
  std::vector<std::string> first_user;                 // [session]
  std::vector<std::vector<std::string>> tool_results;  // [session][turn - 2], turns 2..T
};

AgenticWorkload make_agentic_workload(const AgenticOptions& options, const Decode& decode);

// One session's growing context.
class AgenticConversation {
 public:
  struct Message {
    std::string role;  // system | user | assistant
    std::string content;
  };

  AgenticConversation(const AgenticWorkload& workload, int session);

  int session() const { return session_; }
  int turn() const { return turn_; }  // 1-based: the turn the next request is
  bool finished() const { return turn_ > workload_->options.turns; }
  const std::vector<Message>& messages() const { return messages_; }
  // The completions prompt: every message's content concatenated.
  std::string prompt_text() const;
  // Tokens drawn for the context + the replies' token counts: what the context holds before a
  // chat template, as the client counts it (the server's usage is the exact count).
  int64_t context_tokens() const { return context_tokens_; }

  // The next turn's request: `base` (model, stream, max tokens, ...) + messages or prompt.
  nlohmann::json request_body(nlohmann::json base, bool chat) const;

  // The reply to the current turn arrived: append it and, unless that was the last turn, the
  // next turn's tool result.
  void add_reply(const std::string& text, int64_t tokens);

 private:
  const AgenticWorkload* workload_;
  int session_;
  int turn_ = 1;
  std::vector<Message> messages_;
  int64_t context_tokens_ = 0;
};

// TTFT against context length, from the records of an agentic run laid out [session][turn]
// (records[s * turns + t] is turn t + 1 of session s). Failed records are left out.
struct ContextBucket {
  int64_t min_prompt_tokens = 0;  // [min, max): prompt tokens as the server counted them
  int64_t max_prompt_tokens = 0;
  Distribution ttft_ms;  // with percentiles 50 and 90
};
struct TurnTtft {
  int turn = 0;  // 1-based
  int64_t count = 0;
  double mean_ttft_ms = 0;
  double mean_prompt_tokens = 0;
};
struct AgenticTurnStats {
  std::vector<ContextBucket> by_context;  // only buckets that hold a record
  std::vector<TurnTtft> by_turn;          // every turn, count 0 where none succeeded
};

// Bucket edges double from first_edge: [0, e), [e, 2e), [2e, 4e), ...
AgenticTurnStats agentic_turn_stats(std::span<const RequestRecord> records, int turns,
                                    int64_t first_edge = 1024);

std::string format_agentic_stats(const AgenticTurnStats& stats);
nlohmann::json agentic_stats_json(const AgenticTurnStats& stats);

}  // namespace locus::loadgen
