// The engine's Detokenizer backed by the real tokenizer (src/tokenizer/): one
// IncrementalDetokenizer per sequence, seeded with the prompt's last ids as context.
#pragma once

#include "engine/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace locus {

// Each sequence decodes with its request's skip_special_tokens.
DetokenizerFactory make_tokenizer_detokenizer_factory(Tokenizer tokenizer);

}  // namespace locus
