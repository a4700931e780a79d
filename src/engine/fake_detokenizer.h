// A detokenizer over a fixed table of pieces, for tests and tokenizer-less runs. A piece may
// be withheld until the next token (like a real detokenizer waiting for the rest of a UTF-8
// sequence), so text and tokens do not line up one to one.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/detokenizer.h"

namespace locus {

class FakeDetokenizer : public Detokenizer {
 public:
  // pieces[t] is token t's text; tokens listed in `delayed` emit nothing until the next token.
  FakeDetokenizer(std::shared_ptr<const std::vector<std::string>> pieces,
                  std::vector<int32_t> delayed = {})
      : pieces_(std::move(pieces)), delayed_(std::move(delayed)) {}

  std::string step(int32_t token_id) override {
    const auto& table = *pieces_;
    pending_ += token_id >= 0 && static_cast<size_t>(token_id) < table.size()
                    ? table[static_cast<size_t>(token_id)]
                    : std::string("?");
    for (int32_t d : delayed_) {
      if (d == token_id) return {};
    }
    return std::exchange(pending_, {});
  }

  // Token t -> one lowercase letter ('a' + t % 26), the simplest checkable table.
  static std::shared_ptr<const std::vector<std::string>> letters(int vocab_size) {
    auto table = std::make_shared<std::vector<std::string>>();
    for (int t = 0; t < vocab_size; ++t)
      table->push_back(std::string(1, static_cast<char>('a' + t % 26)));
    return table;
  }

  static DetokenizerFactory factory(std::shared_ptr<const std::vector<std::string>> pieces,
                                    std::vector<int32_t> delayed = {}) {
    return [pieces, delayed](std::span<const int32_t>, const SamplingParams&) {
      return std::make_unique<FakeDetokenizer>(pieces, delayed);
    };
  }

 private:
  std::shared_ptr<const std::vector<std::string>> pieces_;
  std::vector<int32_t> delayed_;
  std::string pending_;
};

}  // namespace locus
