#include "loadgen/stream_recorder.h"

#include <fmt/format.h>

namespace locus::loadgen {

using Json = nlohmann::json;

StreamRecorder::StreamRecorder(double start_s, int64_t prompt_tokens, bool keep_text)
    : keep_text_(keep_text) {
  record_.start_s = start_s;
  record_.prompt_tokens = prompt_tokens;
}

void StreamRecorder::feed(std::string_view bytes, double now_s) {
  // SSE: lines end in \n (or \r\n); "data: ..." lines accumulate; a blank line ends an event.
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {
      if (!data_.empty()) on_event(data_, now_s);
      data_.clear();
    } else if (line_.starts_with("data:")) {
      std::string_view d(line_);
      d.remove_prefix(5);
      if (!d.empty() && d.front() == ' ') d.remove_prefix(1);
      if (!data_.empty()) data_ += '\n';
      data_ += d;
    }  // comments (":") and other fields are ignored
    line_.clear();
  }
}

void StreamRecorder::on_event(std::string_view data, double now_s) {
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  const Json chunk = Json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    if (record_.error.empty()) record_.error = fmt::format("unparsable event: {}", data);
    return;
  }
  if (chunk.contains("error")) {
    if (record_.error.empty())
      record_.error = fmt::format("error event: {}", chunk["error"].dump());
    return;
  }
  bool content = false;
  if (auto it = chunk.find("choices"); it != chunk.end() && it->is_array()) {
    for (const Json& choice : *it) {
      if (!choice.is_object()) continue;
      auto non_empty = [](const Json& obj, const char* key) {
        auto f = obj.find(key);
        return f != obj.end() && f->is_string() && !f->get_ref<const std::string&>().empty();
      };
      if (non_empty(choice, "text")) {
        content = true;
        if (keep_text_) record_.generated_text += choice["text"].get_ref<const std::string&>();
      }
      if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
        if (non_empty(*delta, "content")) {
          content = true;
          // Reasoning is timed as content but not kept: clients do not send it back.
          if (keep_text_)
            record_.generated_text += (*delta)["content"].get_ref<const std::string&>();
        }
        if (non_empty(*delta, "reasoning_content")) content = true;
      }
      if (auto fr = choice.find("finish_reason"); fr != choice.end() && fr->is_string()) {
        finished_reason_ = true;
      }
    }
  }
  if (auto u = chunk.find("usage"); u != chunk.end() && u->is_object()) {
    if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_integer()) {
      record_.output_tokens = c->get<int64_t>();
      usage_seen_ = true;
    }
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer()) {
      record_.prompt_tokens = p->get<int64_t>();
    }
  }
  if (!content) return;
  if (content_chunks_ == 0) {
    record_.ttft_s = now_s - record_.start_s;
  } else {
    record_.itl_s.push_back(now_s - last_content_s_);
  }
  ++content_chunks_;
  last_content_s_ = now_s;
}

RequestRecord StreamRecorder::finish(double now_s) {
  if (!line_.empty()) feed("\n", now_s);  // a last line without its newline
  if (!data_.empty()) {
    on_event(data_, now_s);
    data_.clear();
  }
  if (!usage_seen_) record_.output_tokens = content_chunks_;
  record_.latency_s = content_chunks_ > 0 ? last_content_s_ - record_.start_s : 0.0;
  if (record_.error.empty() && content_chunks_ == 0) record_.error = "no content in the stream";
  if (record_.error.empty() && !done_ && !finished_reason_) {
    record_.error = "the stream ended without [DONE] or a finish_reason";
  }
  record_.success = record_.error.empty();
  return record_;
}

RequestRecord StreamRecorder::fail(std::string error) {
  record_.success = false;
  record_.error = std::move(error);
  return record_;
}

}  // namespace locus::loadgen
