// The compiled grammar (Grammar::Impl), shared by the reference parser (grammar.cpp) and the
// mask's automaton (parser_automaton.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanoinfer/grammar.h"

namespace nanoinfer {

struct Grammar::Impl {
  enum Kind : uint8_t { End, Bytes, Ref };
  struct Sym {
    Kind kind;
    uint8_t lo, hi;  // Bytes: the byte range
    uint32_t rule;   // Ref: the rule
  };
  std::vector<Sym> syms;                    // every alternative, each closed by End
  std::vector<std::vector<uint32_t>> alts;  // per rule: where its alternatives start in syms
  std::vector<std::string> names;           // per rule, for errors
  uint32_t root = 0;
};

// More parses at once than this is refused as too ambiguous (both parsers check it), as is a
// byte whose expansion visits more than kMaxExpandWork symbols (both parsers count alike).
constexpr size_t kMaxGrammarStacks = 1u << 16;
constexpr size_t kMaxExpandWork = 1u << 23;

}  // namespace nanoinfer
