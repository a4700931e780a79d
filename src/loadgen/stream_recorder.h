// Turns one streamed OpenAI response into a RequestRecord: fed the response body as it arrives
// (any split of the bytes) with the time each piece arrived, it parses the server-sent events,
// times the chunks that carry content (completions `text`, chat `delta.content` or
// `delta.reasoning_content`), reads `usage` when the server sends it, and notes error events.
// The clock is the caller's, so tests replay scripted timings exactly.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "loadgen/serve_metrics.h"

namespace locus::loadgen {

class StreamRecorder {
 public:
  // start_s: when the request was sent; prompt_tokens: the request's own count (kept unless the
  // server's usage says otherwise); keep_text: collect the reply's text in the record.
  StreamRecorder(double start_s, int64_t prompt_tokens, bool keep_text = false);

  // Bytes of the response body received at time now_s (seconds, the same clock as start_s).
  void feed(std::string_view bytes, double now_s);
  // The body ended at now_s (connection closed or the message complete). Returns the record:
  // success when a `[DONE]` or a finish_reason arrived, no error event came, and at least one
  // content chunk was seen.
  RequestRecord finish(double now_s);
  // A failure before or instead of a stream (HTTP status, transport error).
  RequestRecord fail(std::string error);

 private:
  void on_event(std::string_view data, double now_s);

  RequestRecord record_;
  std::string line_;  // the partial line carried between feeds
  std::string data_;  // the data of the event being assembled
  int64_t content_chunks_ = 0;
  bool usage_seen_ = false;
  bool done_ = false;
  bool finished_reason_ = false;
  bool keep_text_ = false;
  double last_content_s_ = 0;
};

}  // namespace locus::loadgen
