// The token mask (nanoinfer/grammar.h, TokenMasker): the vocabulary trie walked on the parser's
// automaton (parser_automaton.h), with whole subtrees of string content decided at once.
//
// The shortcut, and why it is exact. A state's content depth D is the largest d such that
// every JSON string content (string_content.h) of at most d characters — a trailing
// incomplete character counted — leaves some stack alive. The trie stores per node the most
// characters the tokens below it have from the node's byte on, 255 when one of those tails is
// not string content (computed once per vocabulary). When the walk stands on a state whose D
// is at least a child's number, every token below that child is allowed: the subtree is
// marked without a step. Every other node is walked as before, so the mask is the same set as
// the walk alone gives; D is computed on the automaton itself, never assumed from the
// grammar's shape, so a grammar whose strings take fewer characters (maxLength), other
// characters (a pattern) or no string at all simply gets a smaller D (0: no shortcut).
//
// D is found by a search over pairs (automaton state, content state) with the characters still
// to check: covers(x, u, d) holds when every content continuation from content state u with at
// most d more characters keeps x alive. Only one byte per byte class of the automaton needs
// trying (the bytes of a class move every stack alike), memoized per pair as the largest d
// known to hold and the smallest known to fail (covers is monotone in d).
#include <algorithm>

#include "grammar/parser_automaton.h"
#include "grammar/string_content.h"
#include "nanoinfer/grammar.h"

