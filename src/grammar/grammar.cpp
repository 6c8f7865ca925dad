// The grammar engine: GBNF text -> rules over bytes -> a pushdown parser state per sequence ->
// the token mask over a byte trie of the vocabulary (nanoinfer/grammar.h).
#include "nanoinfer/grammar.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_impl.h"
#include "grammar/string_content.h"
#include "grammar/utf8_ranges.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

using Impl = Grammar::Impl;
using Stack = GrammarState::Stack;

constexpr size_t kMaxSymbols = 1u << 22;

// ---- syntax tree -> symbols -------------------------------------------------------------------------

class Compiler {
 public:
  explicit Compiler(Impl& g) : g_(g) {}

  void compile(const std::vector<std::pair<std::string, Node>>& rules, std::string_view root) {
    for (const auto& rule : rules) index_[rule.first] = new_rule(rule.first);
    for (const auto& rule : rules) define(index_.at(rule.first), rule.second, rule.first);
    auto it = index_.find(std::string(root));
    if (it == index_.end()) fail("grammar: no rule '{}' to start from", root);
    g_.root = it->second;
    check_left_recursion();
  }

 private:
  Impl& g_;
  std::map<std::string, uint32_t> index_;

  uint32_t new_rule(std::string name) {
    g_.alts.emplace_back();
    g_.names.push_back(std::move(name));
    return static_cast<uint32_t>(g_.alts.size() - 1);
  }

  void add_alt(uint32_t rule, const std::vector<Impl::Sym>& seq) {
    if (g_.syms.size() + seq.size() + 1 > kMaxSymbols) fail("grammar: over {} symbols", kMaxSymbols);
    g_.alts[rule].push_back(static_cast<uint32_t>(g_.syms.size()));
    g_.syms.insert(g_.syms.end(), seq.begin(), seq.end());
    g_.syms.push_back({Impl::End, 0, 0, 0});
  }

  void define(uint32_t rule, const Node& n, const std::string& ctx) {
    std::vector<const Node*> alts;
    if (n.kind == Node::Alt) {
      for (const Node& k : n.kids) alts.push_back(&k);
    } else {
      alts.push_back(&n);
    }
    for (const Node* a : alts) {
      std::vector<Impl::Sym> seq;
      emit(*a, seq, ctx);
      add_alt(rule, seq);
    }
  }

  Impl::Sym as_symbol(const Node& n, const std::string& ctx) {
    if (n.kind == Node::Range) return {Impl::Bytes, n.lo, n.hi, 0};
    if (n.kind == Node::Ref) return ref(n, ctx);
    const uint32_t r = new_rule(ctx + "/group");
    define(r, n, ctx);
    return {Impl::Ref, 0, 0, r};
  }

  Impl::Sym ref(const Node& n, const std::string& ctx) {
    auto it = index_.find(n.name);
    if (it == index_.end()) fail("grammar line {}: the rule '{}' (used in '{}') is not defined", n.line, n.name, ctx);
    return {Impl::Ref, 0, 0, it->second};
  }

  void emit(const Node& n, std::vector<Impl::Sym>& out, const std::string& ctx) {
    switch (n.kind) {
      case Node::Seq:
        for (const Node& k : n.kids) emit(k, out, ctx);
        return;
      case Node::Range: out.push_back({Impl::Bytes, n.lo, n.hi, 0}); return;
      case Node::Ref: out.push_back(ref(n, ctx)); return;
      case Node::Alt: out.push_back(as_symbol(n, ctx)); return;
      case Node::Repeat: {
        const Impl::Sym sub = as_symbol(n.kids[0], ctx);
        for (uint32_t k = 0; k < n.min; ++k) out.push_back(sub);
        if (n.unbounded) {
          const uint32_t star = new_rule(ctx + "/repeat");
          add_alt(star, {sub, {Impl::Ref, 0, 0, star}});
          add_alt(star, {});
          out.push_back({Impl::Ref, 0, 0, star});
        } else if (n.max > n.min) {
          uint32_t prev = 0;
          for (uint32_t k = 0; k < n.max - n.min; ++k) {
            const uint32_t r = new_rule(ctx + "/optional");
            if (k == 0) {
              add_alt(r, {sub});
            } else {
              add_alt(r, {sub, {Impl::Ref, 0, 0, prev}});
            }
            add_alt(r, {});
            prev = r;
          }
          out.push_back({Impl::Ref, 0, 0, prev});
        }
        return;
      }
    }
  }

