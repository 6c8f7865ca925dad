#include "tokenizer/pretokenize.h"

#include <utf8proc.h>

#include <array>
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer {

namespace {

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

uint8_t classify_slow(char32_t cp) {
  // White_Space = general categories Zs, Zl, Zp plus the controls U+0009..U+000D and U+0085.
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) {
    return kClassSpace | (cp == '\r' || cp == '\n' ? kClassNewline : 0);
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return kClassLetter;
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return kClassNumber;
    case UTF8PROC_CATEGORY_ZS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
      return kClassSpace;
    default:
      return 0;
  }
}

const std::array<uint8_t, 128> kAsciiClass = [] {
  std::array<uint8_t, 128> table{};
  for (char32_t c = 0; c < 128; ++c) table[c] = classify_slow(c);
  return table;
}();

char32_t ascii_lower(char32_t c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

// The text decoded once into code points and their classes, so that the matcher can look
// ahead and back by code point. Reused across calls (per thread) to avoid allocation.
struct Decoded {
  std::vector<char32_t> cps;     // [n]
  std::vector<uint8_t> cls;      // [n]
  std::vector<uint32_t> offset;  // [n + 1] byte offset of each code point, then text.size()
};

}  // namespace

uint8_t char_class(char32_t cp) {
  return cp < 128 ? kAsciiClass[cp] : classify_slow(cp);
}

std::optional<SplitPattern> SplitPattern::from_regex(std::string_view regex) {
  if (regex == kQwen2Pattern) return SplitPattern(1);
  if (regex == kLlama3Pattern) return SplitPattern(3);
  return std::nullopt;
}

std::string_view SplitPattern::supported_description() {
  return "the Qwen2 pattern (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|... "
         "and its Llama-3 variant with \\p{N}{1,3}";
}

void SplitPattern::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  thread_local Decoded d;
  d.cps.clear();
  d.cls.clear();
  d.offset.clear();
  for (size_t pos = 0; pos < text.size();) {
    const auto b = static_cast<uint8_t>(text[pos]);
    d.offset.push_back(static_cast<uint32_t>(pos));
    if (b < 0x80) {
      d.cps.push_back(b);
      d.cls.push_back(kAsciiClass[b]);
      ++pos;
    } else {
      const utf8::Decoded u = utf8::decode(text, pos);
      d.cps.push_back(u.cp);  // the caller guarantees valid UTF-8
      d.cls.push_back(classify_slow(u.cp));
      pos += u.length;
    }
  }
  d.offset.push_back(static_cast<uint32_t>(text.size()));

  const char32_t* cp = d.cps.data();
  const uint8_t* cls = d.cls.data();
  const size_t n = d.cps.size();
  auto is = [&](size_t k, uint8_t mask) { return k < n && (cls[k] & mask) != 0; };
  // [^\s\p{L}\p{N}]: neither space, letter nor number.
  auto is_other = [&](size_t k) { return k < n && (cls[k] & (kClassSpace | kClassLetter | kClassNumber)) == 0; };

  // Returns the end of the match at i: the first alternative that matches wins, and within
  // it the backtracking regex engine's choice. Every code point starts some match, so no
  // text falls between matches.
  auto match_at = [&](size_t i) -> size_t {
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if (cp[i] == '\'' && i + 1 < n) {
      const char32_t a = ascii_lower(cp[i + 1]);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
      if (i + 2 < n) {
        const char32_t b = ascii_lower(cp[i + 2]);
        if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
      }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+ : the optional prefix is taken only if a letter follows it.
    {
      size_t k = i;
      if (!is(i, kClassLetter | kClassNumber | kClassNewline) && is(i + 1, kClassLetter)) k = i + 1;
      if (is(k, kClassLetter)) {
        while (is(k, kClassLetter)) ++k;
        return k;
      }
    }
    // \p{N} or \p{N}{1,3}
    if (is(i, kClassNumber)) {
      size_t k = i + 1;
      while (k - i < max_digits_ && is(k, kClassNumber)) ++k;
      return k;
    }
    //  ?[^\s\p{L}\p{N}]+[\r\n]*
    {
      size_t k = i;
      if (cp[i] == ' ' && is_other(i + 1)) k = i + 1;
      if (is_other(k)) {
        while (is_other(k)) ++k;
        while (is(k, kClassNewline)) ++k;
        return k;
      }
    }
    // What is left starts with white space; find its maximal run [i, j).
    size_t j = i;
    size_t last_newline = n;
    for (; is(j, kClassSpace); ++j) {
      if (cls[j] & kClassNewline) last_newline = j;
    }
    // \s*[\r\n]+ : \s* backtracks to the run's last \r or \n, which [\r\n]+ then takes.
    if (last_newline != n) return last_newline + 1;
    // \s+(?!\S) : the whole run at the end of text, else all but its last code point
    // (which then starts the next match), else (a run of one) \s+.
    if (j == n || j - i == 1) return j;
    return j - 1;
  };

  for (size_t i = 0; i < n;) {
    const size_t end = match_at(i);
    pieces.push_back(text.substr(d.offset[i], d.offset[end] - d.offset[i]));
    i = end;
  }
}

}  // namespace nanoinfer
