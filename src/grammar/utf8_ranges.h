// Code-point sets as UTF-8 byte sequences, so a grammar over characters runs over bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanoinfer {

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};
struct ByteRange {
  uint8_t lo, hi;  // inclusive
};

// Sorted, merged; the complement over [0, U+10FFFF].
std::vector<CodeRange> normalize_ranges(std::vector<CodeRange> ranges);
std::vector<CodeRange> complement(const std::vector<CodeRange>& ranges);

// The UTF-8 encodings of the scalar values in `ranges` (surrogates are left out) as
// alternatives of byte-range sequences: a byte string is the encoding of a member exactly when
// it matches one of them.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodeRange>& ranges);

std::string encode_utf8(uint32_t cp);
// One code point from the front of `s`; `len` = 0 when it does not start with valid UTF-8.
uint32_t decode_utf8(std::string_view s, size_t& len);

}  // namespace nanoinfer
