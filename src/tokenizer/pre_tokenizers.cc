// The pre-tokenizers of HF tokenizers (pre_tokenizers/*.rs); see pre_tokenizers.h.
#include "tokenizer/pre_tokenizers.h"

#include <fmt/format.h>

#include <optional>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/split.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

// A step after ByteLevel sees HF's mapped characters; materialize them for it.
PreToken readable(const PreToken& piece, std::string& buffer) {
  if (!piece.byte_level) return piece;
  buffer.clear();
  append_byte_level_chars(buffer, piece.text);
  return PreToken{buffer, piece.at_original_start, false};
}

// Hands text[start, end) on, unless empty (HF drops empty splits).
void emit(const PreToken& piece, size_t start, size_t end, bool byte_level, PreTokenSink sink) {
  if (start >= end) return;
  sink(PreToken{piece.text.substr(start, end - start), piece.at_original_start && start == 0,
                byte_level});
}

void emit_pieces(const PreToken& piece, std::vector<Span>& spans, SplitBehavior behavior,
                 bool invert, bool byte_level, PreTokenSink sink) {
  std::vector<std::pair<size_t, size_t>> pieces;
  pieces_for_behavior(spans, behavior, invert, pieces);
  for (const auto& [start, end] : pieces)
    emit(piece, start, end, byte_level, sink);
}

class SplitPreTokenizer final : public PreTokenizer {
 public:
  SplitPreTokenizer(SplitPattern pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  Status pre_tokenize(const PreToken& input, PreTokenSink sink) const override {
    std::string buffer;
    PreToken piece = readable(input, buffer);
    // Isolated keeps every span and Removed one kind of them: stream those without building the
    // partition (this is the hot path of every byte-level tokenizer).
    if (behavior_ == SplitBehavior::kIsolated || behavior_ == SplitBehavior::kRemoved) {
      bool keep_gaps = behavior_ == SplitBehavior::kIsolated || !invert_;
      bool keep_matches = behavior_ == SplitBehavior::kIsolated || invert_;
      size_t previous = 0;
      LOCUS_RETURN_IF_ERROR(pattern_.for_each_match(piece.text, [&](size_t start, size_t end) {
        if (keep_gaps) emit(piece, previous, start, false, sink);
        if (keep_matches) emit(piece, start, end, false, sink);
        previous = end;
      }));
      if (keep_gaps) emit(piece, previous, piece.text.size(), false, sink);
      return Status::ok();
    }
    std::vector<Span> spans;
    LOCUS_RETURN_IF_ERROR(pattern_.find_spans(piece.text, spans));
    emit_pieces(piece, spans, behavior_, invert_, false, sink);
    return Status::ok();
  }

 private:
  SplitPattern pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer final : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::optional<SplitPattern> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}

  Status pre_tokenize(const PreToken& input, PreTokenSink sink) const override {
    std::string buffer;
    PreToken piece = readable(input, buffer);
    std::string prefixed;
    if (add_prefix_space_ && piece.text.front() != ' ') {
      prefixed.reserve(piece.text.size() + 1);
      prefixed += ' ';
      prefixed += piece.text;
      piece.text = prefixed;
    }
    if (!regex_) {
      sink(PreToken{piece.text, piece.at_original_start, true});
      return Status::ok();
    }
    size_t previous = 0;
    LOCUS_RETURN_IF_ERROR(regex_->for_each_match(piece.text, [&](size_t start, size_t end) {
      emit(piece, previous, start, true, sink);
      emit(piece, start, end, true, sink);
      previous = end;
    }));
    emit(piece, previous, piece.text.size(), true, sink);
    return Status::ok();
  }
  bool uses_byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::optional<SplitPattern> regex_;
};

