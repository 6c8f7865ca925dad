// Whether a grammar accepts a whole text: the reference parser state advanced over its bytes
// and left complete. Shared by the grammar and JSON Schema tests.
#pragma once

#include <string_view>

#include "nanoinfer/grammar.h"

namespace nanoinfer::test {

inline bool matches(const Grammar& g, std::string_view text) {
  GrammarState s(g);
  return s.advance(text) && s.complete();
}

}  // namespace nanoinfer::test
