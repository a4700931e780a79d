// The engine's view of incremental detokenization: feed generated token ids one at a time, get
// the text each one completes. The tokenizer library (src/tokenizer/) provides the real one;
// the engine only needs this interface, so tests plug in a fake.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "sampling/sampling_params.h"

namespace locus {

class Detokenizer {
 public:
  virtual ~Detokenizer() = default;
  // The text that `token_id` completes, possibly empty (a UTF-8 sequence or a merge still
  // pending). Must honour the skip_special_tokens / spaces_between_special_tokens it was made
  // with. Called on the output thread, never on the engine thread.
  virtual std::string step(int32_t token_id) = 0;
  // The text still held back when the sequence ends (an unfinished character, decoded the way
  // a one-shot decode would). Called once, after the last step.
  virtual std::string finish() { return {}; }
};

// Makes the detokenizer of one sequence; the prompt gives the context that the first
// generated tokens are decoded against (leading spaces, byte fallback).
using DetokenizerFactory = std::function<std::unique_ptr<Detokenizer>(
    std::span<const int32_t> prompt_token_ids, const SamplingParams& params)>;

// For engines without a tokenizer (token ids in, token ids out): produces no text, so stop
// strings never match.
class NullDetokenizer : public Detokenizer {
 public:
  std::string step(int32_t) override { return {}; }
};

}  // namespace locus
