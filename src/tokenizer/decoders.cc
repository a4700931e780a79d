// The decoders of HF tokenizers (decoders/*.rs); see decoders.h.
#include "tokenizer/decoders.h"

#include <fmt/format.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/split.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

class ByteLevelDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    // Each token becomes the bytes its characters stand for, or its own UTF-8 when some
    // character is outside the byte map (added tokens); then one lossy UTF-8 decode of it all.
    std::string bytes;
    for (const auto& token : tokens) {
      if (!append_bytes_of_byte_level_token(bytes, token)) bytes += token;
    }
    tokens.assign(1, utf8::is_valid(bytes) ? std::move(bytes) : utf8::to_valid(bytes));
  }
  bool is_byte_level() const override { return true; }
};

// "<0x0A>" → 0x0A; -1 for anything else.
int byte_of_fallback_token(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (char c : token.substr(3, 2)) {
    int digit = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                         : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

class ByteFallbackDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string run;
    auto flush = [&] {
      if (run.empty()) return;
      if (utf8::is_valid(run)) {
        out.push_back(std::move(run));
      } else {
        // HF replaces every byte of an ill-formed run, not just its maximal subparts.
        for (size_t i = 0; i < run.size(); ++i)
          out.push_back(utf8::encode(utf8::kReplacementChar));
      }
      run.clear();
    };
    for (auto& token : tokens) {
      int byte = byte_of_fallback_token(token);
      if (byte >= 0) {
        run.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens = std::move(out);
  }
  bool can_cut_after(std::string_view token) const override {
    return byte_of_fallback_token(token) < 0;
  }
};

class FuseDecoder final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string joined;
    for (const auto& token : tokens)
      joined += token;
    tokens.assign(1, std::move(joined));
  }
};

class StripDecoder final : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    // Per token: drop up to `start` leading and `stop` trailing `content` characters.
    for (auto& token : tokens) {
      size_t begin = 0;
      for (size_t n = 0; n < start_ && begin < token.size(); ++n) {
        size_t next = begin;
        if (utf8::decode(token, next) != content_) break;
        begin = next;
      }
      size_t end = token.size();
      for (size_t n = 0; n < stop_ && end > begin; ++n) {
        size_t last = utf8::last_char_start(std::string_view(token).substr(0, end));
        if (last < begin || utf8::first_char(std::string_view(token).substr(last)) != content_)
          break;
        end = last;
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder final : public Decoder {
 public:
  ReplaceDecoder(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& token : tokens) {
      std::string out;
      size_t previous = 0;
      bool matched = false;
      // A literal or compiled regex only fails on a resource limit; the token then stays as is.
      Status status = pattern_.for_each_match(token, [&](size_t start, size_t end) {
        matched = true;
        out.append(token, previous, start - previous);
        out += content_;
        previous = end;
      });
      if (!status.is_ok() || !matched) continue;
      out.append(token, previous, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  SplitPattern pattern_;
  std::string content_;
};

class MetaspaceDecoder final : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool strip_first)
      : replacement_(replacement), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t t = 0; t < tokens.size(); ++t) {
      // HF drops every replacement character of the first token (not only a leading one) unless
      // prepend_scheme is "never"; later tokens get a space for each.
      bool drop = t == 0 && strip_first_;
      const std::string& token = tokens[t];
      std::string out;
      out.reserve(token.size());
      size_t i = 0;
      while (i < token.size()) {
        size_t start = i;
        char32_t c = utf8::decode(token, i);
        if (c == replacement_) {
          if (!drop) out += ' ';
        } else {
          out.append(token, start, i - start);
        }
      }
      tokens[t] = std::move(out);
    }
  }

 private:
  char32_t replacement_;
  bool strip_first_;
};

class SequenceDecoder final : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_)
      step->decode_chain(tokens);
  }
  bool can_cut_after(std::string_view token) const override {
    for (const auto& step : steps_) {
      if (!step->can_cut_after(token)) return false;
    }
    return true;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

Expected<std::unique_ptr<Decoder>> parse_decoder(const Json& value, std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(std::string type, json_component_type(value, path, "decoder"));
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    LOCUS_ASSIGN_OR_RETURN(char32_t content, json_char(value, "content", path));
    LOCUS_ASSIGN_OR_RETURN(int64_t start, json_int_or(value, "start", path, 0));
    LOCUS_ASSIGN_OR_RETURN(int64_t stop, json_int_or(value, "stop", path, 0));
    if (start < 0 || stop < 0) {
      return parse_error(fmt::format("{}: start and stop must not be negative", path));
    }
    return std::make_unique<StripDecoder>(content, static_cast<size_t>(start),
                                          static_cast<size_t>(stop));
  }
  if (type == "Replace") {
    const Json* pattern_json = json_member(value, "pattern");
    if (pattern_json == nullptr)
      return parse_error(fmt::format("{}: missing", json_path(path, "pattern")));
    LOCUS_ASSIGN_OR_RETURN(SplitPattern pattern,
                           SplitPattern::parse(*pattern_json, json_path(path, "pattern")));
    LOCUS_ASSIGN_OR_RETURN(std::string content, json_string(value, "content", path));
    return std::make_unique<ReplaceDecoder>(std::move(pattern), std::move(content));
  }
  if (type == "Metaspace") {
    LOCUS_ASSIGN_OR_RETURN(char32_t replacement, json_char(value, "replacement", path, U'\u2581'));
    LOCUS_ASSIGN_OR_RETURN(auto scheme, json_optional_string(value, "prepend_scheme", path));
    LOCUS_ASSIGN_OR_RETURN(auto add_prefix_space,
                           json_optional_bool(value, "add_prefix_space", path));
    bool strip_first = scheme ? *scheme != "never" : add_prefix_space.value_or(true);
    return std::make_unique<MetaspaceDecoder>(replacement, strip_first);
  }
  if (type == "Sequence") {
    std::string list_path = json_path(path, "decoders");
    const Json* list = json_member(value, "decoders");
    if (list == nullptr) return parse_error(fmt::format("{}: missing", list_path));
    if (!list->is_array()) return json_type_error(list_path, "an array", *list);
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      LOCUS_ASSIGN_OR_RETURN(auto step, parse_decoder((*list)[i], json_path(list_path, i)));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  return unsupported(fmt::format(
      "{}: decoder type '{}' is not supported (supported: ByteLevel, ByteFallback, Metaspace, "
      "Fuse, Strip, Replace, Sequence)",
      path, type));
}

}  // namespace locus::tokenizer