  // A rule that can reach itself without consuming a byte would expand forever.
  void check_left_recursion() {
    const size_t n = g_.alts.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t start : g_.alts[r]) {
          bool all = true;
          for (uint32_t p = start; g_.syms[p].kind != Impl::End; ++p) {
            if (g_.syms[p].kind == Impl::Bytes || !nullable[g_.syms[p].rule]) {
              all = false;
              break;
            }
          }
          if (all) {
            nullable[r] = 1;
            changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> first(n);  // rules entered before any byte
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t start : g_.alts[r]) {
        for (uint32_t p = start; g_.syms[p].kind == Impl::Ref; ++p) {
          first[r].push_back(g_.syms[p].rule);
          if (!nullable[g_.syms[p].rule]) break;
        }
      }
    }
    std::vector<char> color(n, 0);  // 0 new, 1 on the path, 2 done
    for (size_t r0 = 0; r0 < n; ++r0) {
      if (color[r0]) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{static_cast<uint32_t>(r0), 0}};
      color[r0] = 1;
      while (!path.empty()) {
        auto& [r, k] = path.back();
        if (k == first[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = first[r][k++];
        if (color[next] == 1) {
          fail("grammar: the rule '{}' is left-recursive (it can reach itself before matching any byte)",
               g_.names[next]);
        }
        if (color[next] == 0) {
          color[next] = 1;
          path.push_back({next, 0});
        }
      }
    }
  }
};

// ---- the parser state -------------------------------------------------------------------------------

// Brings a stack to a byte range on top (or empty: complete), entering rules; appends each
// result to `out`.
void expand(const Impl& g, Stack s, std::vector<Stack>& out) {
  while (true) {
    if (s.empty()) {
      out.push_back(std::move(s));
      return;
    }
    const uint32_t p = s.back();
    const Impl::Sym& y = g.syms[p];
    if (y.kind == Impl::End) {
      s.pop_back();
      continue;
    }
    if (y.kind == Impl::Bytes) {
      out.push_back(std::move(s));
      return;
    }
    s.pop_back();
    if (g.syms[p + 1].kind != Impl::End) s.push_back(p + 1);  // the tail of a rule is dropped
    const auto& alts = g.alts[y.rule];
    for (size_t a = 0; a < alts.size(); ++a) {
      if (out.size() > kMaxGrammarStacks) fail("grammar: over {} parses at once (too ambiguous)", kMaxGrammarStacks);
      Stack t = a + 1 == alts.size() ? std::move(s) : s;
      t.push_back(alts[a]);
      expand(g, std::move(t), out);
    }
    return;
  }
}

void normalize(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// The stacks after `byte` from `from` (empty: not allowed).
void step(const Impl& g, const std::vector<Stack>& from, uint8_t byte, std::vector<Stack>& to) {
  to.clear();
  for (const Stack& s : from) {
    if (s.empty()) continue;
    const Impl::Sym& y = g.syms[s.back()];
    if (byte < y.lo || byte > y.hi) continue;
    Stack t = s;
    ++t.back();
    expand(g, std::move(t), to);
  }
  if (to.size() > 1) normalize(to);
}

}  // namespace

Grammar Grammar::from_gbnf(std::string_view text, std::string_view root) {
  const auto rules = parse_gbnf(text);
  auto impl = std::make_shared<Impl>();
  Compiler(*impl).compile(rules, root);
  return Grammar(std::move(impl));
}

size_t Grammar::rule_count() const { return impl_->alts.size(); }
size_t Grammar::symbol_count() const { return impl_->syms.size(); }

GrammarState::GrammarState(const Grammar& grammar) : g_(grammar.impl_) {
  for (uint32_t start : g_->alts[g_->root]) expand(*g_, Stack{start}, stacks_);
  normalize(stacks_);
}

bool GrammarState::advance(uint8_t byte) {
  std::vector<Stack> next;
  step(*g_, stacks_, byte, next);
  if (next.empty()) return false;
  stacks_ = std::move(next);
  return true;
}

