#include "support/tokenizer_corpus.h"

#include <utf8proc.h>

#include "nanoinfer/splitmix64.h"

#include <array>
#include <string_view>

namespace nanoinfer::test {

namespace {

// splitmix64: tiny, fast and identical everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed) : mix_{seed} {}
  uint64_t next() { return mix_.next(); }
  uint64_t below(uint64_t n) { return next() % n; }  // bias is irrelevant here
  uint64_t between(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }
  bool chance(uint64_t percent) { return below(100) < percent; }
  template <class T, size_t N>
  const T& pick(const std::array<T, N>& items) {
    return items[below(N)];
  }

 private:
  SplitMix64 mix_;
};

void put(char32_t cp, std::string& out) {
  std::array<utf8proc_uint8_t, 4> buf;
  const auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf.data());
  out.append(reinterpret_cast<const char*>(buf.data()), static_cast<size_t>(n));
}

// Code points assigned in utf8proc's Unicode version (not Cn, not surrogates). The
// reference's JS engine may know a newer Unicode version; code points unassigned here may
// be letters there, which would test version skew rather than the tokenizer.
bool assigned(char32_t cp) {
  if (cp > 0x10FFFF) return false;
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat != UTF8PROC_CATEGORY_CN && cat != UTF8PROC_CATEGORY_CS;
}

constexpr std::array<char32_t, 38> kSpaces = {
    ' ',    ' ',    ' ',    '\t',   '\n',   '\n',   '\r',   0x0B,   0x0C,   0x1C,   0x1D,   0x1E,   0x1F,
    0x85,   0xA0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2007, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F,
    0x205F, 0x3000, 0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF, 0x180E, 0x00AD, 0x034F, 0x061C, 0x200E};

constexpr std::array<std::string_view, 40> kWords = {
    "the",     "The",   "THE",    "a",        "hello",    "world", "Hello",   "I",         "you",        "don",
    "can",     "won",   "they",   "We",       "it",       "naïve", "café",    "Straße",    "résumé",     "ﬁsh",
    "München", "Ωmega", "Привет", "мир",      "γειά",     "σου",   "שלום",    "مرحبا",     "नमस्ते",       "สวัสดี",
    "日本語",  "中文",  "한국어", "ひらがな", "カタカナ", "x",     "foo_bar", "camelCase", "HTTPServer", "i18n"};

constexpr std::array<std::string_view, 24> kPunct = {".", ",", "!", "?",  ";", ":", "-", "--", "...", "(", ")", "[",
                                                     "]", "{", "}", "\"", "'", "`", "/", "\\", "…",   "—", "«", "»"};

constexpr std::array<std::string_view, 14> kContractions = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d",
                                                            "'S", "'T", "'RE", "'Ve", "'M", "'LL", "'D"};

void whitespace_fragment(Rng& rng, std::string& out) {
  const uint64_t n = rng.between(1, 12);
  for (uint64_t i = 0; i < n; ++i) {
    switch (rng.below(6)) {
      case 0:
        out += "\r\n";
        break;
      case 1:
        out += rng.pick(kWords);
        break;
      case 2:
        out += rng.pick(kPunct);
        break;
      default:
        put(rng.pick(kSpaces), out);
        break;
    }
  }
}

void random_codepoints(Rng& rng, std::string& out) {
  // Planes 0, 1, 2, 3, 14 hold assigned characters; 15 and 16 are private use.
  static constexpr std::array<char32_t, 10> kPlanes = {0, 0, 0, 0, 1, 1, 2, 3, 14, 15};
  const uint64_t n = rng.between(1, 10);
  for (uint64_t i = 0; i < n;) {
    const char32_t plane = rng.chance(3) ? 16 : rng.pick(kPlanes);
    const char32_t cp = (plane << 16) | static_cast<char32_t>(rng.below(0x10000));
    if (!assigned(cp)) continue;
    put(cp, out);
    ++i;
  }
}

