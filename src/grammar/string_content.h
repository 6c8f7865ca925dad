// The content of a JSON string as a byte automaton: the code points of `[^"\\\x00-\x1F]`
// (the `char` class of every JSON grammar here; surrogates are not code points of UTF-8), a
// text ending anywhere, inside a character too. The mask uses it to decide whole subtrees of
// the vocabulary at once where the grammar is inside a free string (token_masker.cpp).
#pragma once

#include <cstdint>
#include <string_view>

namespace nanoinfer::string_content {

// States: 0 at a character boundary, 1..7 inside a character (which continuation bytes may
// follow differs after E0, ED, F0 and F4).
constexpr uint8_t kBoundary = 0;
constexpr uint8_t kStates = 8;
constexpr uint8_t kNotContent = 255;  // count_of: the bytes are not string content

struct Step {
  int8_t to;              // the next state; -1: the byte cannot follow
  bool starts_character;  // the byte begins a character (counted)
};
Step step(uint8_t state, uint8_t byte);

// The characters `bytes` begin, from a boundary (a trailing incomplete one counts), capped at
// 254; kNotContent when some byte cannot follow.
uint8_t count_of(std::string_view bytes);

// tails[k] = count_of(bytes.substr(k)) for every k, in one pass from the back (tails holds
// bytes.size() entries).
void tail_counts(std::string_view bytes, uint8_t* tails);

}  // namespace nanoinfer::string_content
