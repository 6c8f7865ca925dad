// UTF-8 decoding as the tokenizer needs it: well-formedness exactly per Unicode Table 3-7,
// and the "substitution of maximal subparts" policy for ill-formed bytes (one U+FFFD per
// maximal subpart), which is what WHATWG's TextDecoder and Rust's from_utf8_lossy do. The
// reference tokenizer sees text through that policy, so ours must apply the same one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nanoinfer::utf8 {

enum class Status : uint8_t {
  kValid,      // a well-formed sequence of `length` bytes encoding `cp`
  kIllFormed,  // a maximal ill-formed subpart of `length` >= 1 bytes
  kTruncated,  // the input ends inside a sequence whose `length` bytes are all valid so far
};

struct Decoded {
  char32_t cp;
  uint32_t length;
  Status status;
};

// Decodes the sequence starting at s[pos] (pos < s.size()).
inline Decoded decode(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return {b0, 1, Status::kValid};
  uint32_t need;      // continuation bytes required
  uint8_t lo = 0x80;  // allowed range of the second byte (Table 3-7)
  uint8_t hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // excludes the surrogates U+D800..U+DFFF
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {0xFFFD, 1, Status::kIllFormed};  // 80..C1, F5..FF never start a sequence
  }
  for (uint32_t k = 1; k <= need; ++k) {
    if (pos + k >= s.size()) return {0xFFFD, k, Status::kTruncated};
    const auto b = static_cast<uint8_t>(s[pos + k]);
    if (b < lo || b > hi) return {0xFFFD, k, Status::kIllFormed};
    cp = (cp << 6) | (b & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  return {cp, need + 1, Status::kValid};
}

inline void append(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Byte offset of the first ill-formed (or truncated) sequence, or s.size() if s is valid.
size_t valid_prefix(std::string_view s);

// Appends s with every maximal ill-formed subpart (a truncated tail included) replaced by
// U+FFFD.
void append_lossy(std::string_view s, std::string& out);

// Length (0..3) of the tail of s that is a valid but incomplete sequence: the bytes a
// streaming decoder must hold back because the next bytes may complete them.
size_t incomplete_tail(std::string_view s);

}  // namespace nanoinfer::utf8
