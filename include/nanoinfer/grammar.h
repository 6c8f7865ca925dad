// Constrained decoding: a grammar over bytes, its incremental parser, the token mask it puts on
// the whole vocabulary each step, and the logit processor that applies it.
//
// A Grammar is a set of rules (sequences, alternatives, repetitions, character classes,
// literals), written in llama.cpp's GBNF text format (docs/SERVING.md, "Structured output") or
// produced from a JSON Schema (nanoinfer/json_schema.h). Everything is compiled down to bytes:
// a character class over code points becomes alternatives of UTF-8 byte ranges, so
// the parser advances one byte at a time and a token whose bytes end in the middle of a
// character (byte-level BPE has many) is judged exactly, by the bytes it has.
//
// The parser state (GrammarState) is a set of stacks, as in a pushdown automaton: each stack is
// the positions left to match in the rules entered so far, its top always a byte range. A byte
// advances every stack whose top accepts it. The state is complete (the text so far is a whole
// sentence of the grammar) when one of its stacks is empty. Left-recursive rules are refused
// when the grammar is built (they would expand forever), and so are rules that can never
// finish; a rule entered again over the same stack within one byte is expanded once, so a
// cycle through the ends of alternatives, as in `(a*)*`, is fine. Every pass is iterative:
// no grammar can deepen the C++ stack.
//
// The mask (TokenMasker): the vocabulary is a byte trie (VocabTrie, built once per tokenizer),
// walked depth first against the parser, a branch dropped as soon as its bytes kill every
// stack, so the cost is the part of the trie the grammar allows, not the vocabulary. The walk
// runs on an automaton whose states are the parser's stack sets, built lazily: each state's
// successor on a byte is computed once, then read from a table (src/grammar/parser_automaton.h).
// Inside a free JSON string nearly every token is allowed; there the walk skips every subtree
// whose tokens are all string content (no '"', '\', control byte or bad UTF-8) with no more
// characters than the grammar can take from the state (checked on the automaton, per state),
// and marks its tokens wholesale. Special added tokens (<|im_end|>, ...) are never allowed by
// the grammar; non-special ones (Qwen2.5's <tool_call>, <think>, ...) are judged by their text
// like any token, as the tokenizer itself reads that text; an end-of-sequence id is allowed
// exactly when the state is complete.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/logit_processor.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

// What compiling one grammar may cost, and a way to stop it from outside. Every pass of the
// compiler (JSON Schema -> GBNF, GBNF -> rules, the rules' analysis, the first parser state and
// the ambiguity probe) charges its steps of work here: a byte of text read or written, a symbol
// emitted, a rule entered. Each pass is linear (or n log n) in the size of what it reads, so
// the steps count the work exactly and a budget bounds the CPU a grammar from the network can
// take. Past `max_steps`, or once `cancelled()` returns true (asked every 2^16 steps), charge()
// throws Error; no pass recurses to a depth its input controls, so the error is always what a
// hostile grammar gets.
class GrammarBudget {
 public:
  // ~3 s of one core: a GBNF compile runs at ~46 ns a step (200,000 rules, AMD EPYC Zen 5).
  static constexpr uint64_t kDefaultSteps = 64'000'000;
  explicit GrammarBudget(uint64_t max_steps = kDefaultSteps, std::function<bool()> cancelled = {})
      : max_(max_steps), cancelled_(std::move(cancelled)) {}
  void charge(uint64_t steps) {
    used_ += steps;
    if (used_ > max_ || used_ >= next_poll_) check();
  }
  uint64_t used() const { return used_; }
  uint64_t max_steps() const { return max_; }

 private:
  void check();
  uint64_t max_;
  uint64_t used_ = 0;
  uint64_t next_poll_ = 0;
  std::function<bool()> cancelled_;
};

class Grammar {
 public:
  // Parses GBNF text (rules `name ::= ...`, `#` comments, literals "...", classes [...] and
  // [^...], `.`, groups, `|`, `*`, `+`, `?`, `{m}`, `{m,}`, `{m,n}`); `root` names the start
  // rule. Throws nanoinfer::Error naming the line and what is wrong (undefined rule, left
  // recursion, bad escape, ...). `budget`: nullptr compiles under a default GrammarBudget.
  static Grammar from_gbnf(std::string_view text, std::string_view root = "root", GrammarBudget* budget = nullptr);

  // Checks, before any token is generated, that the parser stays within its limits on the
  // first bytes it can meet: the automaton is explored breadth first from the start, byte
  // class by byte class, up to `max_states` states. A grammar so ambiguous that a few bytes
  // already hold more than kMaxGrammarStacks parses is refused here (Error) instead of failing
  // mid-generation. Deeper ambiguity is still found at the step that meets it.
  void probe(GrammarBudget& budget, size_t max_states = 4096) const;