void combining(Rng& rng, std::string& out) {
  static constexpr std::array<char32_t, 12> kBases = {'a', 'e', 'o', 'A', 'n', 'u', 'C', 0x3B1, 0x430, ' ', '1', 0x5D0};
  static constexpr std::array<char32_t, 16> kMarks = {0x300, 0x301, 0x302, 0x303, 0x308, 0x30A, 0x323,  0x327,
                                                      0x328, 0x331, 0x345, 0x5B4, 0x64B, 0x93C, 0x20D7, 0x1AB0};
  // Code points NFC changes on their own (singletons) or composes (Hangul jamo).
  static constexpr std::array<std::string_view, 10> kNfc = {
      "\u212A",       "\u212B", "\u2126", "\u037E", "\u1FEF", "\u0340", "\u1100\u1161", "\u1100\u1161\u11A8",
      "\u0B47\u0B3E", "\u0344"};
  const uint64_t n = rng.between(1, 6);
  for (uint64_t i = 0; i < n; ++i) {
    if (rng.chance(25)) {
      out += rng.pick(kNfc);
      continue;
    }
    put(rng.pick(kBases), out);
    for (uint64_t m = rng.below(4); m > 0; --m) put(rng.pick(kMarks), out);
  }
}

void cjk(Rng& rng, std::string& out) {
  const uint64_t n = rng.between(1, 16);
  for (uint64_t i = 0; i < n; ++i) {
    switch (rng.below(7)) {
      case 0:
        put(0x4E00 + static_cast<char32_t>(rng.below(0x5200)), out);
        break;  // CJK unified
      case 1:
        put(0x3041 + static_cast<char32_t>(rng.below(0x56)), out);
        break;  // hiragana
      case 2:
        put(0x30A1 + static_cast<char32_t>(rng.below(0x5A)), out);
        break;  // katakana
      case 3:
        put(0xAC00 + static_cast<char32_t>(rng.below(11172)), out);
        break;  // hangul
      case 4:
        put(rng.pick(std::array<char32_t, 8>{0x3001, 0x3002, 0xFF0C, 0xFF01, 0x300C, 0x300D, 0xFF1F, 0x30FC}), out);
        break;
      case 5:
        put(0x20000 + static_cast<char32_t>(rng.below(0xA6D0)), out);
        break;  // extension B
      default:
        out += rng.pick(kWords);
        break;
    }
  }
}

void emoji(Rng& rng, std::string& out) {
  static constexpr std::array<std::string_view, 16> kEmoji = {"😀",
                                                              "👍🏽",
                                                              "👨‍👩‍👧‍👦",
                                                              "🏳️‍🌈",
                                                              "🇯🇵",
                                                              "🇺🇸",
                                                              "1️⃣",
                                                              "❤️",
                                                              "🧑🏿‍💻",
                                                              "👩‍❤️‍💋‍👨",
                                                              "☺︎",
                                                              "🫠",
                                                              "🐈‍⬛",
                                                              "©️",
                                                              "#️⃣",
                                                              "🏴󠁧󠁢󠁳󠁣󠁴󠁿"};
  const uint64_t n = rng.between(1, 8);
  for (uint64_t i = 0; i < n; ++i) {
    out += rng.pick(kEmoji);
    if (rng.chance(30)) put(0x200D, out);  // a dangling ZWJ
    if (rng.chance(30)) out += ' ';
  }
}

void digits(Rng& rng, std::string& out) {
  static constexpr std::array<char32_t, 10> kZero = {'0', '0', '0', 0x660, 0x966, 0xFF10, 0x1D7CE, 0x9E6, 0xE50, 0x6F0};
  const uint64_t n = rng.between(1, 40);
  const char32_t zero = rng.pick(kZero);
  for (uint64_t i = 0; i < n; ++i) {
    put(zero + static_cast<char32_t>(rng.below(10)), out);
    if (rng.chance(8)) out += rng.pick(std::array<std::string_view, 6>{".", ",", " ", "e", "²", "Ⅻ"});
  }
}

void contractions(Rng& rng, std::string& out) {
  const uint64_t n = rng.between(1, 6);
  for (uint64_t i = 0; i < n; ++i) {
    out += rng.pick(kWords);
    out += rng.chance(85) ? rng.pick(kContractions)
                          : rng.pick(std::array<std::string_view, 5>{"’s", "''", "'", "'x", "'sa"});
    if (rng.chance(70)) out += ' ';
  }
}