bool GrammarState::advance(std::string_view bytes) {
  std::vector<Stack> cur = stacks_, next;
  for (char c : bytes) {
    step(*g_, cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    cur.swap(next);
  }
  stacks_ = std::move(cur);
  return true;
}

bool GrammarState::complete() const { return !stacks_.empty() && stacks_.front().empty(); }

bool GrammarState::can_continue() const { return !stacks_.empty() && !stacks_.back().empty(); }

// ---- the vocabulary trie and the mask ---------------------------------------------------------------

VocabTrie::VocabTrie(std::span<const std::string> token_bytes) : bytes_(token_bytes.begin(), token_bytes.end()) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty()) order.push_back(static_cast<int32_t>(id));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  std::vector<uint32_t> path;
  std::vector<uint8_t> tails;
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view b = bytes_[id];
    size_t common = 0;
    while (common < prev.size() && common < b.size() && prev[common] == b[common]) ++common;
    while (path.size() > common) {
      nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t k = common; k < b.size(); ++k) {
      const uint32_t at = static_cast<uint32_t>(ids_.size());
      nodes_.push_back({static_cast<uint8_t>(b[k]), 0, static_cast<uint32_t>(k + 1), 0, at, at});
      path.push_back(static_cast<uint32_t>(nodes_.size() - 1));
    }
    // Each node on the path holds the token: its bytes from that node's byte on.
    tails.resize(b.size());
    string_content::tail_counts(b, tails.data());
    for (size_t k = 0; k < path.size(); ++k) {
      uint8_t& tail = nodes_[path[k]].tail_content;
      if (tail != string_content::kNotContent) tail = std::max(tail, tails[k]);
    }
    const uint8_t content = tails[0];
    if (content != string_content::kNotContent) max_content_count_ = std::max<uint32_t>(max_content_count_, content);
    ids_.push_back(id);
    nodes_[path.back()].tok_end = static_cast<uint32_t>(ids_.size());
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(b.size()));
    prev = b;
  }
  while (!path.empty()) {
    nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
    path.pop_back();
  }
}

std::shared_ptr<const VocabTrie> VocabTrie::of(const Tokenizer& tok) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (tok.is_special_token(id)) continue;
    try {
      bytes[static_cast<size_t>(id)] = std::string(tok.token_bytes(id));
    } catch (const Error&) {
      // an id no token has
    }
  }
  return std::make_shared<const VocabTrie>(bytes);
}

std::string_view VocabTrie::bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return {};
  return bytes_[static_cast<size_t>(id)];
}

// ---- the logit processor ----------------------------------------------------------------------------

GrammarProcessor::GrammarProcessor(const Grammar& grammar, std::shared_ptr<const VocabTrie> trie,
                                   std::vector<int32_t> eos_ids)
    : grammar_(grammar), trie_(std::move(trie)), eos_ids_(std::move(eos_ids)), state_(grammar), masker_(grammar_, *trie_) {}

void GrammarProcessor::restart() {
  state_ = GrammarState(grammar_);
  ended_ = false;
}

void GrammarProcessor::process(std::span<double> scores, std::span<const int32_t> /*context*/) {
  if (ended_) fail("the grammar is complete and has ended");
  masker_.mask(state_, allowed_);
  if (state_.complete()) {
    for (int32_t id : eos_ids_) {
      if (id >= 0 && static_cast<size_t>(id) < allowed_.size()) allowed_[static_cast<size_t>(id)] = 1;
    }
  }
  bool any = false;
  for (size_t id = 0; id < scores.size(); ++id) {
    if (id < allowed_.size() && allowed_[id]) {
      any = any || scores[id] != -INFINITY;
    } else {
      scores[id] = -INFINITY;
    }
  }
  if (!any) {
    fail("the grammar allows no token here{}",
         state_.complete() ? " (the text is complete but there is no end-of-sequence token)" : "");
  }
}

void GrammarProcessor::accept(int32_t token) {
  if (std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
    if (!state_.complete()) fail("end of sequence (token {}) before the grammar is complete", token);
    ended_ = true;
    return;
  }
  if (!state_.advance(trie_->bytes(token)) || trie_->bytes(token).empty()) {
    fail("token {} is not allowed by the grammar", token);
  }
}

}  // namespace nanoinfer
