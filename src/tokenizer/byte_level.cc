// GPT-2 byte ↔ character map; see byte_level.h.
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace locus::tokenizer {
namespace {

// 188 printable bytes map to themselves and the 68 others to U+0100..U+0143.
constexpr size_t kMappedRange = 256 + 68;

struct ByteMap {
  std::array<char32_t, 256> to_char{};
  std::array<std::string, 256> to_utf8{};
  std::array<int16_t, kMappedRange> from_char{};
  ByteMap() {
    from_char.fill(-1);
    // Printable Latin-1 bytes map to themselves; the others to U+0100 onwards, in byte order.
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[static_cast<size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
      to_utf8[static_cast<size_t>(b)] = utf8::encode(to_char[static_cast<size_t>(b)]);
      from_char[to_char[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

char32_t byte_to_char(uint8_t b) {
  return byte_map().to_char[b];
}

int char_to_byte(char32_t c) {
  return c < kMappedRange ? byte_map().from_char[c] : -1;
}

void append_byte_level_chars(std::string& out, std::string_view bytes) {
  const auto& map = byte_map();
  for (char b : bytes)
    out += map.to_utf8[static_cast<uint8_t>(b)];
}

bool append_bytes_of_byte_level_token(std::string& out, std::string_view token) {
  size_t mark = out.size();
  size_t i = 0;
  while (i < token.size()) {
    int b = char_to_byte(utf8::decode(token, i));
    if (b < 0) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(b));
  }
  return true;
}

}  // namespace locus::tokenizer
