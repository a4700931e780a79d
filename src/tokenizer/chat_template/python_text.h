// Python `str` semantics over UTF-8 std::string, for the Jinja interpreter: code points,
// whitespace, case mapping, repr() of strings and floats. Never throws on malformed UTF-8: a byte
// that is not part of a valid sequence decodes to U+DC80+byte (Python's surrogateescape) and
// encodes back to the same byte, so text survives a round trip unchanged.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace locus::jinja::text {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);
bool is_ascii(std::string_view s);
// len(s): the number of code points.
size_t length(std::string_view s);

// Character classes as Python's str methods define them (Unicode data from utf8proc).
bool is_space(char32_t c);  // str.isspace
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_cased(char32_t c);
bool is_lower_char(char32_t c);
bool is_upper_char(char32_t c);
bool is_printable(char32_t c);  // str.isprintable, used by repr()
bool is_identifier_start(char32_t c);
bool is_identifier_continue(char32_t c);

// Simple (one-to-one) Unicode case mapping; Python's full mapping also expands a few characters
// such as 'ß'.upper() == 'SS', which this does not.
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
std::string to_title_case(std::string_view s);  // str.title()
std::string capitalize(std::string_view s);     // str.capitalize()
std::string swap_case(std::string_view s);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace, else any of the given code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit. `separator` absent splits on runs of whitespace. max_split < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& separator,
                               long long max_split, bool from_right);
std::vector<std::string> split_lines(std::string_view s, bool keep_ends);  // str.splitlines
// str.replace(old, new, count); count < 0 replaces all.
std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text,
                    long long count);

// repr(s) for a str: quotes and escapes exactly as CPython does.
std::string repr(std::string_view s);
// repr(x) for a float: the shortest text that round-trips ("1.0", "0.1", "1e-05", "1e+16", "inf").
std::string float_repr(double value);

// Code point index helpers for slicing and find(): byte offset of the code point `index` (index
// may equal the length, giving s.size()).
std::vector<size_t> code_point_offsets(std::string_view s);

}  // namespace locus::jinja::text