namespace nanoinfer {

struct TokenMasker::Impl {
  Impl(const Grammar& grammar, const VocabTrie& t, Options o) : trie(t), options(o), automaton(grammar.impl_) {
    depth_state.resize(trie.max_depth_ + 1);
    depth_content.assign(trie.max_depth_ + 1, 0);
    // Per content state, one byte for each (byte class, next content state) it may take.
    for (uint8_t u = 0; u < string_content::kStates; ++u) {
      for (int b = 0; b < 256; ++b) {
        const string_content::Step s = string_content::step(u, static_cast<uint8_t>(b));
        if (s.to < 0) continue;
        const uint8_t cls = automaton.byte_class(static_cast<uint8_t>(b));
        auto& list = probes[u];
        const bool seen = std::any_of(list.begin(), list.end(), [&](const Probe& p) {
          return automaton.byte_class(p.byte) == cls && p.to == s.to;
        });
        if (!seen) list.push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(s.to), s.starts_character});
      }
    }
    cap = static_cast<int>(std::min<uint32_t>(trie.max_content_count_, 254));
  }

  struct Probe {
    uint8_t byte;
    uint8_t to;
    bool counts;
  };
  struct Known {
    int16_t holds = -1;     // covers(.., d) for every d <= holds
    int16_t fails = 32767;  // not for any d >= fails
  };

  const VocabTrie& trie;
  Options options;
  ParserAutomaton automaton;
  std::vector<Probe> probes[string_content::kStates];
  int cap = 0;
  std::vector<Known> known;           // [state][content state]
  std::vector<int16_t> depth;         // [state]: its content depth, -1 unknown
  std::vector<uint32_t> depth_state;  // [trie depth]: the state on the walk's current path
  std::vector<int> depth_content;     // [trie depth]: its content depth
  Work work;

  void forget() {
    automaton.clear();
    known.clear();
    depth.clear();
  }

  bool covers(uint32_t x, uint8_t u, int d) {
    const size_t at = static_cast<size_t>(x) * string_content::kStates + u;
    if (known.size() <= at) known.resize(automaton.state_count() * string_content::kStates);
    if (d <= known[at].holds) return true;
    if (d >= known[at].fails) return false;
    bool ok = true;
    for (const Probe& p : probes[u]) {
      if (p.counts && d == 0) continue;  // a longer content than asked about
      const uint32_t y = automaton.next(x, p.byte);
      if (y == ParserAutomaton::kDead || !covers(y, p.to, p.counts ? d - 1 : d)) {
        ok = false;
        break;
      }
    }
    if (known.size() <= at) known.resize(automaton.state_count() * string_content::kStates);
    Known& k = known[at];  // (the recursion may have grown `known`)
    if (ok) {
      k.holds = static_cast<int16_t>(std::max<int>(k.holds, d));
    } else {
      k.fails = static_cast<int16_t>(std::min<int>(k.fails, d));
    }
    return ok;
  }

  int content_depth(uint32_t x) {
    if (depth.size() <= x) depth.resize(automaton.state_count(), -1);
    if (depth[x] >= 0) return depth[x];
    // covers(x, boundary, 0) holds (the empty text); most states outside strings fail at 1.
    int lo = 0, hi = cap;
    if (hi > 0 && !covers(x, string_content::kBoundary, 1)) hi = 0;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (covers(x, string_content::kBoundary, mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (depth.size() <= x) depth.resize(automaton.state_count(), -1);
    depth[x] = static_cast<int16_t>(lo);
    return lo;
  }

  // Every token below trie node `i` (the node's own included), as allowed.
  void mark_subtree(size_t i, std::vector<uint8_t>& allowed) {
    const std::vector<VocabTrie::Node>& nodes = trie.nodes_;
    const uint32_t first = i < nodes.size() ? nodes[i].tok_begin : 0;
    const uint32_t end = i < nodes.size() ? nodes[i].end : static_cast<uint32_t>(nodes.size());
    const uint32_t last = end < nodes.size() ? nodes[end].tok_begin : static_cast<uint32_t>(trie.ids_.size());
    for (uint32_t t = first; t < last; ++t) allowed[static_cast<size_t>(trie.ids_[t])] = 1;
    work.content_tokens += last - first;
  }

  void mask(const GrammarState& state, std::vector<uint8_t>& allowed) {
    allowed.assign(trie.bytes_.size(), 0);
    if (automaton.state_count() > options.max_states) forget();
    const uint32_t root = automaton.state_of(state.stacks_);
    if (root == ParserAutomaton::kDead) return;
    const bool shortcut = options.content_shortcut;
    const std::vector<VocabTrie::Node>& nodes = trie.nodes_;
    const std::vector<int32_t>& ids = trie.ids_;
    const size_t n = nodes.size();
    depth_state[0] = root;
    depth_content[0] = shortcut ? content_depth(root) : 0;
    for (size_t i = 0; i < n;) {
      const VocabTrie::Node& node = nodes[i];
      if (node.tail_content <= depth_content[node.depth - 1]) {  // (a tail has a character at least)
        mark_subtree(i, allowed);
        i = node.end;
        continue;
      }
      ++work.nodes_walked;
      const uint32_t s = automaton.next(depth_state[node.depth - 1], node.byte);
      if (s == ParserAutomaton::kDead) {
        i = node.end;
        continue;
      }
      depth_state[node.depth] = s;
      if (shortcut && node.end != i + 1) depth_content[node.depth] = content_depth(s);  // it has children
      for (uint32_t t = node.tok_begin; t < node.tok_end; ++t) allowed[static_cast<size_t>(ids[t])] = 1;
      ++i;
    }
  }
};

TokenMasker::TokenMasker(const Grammar& grammar, const VocabTrie& trie, Options options)
    : impl_(std::make_unique<Impl>(grammar, trie, options)) {}
TokenMasker::~TokenMasker() = default;
TokenMasker::TokenMasker(TokenMasker&&) noexcept = default;
TokenMasker& TokenMasker::operator=(TokenMasker&&) noexcept = default;

void TokenMasker::mask(const GrammarState& state, std::vector<uint8_t>& allowed) {
  impl_->mask(state, allowed);
}

TokenMasker::Work TokenMasker::work() const {
  Work w = impl_->work;
  w.states = impl_->automaton.state_count();
  w.transitions = impl_->automaton.transitions_computed();
  return w;
}

}  // namespace nanoinfer