class DigitsPreTokenizer final : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual_digits) : individual_digits_(individual_digits) {}
  Status pre_tokenize(const PreToken& input, PreTokenSink sink) const override {
    std::string buffer;
    PreToken piece = readable(input, buffer);
    std::vector<Span> spans;
    find_char_spans(piece.text, utf8::is_numeric, spans);
    emit_pieces(piece, spans,
                individual_digits_ ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false,
                false, sink);
    return Status::ok();
  }

 private:
  bool individual_digits_;
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer final : public PreTokenizer {
 public:
  MetaspacePreTokenizer(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement),
        replacement_utf8_(utf8::encode(replacement)),
        scheme_(scheme),
        split_(split) {}

  Status pre_tokenize(const PreToken& input, PreTokenSink sink) const override {
    std::string buffer;
    PreToken piece = readable(input, buffer);
    std::string text;
    text.reserve(piece.text.size() + 8);
    for (char c : piece.text) {
      if (c == ' ') {
        text += replacement_utf8_;
      } else {
        text += c;
      }
    }
    bool starts_with_replacement =
        text.compare(0, replacement_utf8_.size(), replacement_utf8_) == 0;
    if (!starts_with_replacement &&
        (scheme_ == PrependScheme::kAlways ||
         (scheme_ == PrependScheme::kFirst && piece.at_original_start))) {
      text.insert(0, replacement_utf8_);
    }
    PreToken replaced{text, piece.at_original_start, false};
    if (!split_) {
      sink(replaced);
      return Status::ok();
    }
    std::vector<Span> spans;
    char32_t replacement = replacement_;
    find_char_spans(
        text, [replacement](char32_t c) { return c == replacement; }, spans);
    emit_pieces(replaced, spans, SplitBehavior::kMergedWithNext, false, false, sink);
    return Status::ok();
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

class SequencePreTokenizer final : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}

  Status pre_tokenize(const PreToken& piece, PreTokenSink sink) const override {
    return run_from(0, piece, sink);
  }
  bool uses_byte_level() const override {
    for (const auto& step : steps_) {
      if (step->uses_byte_level()) return true;
    }
    return false;
  }

 private:
  Status run_from(size_t index, const PreToken& piece, PreTokenSink sink) const {
    if (index == steps_.size()) {
      sink(piece);
      return Status::ok();
    }
    Status inner;
    LOCUS_RETURN_IF_ERROR(steps_[index]->pre_tokenize(piece, [&](const PreToken& sub_piece) {
      if (inner.is_ok()) inner = run_from(index + 1, sub_piece, sink);
    }));
    return inner;
  }

  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

Expected<PrependScheme> parse_prepend_scheme(const Json& value, std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(auto add_prefix_space,
                         json_optional_bool(value, "add_prefix_space", path));
  LOCUS_ASSIGN_OR_RETURN(auto name, json_optional_string(value, "prepend_scheme", path));
  if (!name) {
    // Files from before prepend_scheme only carry add_prefix_space.
    return add_prefix_space.value_or(true) ? PrependScheme::kAlways : PrependScheme::kNever;
  }
  PrependScheme scheme;
  if (*name == "always") {
    scheme = PrependScheme::kAlways;
  } else if (*name == "first") {
    scheme = PrependScheme::kFirst;
  } else if (*name == "never") {
    scheme = PrependScheme::kNever;
  } else {
    return parse_error(
        fmt::format("{}: unknown prepend_scheme '{}' (expected first, always or never)",
                    json_path(path, "prepend_scheme"), *name));
  }
  if (add_prefix_space == false && scheme != PrependScheme::kNever) {
    return parse_error(
        fmt::format("{}: add_prefix_space false contradicts prepend_scheme '{}'", path, *name));
  }
  return scheme;
}

}  // namespace

Expected<std::unique_ptr<PreTokenizer>> parse_pre_tokenizer(const Json& value,
                                                            std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(std::string type, json_component_type(value, path, "pre-tokenizer"));
  if (type == "Split") {
    const Json* pattern_json = json_member(value, "pattern");
    if (pattern_json == nullptr)
      return parse_error(fmt::format("{}: missing", json_path(path, "pattern")));
    LOCUS_ASSIGN_OR_RETURN(SplitPattern pattern,
                           SplitPattern::parse(*pattern_json, json_path(path, "pattern")));
    LOCUS_ASSIGN_OR_RETURN(SplitBehavior behavior, parse_split_behavior(value, path));
    LOCUS_ASSIGN_OR_RETURN(bool invert, json_bool(value, "invert", path, false));
    return std::make_unique<SplitPreTokenizer>(std::move(pattern), behavior, invert);
  }
  if (type == "ByteLevel") {
    LOCUS_ASSIGN_OR_RETURN(bool add_prefix_space, json_bool(value, "add_prefix_space", path, true));
    LOCUS_ASSIGN_OR_RETURN(bool use_regex, json_bool(value, "use_regex", path, true));
    std::optional<SplitPattern> regex;
    if (use_regex) {
      LOCUS_ASSIGN_OR_RETURN(regex, SplitPattern::from_regex(kGpt2Pattern));
    }
    return std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, std::move(regex));
  }
  if (type == "Digits") {
    LOCUS_ASSIGN_OR_RETURN(bool individual, json_bool(value, "individual_digits", path, false));
    return std::make_unique<DigitsPreTokenizer>(individual);
  }
  if (type == "Metaspace") {
    LOCUS_ASSIGN_OR_RETURN(char32_t replacement, json_char(value, "replacement", path, U'\u2581'));
    LOCUS_ASSIGN_OR_RETURN(PrependScheme scheme, parse_prepend_scheme(value, path));
    LOCUS_ASSIGN_OR_RETURN(bool split, json_bool(value, "split", path, true));
    return std::make_unique<MetaspacePreTokenizer>(replacement, scheme, split);
  }
  if (type == "Sequence") {
    std::string list_path = json_path(path, "pretokenizers");
    const Json* list = json_member(value, "pretokenizers");
    if (list == nullptr) return parse_error(fmt::format("{}: missing", list_path));
    if (!list->is_array()) return json_type_error(list_path, "an array", *list);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].is_null()) continue;
      LOCUS_ASSIGN_OR_RETURN(auto step, parse_pre_tokenizer((*list)[i], json_path(list_path, i)));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  return unsupported(fmt::format(
      "{}: pre-tokenizer type '{}' is not supported (supported: Split, ByteLevel, Digits, "
      "Metaspace, Sequence)",
      path, type));
}

}  // namespace locus::tokenizer
