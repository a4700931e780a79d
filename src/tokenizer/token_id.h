// The token id type shared by the tokenizer and its callers (HF uses u32; every vocabulary fits
// comfortably in 31 bits, and a signed type leaves -1 free for "none").
#pragma once

#include <cstdint>

namespace locus {

using TokenId = int32_t;

}  // namespace locus
