// The grammar engine on grammars built to hurt it: chains of rules and references deep enough to
// overflow any recursion, schemas whose compilation was quadratic, ambiguity that explodes
// within a few bytes, and the budget that bounds what one grammar may cost. Work is counted by
// the GrammarBudget's steps, never timed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/json_limits.h"
#include "support/grammar_match.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

using test::matches;

std::string limit_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// r0 ::= r1, r1 ::= r2, ..., r{n} ::= "z": every rule entered before a byte, n deep.
std::string rule_chain(size_t n) {
  std::string g;
  for (size_t i = 0; i < n; ++i) g += fmt::format("r{} ::= r{}\n", i, i + 1);
  g += fmt::format("r{} ::= \"z\"\n", n);
  return g;
}

// How long the chains below are: 60,000 links overflowed the recursive passes; under the
// sanitizers (~30x slower here, with larger frames) 15,000 still would.
constexpr int kChain = test::kSanitized ? 15000 : 60000;

TEST(GrammarLimits, LongRuleChainsCompileAndRunWithoutRecursion) {
  // 50,000 levels overflowed the recursive expansion of the first state.
  const Grammar g = Grammar::from_gbnf(rule_chain(kChain), "r0");
  EXPECT_TRUE(matches(g, "z"));
  EXPECT_FALSE(matches(g, "zz"));
  // The mask's automaton expands the same chain.
  const std::vector<std::string> vocab = {"z", "y", "zz"};
  const VocabTrie trie(vocab);
  TokenMasker masker(g, trie);
  std::vector<uint8_t> allowed;
  masker.mask(GrammarState(g), allowed);
  EXPECT_EQ(allowed, (std::vector<uint8_t>{1, 0, 0}));
  // Tails left on the stack at every level: the stack is kChain deep after the first byte.
  std::string nested;
  for (int i = 0; i < kChain; ++i) nested += fmt::format("n{} ::= \"(\" n{} \")\"\n", i, i + 1);
  nested += fmt::format("n{} ::= \"x\"\n", kChain);
  const Grammar h = Grammar::from_gbnf(nested, "n0");
  EXPECT_TRUE(matches(h, std::string(kChain, '(') + "x" + std::string(kChain, ')')));
}