  size_t rule_count() const;
  size_t symbol_count() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  friend class GrammarState;
  friend class TokenMasker;
  explicit Grammar(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// The incremental parser of one sequence. Cheap to copy (a copy is an independent state).
class GrammarState {
 public:
  explicit GrammarState(const Grammar& grammar);

  // Advances by one byte / by every byte of `bytes`. Returns false, leaving the state
  // unchanged, when the grammar does not allow it.
  bool advance(uint8_t byte);
  bool advance(std::string_view bytes);

  bool complete() const;      // the bytes so far are a whole sentence: end of sequence allowed
  bool can_continue() const;  // some byte may follow
  size_t stack_count() const { return stacks_.size(); }

  using Stack = std::vector<uint32_t>;

 private:
  friend class Grammar;
  friend class TokenMasker;
  GrammarState(std::shared_ptr<const Grammar::Impl> g, std::vector<Stack> stacks)
      : g_(std::move(g)), stacks_(std::move(stacks)) {}
  std::shared_ptr<const Grammar::Impl> g_;
  std::vector<Stack> stacks_;  // sorted, unique; a state with none is dead
};

// The vocabulary as a byte trie in depth-first order, for the mask walk.
class VocabTrie {
 public:
  // `token_bytes[id]`: the bytes of token id, empty for ids that are never allowed by a grammar
  // (special tokens, holes in the vocabulary).
  explicit VocabTrie(std::span<const std::string> token_bytes);
  // Every token of `tok` by its bytes but the special added ones (a non-special added token,
  // such as Qwen2.5's <tool_call>, by its content).
  static std::shared_ptr<const VocabTrie> of(const Tokenizer& tok);

  size_t vocab_size() const { return bytes_.size(); }
  size_t node_count() const { return nodes_.size(); }
  std::string_view bytes(int32_t id) const;  // "" for ids outside the trie

  // The most characters of a token that is all JSON string content (string_content.h).
  uint32_t max_content_count() const { return max_content_count_; }

 private:
  friend class TokenMasker;
  struct Node {
    uint8_t byte;
    // The most characters of string content (string_content.h) a token in the subtree has
    // from this node's byte on; 255: some token's bytes from there are not string content.
    uint8_t tail_content;
    uint32_t depth;      // 1 for children of the root
    uint32_t end;        // index just past this node's subtree
    uint32_t tok_begin;  // tokens ending here: ids_[tok_begin, tok_end)
    uint32_t tok_end;
  };
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  std::vector<std::string> bytes_;
  uint32_t max_depth_ = 0;
  uint32_t max_content_count_ = 0;
};

// The token mask of one grammar over one vocabulary. It keeps what it learns (the automaton's
// states and transitions, each state's string-content depth) across calls, so it is one per
// sequence or per thread, not shared. Once the states of a mask are known it allocates nothing.
class TokenMasker {
 public:
  struct Options {
    bool content_shortcut = true;  // off: every live node is walked (for tests)
    size_t max_states = 1u << 16;  // past this many automaton states, a mask call starts afresh
  };
  // `trie` must outlive the masker.
  TokenMasker(const Grammar& grammar, const VocabTrie& trie, Options options);
  TokenMasker(const Grammar& grammar, const VocabTrie& trie) : TokenMasker(grammar, trie, Options{}) {}
  ~TokenMasker();
  TokenMasker(TokenMasker&&) noexcept;
  TokenMasker& operator=(TokenMasker&&) noexcept;

  // allowed[id] = 1 when the grammar allows token id's bytes from `state` (nothing else is
  // set: end-of-sequence ids are the caller's). `allowed` is resized to the vocabulary's size.
  void mask(const GrammarState& state, std::vector<uint8_t>& allowed);

  // The work done so far, counted: trie nodes stepped through the automaton, tokens marked
  // wholesale as string content, automaton states and computed transitions.
  struct Work {
    uint64_t nodes_walked = 0;
    uint64_t content_tokens = 0;
    size_t states = 0;
    size_t transitions = 0;
  };
  Work work() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The grammar as a logit processor: scores of tokens the grammar does not allow become
// -infinity; an end-of-sequence id (`eos_ids`) keeps its score only when the text so far is
// complete. accept() advances the parser. Throws Error when no token at all is allowed (a
// complete grammar without an end-of-sequence id, or a tokenizer that cannot spell the
// continuation).
class GrammarProcessor final : public LogitProcessor {
 public:
  GrammarProcessor(const Grammar& grammar, std::shared_ptr<const VocabTrie> trie, std::vector<int32_t> eos_ids);
  void process(std::span<double> scores, std::span<const int32_t> context) override;
  void accept(int32_t token) override;
  void restart() override;  // the parser starts over
  std::string_view name() const override { return "grammar"; }
  const GrammarState& state() const { return state_; }

 private:
  Grammar grammar_;
  std::shared_ptr<const VocabTrie> trie_;
  std::vector<int32_t> eos_ids_;
  GrammarState state_;
  TokenMasker masker_;
  std::vector<uint8_t> allowed_;
  bool ended_ = false;
};

// GBNF of any JSON object (response_format json_object), compact: no whitespace.
std::string json_object_gbnf();

// JSON Schema (text) -> GBNF (src/grammar/json_schema.cpp).
// Supported: type (incl. lists), properties, required, additionalProperties (false / true /
// schema; absent with `properties` means none are generated), items, prefixItems, minItems,
// maxItems, enum, const, anyOf, oneOf (branches of distinct types or disjoint constants),
// allOf (merged), $ref / $defs / definitions (recursive too), minLength, maxLength, pattern
// (the regex subset of docs/SERVING.md), minimum / maximum / exclusiveMinimum / exclusiveMaximum on
// integers; annotations (title, description, default, examples, $schema, $id, $comment) are
// ignored. Anything else throws Error naming the keyword and where it is.
// The schema may nest kMaxJsonDepth (json_limits.h) levels, as any JSON the program reads.
std::string json_schema_to_gbnf(std::string_view schema_json, GrammarBudget* budget = nullptr);

// The same schema as rules of a larger grammar (several schemas in one, as tool calls need):
// every rule it defines is named with `prefix` (non-empty), the schema's own rule being
// `prefix` + "root", and the basic JSON rules it refers to (value, object, string, number,
// ...) are left out: add json_basics_gbnf() once to the whole grammar.
std::string json_schema_to_gbnf_rules(std::string_view schema_json, std::string_view prefix,
                                      GrammarBudget* budget = nullptr);
std::string json_basics_gbnf();

}  // namespace nanoinfer
