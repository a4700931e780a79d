// The normalizers of HF tokenizers (normalizers/*.rs); see normalizers.h.
#include "tokenizer/normalizers.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include <cstdlib>
#include <vector>

#include "tokenizer/split.h"
#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

// Whether `c`, as a character of its own, survives the normalization form (`options`) unchanged
// and can never interact with a neighbour: a starter (combining class 0, not a mark) that no
// canonical composition takes as its second character (those are marks or Hangul jamo), and
// whose own normalization is itself. Cutting a text before such a character does not change its
// normalization, which lets runs of them be copied instead of passed through utf8proc.
bool is_inert(char32_t c, int options) {
  const utf8proc_property_t* property = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  if (property->combining_class != 0) return false;
  switch (property->category) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
      return false;
    default:
      break;
  }
  if (c >= 0x1100 && c <= 0x11FF) return false;  // conjoining jamo compose algorithmically
  // Hangul syllables decompose algorithmically too (utf8proc has no table entry for them).
  if (c >= 0xAC00 && c <= 0xD7A3) return (options & UTF8PROC_COMPOSE) != 0;
  if (property->decomp_seqindex == UINT16_MAX) return true;
  // A decomposable character is inert when the form maps it to itself (é under NFC, not Å
  // U+212B, not ﬁ under NFKC).
  utf8proc_int32_t buffer[8];
  int last_boundclass = 0;
  utf8proc_ssize_t n =
      utf8proc_decompose_char(static_cast<utf8proc_int32_t>(c), buffer, 8,
                              static_cast<utf8proc_option_t>(options), &last_boundclass);
  if (n == 1 && buffer[0] == static_cast<utf8proc_int32_t>(c)) return true;
  if ((options & UTF8PROC_COMPOSE) == 0 || n <= 0 || n > 8) return false;
  utf8proc_ssize_t length =
      utf8proc_normalize_utf32(buffer, n, static_cast<utf8proc_option_t>(options));
  return length == 1 && buffer[0] == static_cast<utf8proc_int32_t>(c);
}

// is_inert for every code point below kInertTableSize, computed once per normalization form;
// above it there are no decompositions, and the property test alone decides.
constexpr char32_t kInertTableSize = 0x30000;

class UnicodeNormalizer final : public Normalizer {
 public:
  UnicodeNormalizer(std::string name, int options)
      : name_(std::move(name)), options_(options), inert_(kInertTableSize) {
    for (char32_t c = 0; c < kInertTableSize; ++c) {
      inert_[c] = (c >= 0xD800 && c <= 0xDFFF) || is_inert(c, options_);
    }
  }

  Status normalize(std::string& text, bool& /*start_moved*/) const override {
    // Only runs of non-inert characters, each with the character before it (which a mark may
    // compose with), go through utf8proc; everything else is copied.
    size_t first = first_non_inert(text, 0);
    if (first == text.size()) return Status::ok();
    std::string out;
    out.reserve(text.size() + 16);
    size_t copied = 0;
    size_t i = first;
    while (i < text.size()) {
      size_t run_start = i == 0 ? 0 : utf8::last_char_start(std::string_view(text).substr(0, i));
      size_t run_end = i;
      while (run_end < text.size()) {
        size_t next = run_end;
        char32_t c = utf8::decode(text, next);
        if (inert(c)) break;
        run_end = next;
      }
      out.append(text, copied, run_start - copied);
      LOCUS_RETURN_IF_ERROR(
          append_normalized(std::string_view(text).substr(run_start, run_end - run_start), out));
      copied = run_end;
      i = first_non_inert(text, run_end);
    }
    out.append(text, copied, std::string::npos);
    text = std::move(out);
    return Status::ok();
  }

 private:
  bool inert(char32_t c) const {
    if (c < 0x80) return true;
    if (c < kInertTableSize) return inert_[c];
    return is_inert(c, options_);
  }

  size_t first_non_inert(std::string_view text, size_t from) const {
    size_t i = from;
    while (i < text.size()) {
      if (static_cast<unsigned char>(text[i]) < 0x80) {
        ++i;
        continue;
      }
      size_t next = i;
      if (!inert(utf8::decode(text, next))) return i;
      i = next;
    }
    return text.size();
  }

  Status append_normalized(std::string_view piece, std::string& out) const {
    utf8proc_uint8_t* result = nullptr;
    utf8proc_ssize_t length = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(piece.data()),
                                           static_cast<utf8proc_ssize_t>(piece.size()), &result,
                                           static_cast<utf8proc_option_t>(options_));
    if (length < 0) {
      return internal_error(
          fmt::format("{} normalizer: utf8proc failed: {}", name_, utf8proc_errmsg(length)));
    }
    out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(length));
    std::free(result);
    return Status::ok();
  }

  std::string name_;
  int options_;
  std::vector<bool> inert_;
};

class LowercaseNormalizer final : public Normalizer {
 public:
  Status normalize(std::string& text, bool& /*start_moved*/) const override {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    while (i < text.size())
      utf8::append_lowercase(out, utf8::decode(text, i));
    text = std::move(out);
    return Status::ok();
  }
};

