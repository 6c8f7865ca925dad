// GBNF text -> a syntax tree of rules (the first half of Grammar::from_gbnf, src/grammar/grammar.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/utf8_ranges.h"
#include "nanoinfer/grammar.h"

namespace nanoinfer {

struct Node {
  enum Kind { Seq, Alt, Range, Ref, Repeat, Literal } kind = Seq;
  std::vector<Node> kids;
  uint8_t lo = 0, hi = 0;  // Range
  std::string name;        // Ref: the rule's name; Literal: its bytes (a node per byte cost ~100 bytes each)
  size_t line = 0;         // Ref
  uint32_t min = 0, max = 0;
  bool unbounded = false;  // Repeat
};

// The rules of a GBNF text in order, each with its body. Throws Error naming the line.
// Charges `budget` a step per byte of text and per node made.
std::vector<std::pair<std::string, Node>> parse_gbnf(std::string_view text, GrammarBudget& budget);

}  // namespace nanoinfer
