// The Split pre-tokenizer of Qwen2-style tokenizers: the model's regex, matched by hand.
//
// std::regex has no \p{..} classes and is far too slow, and a general regex engine is more
// than one pattern needs. So the loader recognises the pattern text and runs this
// hand-written matcher for it, which reproduces the regex's leftmost, first-alternative
// semantics alternative by alternative (see pretokenize.cpp). Patterns it does not know are
// rejected at load time. Known patterns (they differ only in the digit run length):
//
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   (Qwen2/2.5), and the same with \p{N}{1,3} (Llama 3).
//
// Classes: \p{L} and \p{N} are Unicode general categories L* and N* (from utf8proc);
// \s is the Unicode White_Space property, as in the reference (which rewrites \s to
// \p{White_Space}): it includes U+0085 and U+00A0 but not U+001C..U+001F (which C's isspace
// and Python's str.isspace count as space) nor U+200B or U+FEFF. (?i:...) folds ASCII only,
// as the reference does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace nanoinfer {

class SplitPattern {
 public:
  // nullopt when `regex` is not a pattern this matcher reproduces.
  static std::optional<SplitPattern> from_regex(std::string_view regex);
  static std::string_view supported_description();

  // Appends the pieces of `text` (valid UTF-8), in order; they tile `text` exactly.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

 private:
  explicit SplitPattern(size_t max_digits) : max_digits_(max_digits) {}
  size_t max_digits_;  // \p{N} (1) or \p{N}{1,3} (3)
};

// Character classes used by the pattern, as bit flags.
enum CharClass : uint8_t {
  kClassLetter = 1,   // \p{L}
  kClassNumber = 2,   // \p{N}
  kClassSpace = 4,    // White_Space
  kClassNewline = 8,  // \r or \n (also kClassSpace)
};
uint8_t char_class(char32_t cp);

}  // namespace nanoinfer