void long_run(Rng& rng, std::string& out) {
  static constexpr std::array<std::string_view, 14> kRun = {" ", "\n",      "\r\n", "a",  "=",      "-",  "😀",
                                                            "1", "e\u0301", "\t",   "中", "\u3000", "ab", "'s"};
  const std::string_view unit = rng.pick(kRun);
  for (uint64_t n = rng.between(20, 2000); n > 0; --n) out += unit;
}

void special_tokens(Rng& rng, const std::vector<std::string>& specials, std::string& out) {
  static constexpr std::array<std::string_view, 10> kLookAlikes = {
      "<|im_start",  "im_start|>",  "<|im_end",   "<||>",    "<|IM_START|>",
      "< |im_end|>", "<|endoftext", "<thinking>", "</think", "<|im_start|"};
  const uint64_t n = rng.between(1, 5);
  for (uint64_t i = 0; i < n; ++i) {
    if (rng.chance(60) && !specials.empty()) {
      out += specials[rng.below(specials.size())];
    } else {
      out += rng.pick(kLookAlikes);
    }
    if (rng.chance(50)) out += rng.pick(kWords);
    if (rng.chance(30)) put(rng.pick(kSpaces), out);
  }
}

void prose(Rng& rng, std::string& out) {
  static constexpr std::array<std::string_view, 8> kSnippets = {
      "def f(x):\n    return x ** 2\n",  "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n",
      "https://example.com/a?b=c&d=e#f", "user@example.org",
      "$ ls -la | grep \"*.txt\"\n",     "  - item one\n  - item two\n\n",
      "<div class=\"x\">text</div>",     "x = {'a': 1, \"b\": [2, 3]}"};
  const uint64_t n = rng.between(1, 12);
  for (uint64_t i = 0; i < n; ++i) {
    if (rng.chance(15)) {
      out += rng.pick(kSnippets);
    } else {
      out += rng.pick(kWords);
      if (rng.chance(25)) out += rng.pick(kPunct);
    }
    out += rng.chance(85) ? " " : (rng.chance(50) ? "\n" : "  ");
  }
}

void invalid_utf8(Rng& rng, std::string& out) {
  static constexpr std::array<std::string_view, 12> kBad = {
      "\xFF", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80",     "\xE2\x82", "\xF0\x9F\x98", "\x80",
      "\xC3", "\xF5\xBF", "\xE0\x80\xAF", "\xF8\x88\x80\x80\x80", "\xBF\xBF"};
  const uint64_t n = rng.between(1, 4);
  for (uint64_t i = 0; i < n; ++i) {
    if (rng.chance(70)) {
      out += rng.pick(kBad);
    } else {
      out += static_cast<char>(rng.below(256));
    }
    if (rng.chance(50)) out += rng.pick(kWords);
  }
}

}  // namespace

std::vector<std::string> adversarial_corpus(const CorpusOptions& options) {
  Rng rng(options.seed);
  std::vector<std::string> corpus;
  corpus.reserve(options.count);
  while (corpus.size() < options.count) {
    std::string s;
    const uint64_t fragments = rng.between(1, 6);
    for (uint64_t f = 0; f < fragments; ++f) {
      switch (rng.below(20)) {
        case 0:
        case 1:
        case 2:
          whitespace_fragment(rng, s);
          break;
        case 3:
        case 4:
          random_codepoints(rng, s);
          break;
        case 5:
        case 6:
          combining(rng, s);
          break;
        case 7:
        case 8:
          cjk(rng, s);
          break;
        case 9:
        case 10:
          emoji(rng, s);
          break;
        case 11:
          digits(rng, s);
          break;
        case 12:
        case 13:
          contractions(rng, s);
          break;
        case 14:
          if (rng.chance(30)) long_run(rng, s);
          break;
        case 15:
        case 16:
          special_tokens(rng, options.special_tokens, s);
          break;
        case 17:
        case 18:
          prose(rng, s);
          break;
        default:
          if (options.include_invalid_utf8) invalid_utf8(rng, s);
          break;
      }
    }
    corpus.push_back(std::move(s));
  }
  return corpus;
}

}  // namespace nanoinfer::test