TEST(GrammarLimits, LongRefChainsInSchemasCompile) {
  // A $defs chain of kChain references: each reference's rule is written from a work list.
  std::string defs;
  for (int i = 0; i < kChain; ++i)
    defs += fmt::format("{}\"d{}\":{{\"$ref\":\"#/$defs/d{}\"}}", i ? "," : "", i, i + 1);
  defs += fmt::format(",\"d{}\":{{\"type\":\"integer\",\"minimum\":0,\"maximum\":9}}", kChain);
  const std::string schema = "{\"$ref\":\"#/$defs/d0\",\"$defs\":{" + defs + "}}";
  GrammarBudget large(1'000'000'000);
  const Grammar g = Grammar::from_gbnf(json_schema_to_gbnf(schema, &large), "root", &large);
  EXPECT_TRUE(matches(g, "7"));
  EXPECT_FALSE(matches(g, "12"));
}

TEST(GrammarLimits, SchemasNestedDeeperThanTheJsonLimitAreRefusedByName) {
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"anyOf\":[";
  deep += "{\"type\":\"integer\"}";
  for (int i = 0; i < 100000; ++i) deep += "]}";
  EXPECT_NE(limit_error_of([&] { json_schema_to_gbnf(deep); }).find("JSON Schema: JSON nested deeper than 64 levels"),
            std::string::npos);
  // Within the limit, however the schema nests, the grammar text stays within the GBNF
  // parser's own limit on groups (deep expressions become rules).
  std::string ok = "{\"type\":\"integer\"}";
  for (int i = 0; i < 31; ++i) ok = "{\"anyOf\":[" + ok + ",{\"type\":\"null\"}]}";
  const Grammar g = Grammar::from_gbnf(json_schema_to_gbnf(ok));
  EXPECT_TRUE(matches(g, "42"));
  EXPECT_TRUE(matches(g, "null"));
  // A pattern's groups are bounded too.
  const std::string pattern =
      "{\"type\":\"string\",\"pattern\":\"" + std::string(40, '(') + "a" + std::string(40, ')') + "\"}";
  EXPECT_NE(limit_error_of([&] { json_schema_to_gbnf(pattern); }).find("groups nested deeper than 32"),
            std::string::npos);
}

// Steps charged to compile `gbnf_or_schema` (a schema when it starts with '{'), but for the
// ordered parse of the schema's objects, which is quadratic in an object's members and is
// charged by its own count (ordered_parse_cost, tested below).
uint64_t steps(const std::string& text) {
  GrammarBudget budget(1'000'000'000);
  const std::string gbnf = text[0] == '{' ? json_schema_to_gbnf(text, &budget) : text;
  Grammar::from_gbnf(gbnf, "root", &budget).probe(budget);
  return budget.used() - (text[0] == '{' ? ordered_parse_cost(text) / 32 : 0);
}

std::string object_schema(int n, bool properties, bool required) {
  std::string props, req;
  for (int i = 0; i < n; ++i) {
    props += fmt::format("{}\"property_with_a_long_shared_prefix_{}\":{{\"type\":\"integer\"}}", i ? "," : "", i);
    req += fmt::format("{}\"property_with_a_long_shared_prefix_{}\"", i ? "," : "", i);
  }
  std::string s = "{\"type\":\"object\"";
  if (properties) s += ",\"properties\":{" + props + "}";
  if (required) s += ",\"required\":[" + req + "]";
  return s + "}";
}

// Compile work grows linearly: doubling the input at most doubles the steps (plus a margin for
// the fixed part and for numbers one digit longer), where the quadratic passes (a line count from
// the start per rule reference, rule names numbered from 2 each time, oneOf compared pairwise,
// the extra-key trie rescanning every name per prefix) made it four times.
TEST(GrammarLimits, CompileWorkIsLinearInTheGrammarsSize) {
  const auto ratio = [](const std::function<std::string(int)>& make, int n) {
    const double a = static_cast<double>(steps(make(n)));
    const double b = static_cast<double>(steps(make(2 * n)));
    return b / a;
  };
  EXPECT_LT(ratio([](int n) { return "root ::= r0\n" + rule_chain(static_cast<size_t>(n)); }, 4000), 2.3);
  EXPECT_LT(ratio([](int n) { return object_schema(n, true, false); }, 1000), 2.3);
  EXPECT_LT(ratio([](int n) { return object_schema(n, true, true); }, 1000), 2.3);
  EXPECT_LT(ratio([](int n) { return object_schema(n, false, true); }, 1000), 2.3);
  EXPECT_LT(ratio(
                [](int n) {
                  std::string s = object_schema(n, true, false);
                  return s.substr(0, s.size() - 1) + ",\"additionalProperties\":{\"type\":\"string\"}}";
                },
                1000),
            2.3);
  EXPECT_LT(ratio(
                [](int n) {
                  std::string e;
                  for (int i = 0; i < n; ++i) e += fmt::format("{}\"value-{}\"", i ? "," : "", i);
                  return "{\"enum\":[" + e + "]}";
                },
                4000),
            2.3);
  EXPECT_LT(ratio(
                [](int n) {
                  std::string b;
                  for (int i = 0; i < n; ++i) b += fmt::format("{}{{\"const\":{}}}", i ? "," : "", i);
                  return "{\"oneOf\":[" + b + "]}";
                },
                2000),
            2.3);
}

TEST(GrammarLimits, TheBudgetStopsACompileAndSoDoesCancellation) {
  const std::string big = object_schema(3000, true, true);
  GrammarBudget measure(1'000'000'000);
  Grammar::from_gbnf(json_schema_to_gbnf(big, &measure), "root", &measure).probe(measure);
  const uint64_t need = measure.used();
  GrammarBudget small(need / 2);
  EXPECT_NE(
      limit_error_of([&] { Grammar::from_gbnf(json_schema_to_gbnf(big, &small), "root", &small); }).find("more than"),
      std::string::npos);
  GrammarBudget enough(need);
  EXPECT_EQ(
      limit_error_of([&] { Grammar::from_gbnf(json_schema_to_gbnf(big, &enough), "root", &enough).probe(enough); }),
      "");
  int asked = 0;
  GrammarBudget cancelled(GrammarBudget::kDefaultSteps, [&] { return ++asked > 1; });
  EXPECT_NE(limit_error_of([&] {
              Grammar::from_gbnf(json_schema_to_gbnf(big, &cancelled), "root", &cancelled);
            }).find("cancelled"),
            std::string::npos);
  EXPECT_GE(asked, 2);
}

TEST(GrammarLimits, OrderedParseCostCountsEachObjectsMembersSquared) {
  EXPECT_EQ(ordered_parse_cost("[1,2,3]"), 0u);
  EXPECT_EQ(ordered_parse_cost("{}"), 0u);
  EXPECT_EQ(ordered_parse_cost(R"({"a":1,"b":{"c":[1,2],"d":"}{,,"},"e":3})"), 3u * 3 / 2 + 2 * 2 / 2);
  std::string wide = "{";
  for (int i = 0; i < 1000; ++i) wide += fmt::format("{}\"k{}\":{{}}", i ? "," : "", i);
  EXPECT_EQ(ordered_parse_cost(wide + "}"), 1000u * 1000 / 2);
}

TEST(GrammarLimits, NullableRepetitionsAreNotLeftRecursion) {
  // (a*)*: the outer repetition enters itself after an empty inner one, at the end of its
  // alternative, over the same stack: no left recursion, and the language is a*.
  for (const char* gbnf : {"root ::= (\"a\"*)*\n", "root ::= ((\"a\" | \"b\")* \"\"?)+ \"c\"?\n"}) {
    const Grammar g = Grammar::from_gbnf(gbnf);
    EXPECT_TRUE(matches(g, "aaa")) << gbnf;
    EXPECT_FALSE(matches(g, "x")) << gbnf;
    // The mask agrees with the reference parser on it.
    const std::vector<std::string> vocab = {"a", "aa", "b", "x", "ax"};
    const VocabTrie trie(vocab);
    TokenMasker masker(g, trie);
    std::vector<uint8_t> allowed;
    GrammarState state(g);
    for (int k = 0; k < 3; ++k) {
      masker.mask(state, allowed);
      for (size_t id = 0; id < vocab.size(); ++id) {
        GrammarState copy = state;
        EXPECT_EQ(allowed[id] != 0, copy.advance(vocab[id])) << gbnf << " " << vocab[id];
      }
      ASSERT_TRUE(state.advance("a"));
    }
  }
  EXPECT_TRUE(matches(Grammar::from_gbnf("root ::= (\"a\"*)*\n"), ""));
}

TEST(GrammarLimits, AmbiguityThatExplodesInAFewBytesIsRefusedBeforeGenerating) {
  // Every 'a' doubles the distinct parses (each remembers a choice of closing byte): past the
  // limit after 17 bytes, found by the probe before any token is generated.
  const Grammar g = Grammar::from_gbnf("root ::= \"a\" root \"b\" | \"a\" root \"c\" | \"\"\n");
  GrammarBudget budget;
  EXPECT_NE(limit_error_of([&] { g.probe(budget); }).find("too ambiguous"), std::string::npos);
  // The same from a schema's pattern: a run of a's splits into words of 1..399 a's in
  // exponentially many ways, and the parses remember where each word began.
  std::string words;
  for (int k = 1; k < 400; ++k) words += (k > 1 ? "|" : "") + std::string(static_cast<size_t>(k), 'a');
  GrammarBudget b2;
  const std::string schema = "{\"type\":\"string\",\"pattern\":\"^(" + words + ")+$\"}";
  EXPECT_NE(limit_error_of([&] {
              Grammar::from_gbnf(json_schema_to_gbnf(schema, &b2), "root", &b2).probe(b2);
            }).find("too ambiguous"),
            std::string::npos);
  // Ambiguity that collapses: each character may end any of 1,000 repetitions, but entering a
  // rule again over the same stack is done once per byte, so the parses stay bounded (this
  // failed at the first token, over the limit).
  GrammarBudget b3;
  const Grammar dots =
      Grammar::from_gbnf(json_schema_to_gbnf(R"({"type":"string","pattern":"^(.*){1,1000}$"})", &b3), "root", &b3);
  dots.probe(b3);
  GrammarState state(dots);
  ASSERT_TRUE(state.advance("\"abcdefghijklmnopqrstuvwxyz"));
  EXPECT_LE(state.stack_count(), 50000u);
  EXPECT_TRUE(state.advance("\"") && state.complete());
  // An unambiguous grammar passes the probe with work to spare.
  GrammarBudget fine;
  Grammar::from_gbnf(json_object_gbnf(), "root", &fine).probe(fine);
  EXPECT_LT(fine.used(), fine.max_steps() / 100);
}

}  // namespace
}  // namespace nanoinfer
