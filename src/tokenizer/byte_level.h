// GPT-2's reversible byte ↔ character map: every byte becomes a printable character so that
// byte-level BPE vocabularies are valid strings ('Ġ' is the space byte, 'Ċ' the newline).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace locus::tokenizer {

// The character standing for byte b.
char32_t byte_to_char(uint8_t b);
// The byte a character stands for, or -1 when the character is not in the map.
int char_to_byte(char32_t c);

// Appends the mapped characters of `bytes` (UTF-8 encoded) to `out`.
void append_byte_level_chars(std::string& out, std::string_view bytes);

// Appends the bytes behind a token made of mapped characters. Returns false, leaving `out`
// unchanged, when some character is not in the map (the token is then its own raw UTF-8, as
// HF's ByteLevel decoder treats it).
bool append_bytes_of_byte_level_token(std::string& out, std::string_view token);

}  // namespace locus::tokenizer
