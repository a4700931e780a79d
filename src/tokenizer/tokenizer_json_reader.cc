// SAX reading of tokenizer.json; see tokenizer_json_reader.h.
#include "tokenizer/tokenizer_json_reader.h"

#include <fmt/format.h>

namespace locus::tokenizer {
namespace {

// Builds the DOM like nlohmann's own SAX DOM parser, except for model.vocab and model.merges,
// whose entries go to BpeTables.
class Reader : public nlohmann::json_sax<Json> {
 public:
  explicit Reader(TokenizerJsonDocument& document) : document_(document) {}

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) {
      document_.tables.vocab.emplace_back(std::move(key_), v);
      return true;
    }
    return value(Json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) {
      if (v > static_cast<number_unsigned_t>(INT64_MAX)) return fail_vocab_value("an id in range");
      document_.tables.vocab.emplace_back(std::move(key_), static_cast<int64_t>(v));
      return true;
    }
    return value(Json(v));
  }
  bool number_float(number_float_t v, const string_t& /*text*/) override {
    if (mode_ == Mode::kVocab) return fail_vocab_value("an integer id");
    return value(Json(v));
  }
  bool binary(binary_t& v) override { return value(Json(Json::binary_t(v))); }
  bool string(string_t& v) override {
    switch (mode_) {
      case Mode::kVocab:
        return fail_vocab_value("an integer id");
      case Mode::kMerges: {
        size_t space = v.find(' ');
        if (space == std::string::npos || v.find(' ', space + 1) != std::string::npos) {
          return fail(fmt::format("model.merges[{}]: '{}' is not two tokens separated by one space",
                                  document_.tables.merges.size(), v));
        }
        document_.tables.merges.emplace_back(v.substr(0, space), v.substr(space + 1));
        return true;
      }
      case Mode::kMergePair:
        pair_.push_back(std::move(v));
        return true;
      case Mode::kDom:
        return value(Json(std::move(v)));
    }
    return false;
  }

  bool start_object(std::size_t /*size*/) override {
    if (mode_ != Mode::kDom) return fail(entry_error());
    if (depth_ == 2 && in_model_ && key_ == "vocab") {
      value(Json(nullptr));  // placeholder in the DOM
      mode_ = Mode::kVocab;
      document_.tables.has_vocab = true;
      ++depth_;
      return true;
    }
    bool is_model = depth_ == 1 && key_ == "model";
    if (!value(Json::object())) return false;
    stack_.push_back(last_);
    ++depth_;
    if (is_model) in_model_ = true;
    return true;
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      --depth_;
      return true;
    }
    stack_.pop_back();
    --depth_;
    if (depth_ == 1) in_model_ = false;
    return true;
  }
  bool start_array(std::size_t /*size*/) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return fail(entry_error());
    if (depth_ == 2 && in_model_ && key_ == "merges") {
      value(Json(nullptr));  // placeholder in the DOM
      mode_ = Mode::kMerges;
      document_.tables.has_merges = true;
      return true;
    }
    if (!value(Json::array())) return false;
    stack_.push_back(last_);
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_.size() != 2) return fail(entry_error());
      document_.tables.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(string_t& v) override {
    key_ = std::move(v);
    return true;
  }
  bool parse_error(std::size_t position, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) override {
    if (error_.is_ok()) {
      error_ = locus::parse_error(fmt::format("not valid JSON at byte {}: {}", position, e.what()));
    }
    return false;
  }

  Status error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  bool value(Json v) {
    if (mode_ != Mode::kDom) return fail(entry_error());  // a number or null among merges
    if (stack_.empty()) {
      document_.root = std::move(v);
      last_ = &document_.root;
      return true;
    }
    Json* parent = stack_.back();
    if (parent->is_object()) {
      last_ = &((*parent)[key_] = std::move(v));
    } else {
      parent->push_back(std::move(v));
      last_ = &parent->back();
    }
    return true;
  }
  std::string entry_error() const {
    if (mode_ == Mode::kVocab) {
      return fmt::format("model.vocab[\"{}\"]: expected an integer id", key_);
    }
    return fmt::format("model.merges[{}]: expected a \"left right\" string or a [left, right] pair",
                       document_.tables.merges.size());
  }
  bool fail_vocab_value(std::string_view expected) {
    return fail(fmt::format("model.vocab[\"{}\"]: expected {}", key_, expected));
  }
  bool fail(std::string message) {
    if (error_.is_ok()) error_ = locus::parse_error(std::move(message));
    return false;
  }

  TokenizerJsonDocument& document_;
  std::vector<Json*> stack_;  // open objects and arrays of the DOM
  Json* last_ = nullptr;
  std::string key_;
  std::vector<std::string> pair_;
  Mode mode_ = Mode::kDom;
  int depth_ = 0;  // object nesting: 1 inside the root object, 2 inside "model"
  bool in_model_ = false;
  Status error_;
};

}  // namespace

Expected<TokenizerJsonDocument> read_tokenizer_json(std::string_view text) {
  TokenizerJsonDocument document;
  Reader reader(document);
  bool ok = Json::sax_parse(text, &reader, nlohmann::json::input_format_t::json, /*strict=*/true);
  if (!ok) {
    Status error = reader.error();
    return error.is_ok() ? locus::parse_error("not valid JSON") : error;
  }
  return document;
}

}  // namespace locus::tokenizer
