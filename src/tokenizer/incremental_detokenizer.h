// Streaming detokenization: ids arrive one at a time and only text that can no longer change is
// handed out, never half a UTF-8 character. Same windowed method as vLLM's
// detokenize_incrementally and HF's DecodeStream (decode a short window of recent ids, emit
// what extends the window's previous text), plus two rules that make the concatenation of all
// pieces equal the one-shot decode exactly: text ending in U+FFFD waits for the next id, and
// nothing is committed inside a run of byte-fallback tokens (see Decoder::can_cut_after).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace locus {

class IncrementalDetokenizer {
 public:
  // `prompt_ids`: when given, the last few prompt ids are context, so the first generated ids
  // decode as they would mid-text (e.g. a SentencePiece "▁Hello" keeps its space); the pieces
  // then concatenate to decode(prompt + generated) minus decode(prompt).
  IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens,
                         std::span<const TokenId> prompt_ids = {});

  // Adds one id and returns the text it completes (often empty).
  std::string step(TokenId id);
  // Returns the text still held back (an unfinished character or byte run) at the end of the
  // stream. Call once, after the last step.
  std::string finish();

 private:
  std::string emit(bool at_end);

  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  std::vector<TokenId> ids_;  // ids from prefix_offset_'s window start on
  size_t prefix_offset_ = 0;  // start of the decode window
  size_t read_offset_ = 0;    // ids before this are already emitted
  std::string prefix_text_;   // decode(ids_[prefix_offset_, read_offset_))
};

}  // namespace locus