class StripAccentsNormalizer final : public Normalizer {
 public:
  Status normalize(std::string& text, bool& start_moved) const override {
    std::string out;
    out.reserve(text.size());
    size_t i = 0;
    bool kept_any = false;
    while (i < text.size()) {
      size_t start = i;
      char32_t c = utf8::decode(text, i);
      if (utf8::is_combining_mark(c)) {
        if (!kept_any) start_moved = true;
        continue;
      }
      kept_any = true;
      out.append(text, start, i - start);
    }
    text = std::move(out);
    return Status::ok();
  }
};

class PrependNormalizer final : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  Status normalize(std::string& text, bool& /*start_moved*/) const override {
    if (!text.empty()) text.insert(0, prepend_);  // HF prepends to non-empty strings only
    return Status::ok();
  }

 private:
  std::string prepend_;
};

class StripNormalizer final : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  Status normalize(std::string& text, bool& start_moved) const override {
    if (right_) text.resize(utf8::trailing_whitespace_start(text));
    if (left_) {
      size_t end = utf8::leading_whitespace_end(text);
      if (end > 0) {
        text.erase(0, end);
        start_moved = true;
      }
    }
    return Status::ok();
  }

 private:
  bool left_, right_;
};

class ReplaceNormalizer final : public Normalizer {
 public:
  ReplaceNormalizer(SplitPattern pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  Status normalize(std::string& text, bool& start_moved) const override {
    std::string out;
    size_t previous = 0;
    bool replaced_any = false;
    LOCUS_RETURN_IF_ERROR(pattern_.for_each_match(text, [&](size_t start, size_t end) {
      if (!replaced_any) out.reserve(text.size() + content_.size());
      replaced_any = true;
      // Deleting the first character moves the start (replacing it keeps its alignment).
      if (start == 0 && end > 0 && content_.empty()) start_moved = true;
      out.append(text, previous, start - previous);
      out += content_;
      previous = end;
    }));
    if (!replaced_any) return Status::ok();
    out.append(text, previous, std::string::npos);
    text = std::move(out);
    return Status::ok();
  }

 private:
  SplitPattern pattern_;
  std::string content_;
};

class SequenceNormalizer final : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  Status normalize(std::string& text, bool& start_moved) const override {
    for (const auto& step : steps_)
      LOCUS_RETURN_IF_ERROR(step->normalize(text, start_moved));
    return Status::ok();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

Expected<std::unique_ptr<Normalizer>> parse_normalizer(const Json& value, std::string_view path) {
  LOCUS_ASSIGN_OR_RETURN(std::string type, json_component_type(value, path, "normalizer"));
  constexpr int kStable = UTF8PROC_STABLE;
  if (type == "NFC") return std::make_unique<UnicodeNormalizer>(type, kStable | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeNormalizer>(type, kStable | UTF8PROC_DECOMPOSE);
  if (type == "NFKC") {
    return std::make_unique<UnicodeNormalizer>(type, kStable | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "NFKD") {
    return std::make_unique<UnicodeNormalizer>(type,
                                               kStable | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "StripAccents") return std::make_unique<StripAccentsNormalizer>();
  if (type == "Prepend") {
    LOCUS_ASSIGN_OR_RETURN(std::string prepend, json_string(value, "prepend", path));
    return std::make_unique<PrependNormalizer>(std::move(prepend));
  }
  if (type == "Strip") {
    LOCUS_ASSIGN_OR_RETURN(bool left, json_bool(value, "strip_left", path, true));
    LOCUS_ASSIGN_OR_RETURN(bool right, json_bool(value, "strip_right", path, true));
    return std::make_unique<StripNormalizer>(left, right);
  }
  if (type == "Replace") {
    const Json* pattern_json = json_member(value, "pattern");
    if (pattern_json == nullptr) {
      return parse_error(fmt::format("{}: missing", json_path(path, "pattern")));
    }
    LOCUS_ASSIGN_OR_RETURN(SplitPattern pattern,
                           SplitPattern::parse(*pattern_json, json_path(path, "pattern")));
    LOCUS_ASSIGN_OR_RETURN(std::string content, json_string(value, "content", path));
    return std::make_unique<ReplaceNormalizer>(std::move(pattern), std::move(content));
  }
  if (type == "Sequence") {
    std::string list_path = json_path(path, "normalizers");
    const Json* list = json_member(value, "normalizers");
    if (list == nullptr) return parse_error(fmt::format("{}: missing", list_path));
    if (!list->is_array()) return json_type_error(list_path, "an array", *list);
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      if ((*list)[i].is_null()) continue;
      LOCUS_ASSIGN_OR_RETURN(auto step, parse_normalizer((*list)[i], json_path(list_path, i)));
      steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  return unsupported(fmt::format(
      "{}: normalizer type '{}' is not supported (supported: NFC, NFD, NFKC, NFKD, Lowercase, "
      "StripAccents, Prepend, Strip, Replace, Sequence)",
      path, type));
}

}  // namespace locus::tokenizer
