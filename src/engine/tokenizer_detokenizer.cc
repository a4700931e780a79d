#include "engine/tokenizer_detokenizer.h"

#include "tokenizer/incremental_detokenizer.h"

namespace locus {
namespace {

class TokenizerDetokenizer final : public Detokenizer {
 public:
  TokenizerDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens,
                       std::span<const int32_t> prompt)
      : inner_(tokenizer, skip_special_tokens, prompt) {}

  std::string step(int32_t token_id) override { return inner_.step(token_id); }
  std::string finish() override { return inner_.finish(); }

 private:
  IncrementalDetokenizer inner_;
};

}  // namespace

DetokenizerFactory make_tokenizer_detokenizer_factory(Tokenizer tokenizer) {
  return [tokenizer = std::move(tokenizer)](std::span<const int32_t> prompt,
                                            const SamplingParams& params) {
    return std::unique_ptr<Detokenizer>(
        new TokenizerDetokenizer(tokenizer, params.skip_special_tokens, prompt));
  };
}

}  // namespace locus
