// The grammar engine: GBNF text -> rules over bytes -> a pushdown parser state per sequence ->
// the token mask over a byte trie of the vocabulary (nanoinfer/grammar.h).
#include "nanoinfer/grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_impl.h"
#include "grammar/string_content.h"
#include "grammar/utf8_ranges.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

using Impl = Grammar::Impl;
using Stack = GrammarState::Stack;

// A compiled grammar is 8 bytes a symbol: 16 MiB at most (docs/SERVING.md, "Facing the internet").
constexpr size_t kMaxSymbols = 1u << 21;

// ---- syntax tree -> symbols -------------------------------------------------------------------------

class Compiler {
 public:
  Compiler(Impl& g, GrammarBudget& budget) : g_(g), budget_(budget) {}

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
  GrammarBudget& budget_;
  std::map<std::string, uint32_t> index_;

  uint32_t new_rule(std::string name) {
    g_.alts.emplace_back();
    g_.names.push_back(std::move(name));
    return static_cast<uint32_t>(g_.alts.size() - 1);
  }

  void add_alt(uint32_t rule, const std::vector<Impl::Sym>& seq) {
    if (g_.syms.size() + seq.size() + 1 > kMaxSymbols) fail("grammar: over {} symbols", kMaxSymbols);
    budget_.charge(seq.size() + 1);
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
    if (n.kind == Node::Literal && n.name.size() == 1) {
      const uint8_t b = static_cast<uint8_t>(n.name[0]);
      return {Impl::Bytes, b, b, 0};
    }
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
      case Node::Range:
        out.push_back({Impl::Bytes, n.lo, n.hi, 0});
        return;
      case Node::Literal:
        for (char c : n.name) out.push_back({Impl::Bytes, static_cast<uint8_t>(c), static_cast<uint8_t>(c), 0});
        return;
      case Node::Ref:
        out.push_back(ref(n, ctx));
        return;
      case Node::Alt:
        out.push_back(as_symbol(n, ctx));
        return;
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

  // The rules that can derive the empty text (with_bytes false) or some finite text (true): a
  // rule is marked once every rule symbol of one of its alternatives is (an alternative with a
  // byte range counts only with_bytes). A work list: each symbol is visited a bounded number
  // of times, where sweeping every rule until nothing changes was quadratic on a chain.
  std::vector<char> derives(bool with_bytes) const {
    const size_t n = g_.alts.size();
    std::vector<char> marked(n, 0);
    std::vector<uint32_t> alt_rule, pending;        // per alternative: its rule, its unmarked symbols
    std::vector<std::vector<uint32_t>> used_in(n);  // rule -> alternatives using it (with repeats)
    std::vector<uint32_t> work;
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t start : g_.alts[r]) {
        const uint32_t a = static_cast<uint32_t>(alt_rule.size());
        uint32_t refs = 0;
        bool bytes = false;
        for (uint32_t p = start; g_.syms[p].kind != Impl::End; ++p) {
          if (g_.syms[p].kind == Impl::Bytes) {
            bytes = true;
          } else {
            ++refs;
            used_in[g_.syms[p].rule].push_back(a);
          }
        }
        const bool never = bytes && !with_bytes;
        alt_rule.push_back(r);
        pending.push_back(never ? UINT32_MAX : refs);
        if (!never && refs == 0 && !marked[r]) {
          marked[r] = 1;
          work.push_back(r);
        }
      }
    }
    while (!work.empty()) {
      const uint32_t r = work.back();
      work.pop_back();
      for (uint32_t a : used_in[r]) {
        if (pending[a] == UINT32_MAX || --pending[a] != 0) continue;
        if (!marked[alt_rule[a]]) {
          marked[alt_rule[a]] = 1;
          work.push_back(alt_rule[a]);
        }
      }
    }
    return marked;
  }

  // A rule that can reach itself without matching a byte, with something left to match after
  // it on the way (a rule entered before the end of an alternative), would expand forever: the
  // stack grows on each turn. Such a cycle is refused. A cycle whose every step is the last
  // symbol of an alternative (`(a*)*`: the outer repetition enters itself after an empty inner
  // one) enters the rule again over the same stack: the parser meets that pair once per byte
  // (grammar.cpp, expand) and the cycle is harmless. Linear in the symbols: nullability by
  // derives(), the cycles by Tarjan's strongly connected components of the "enters before any
  // byte" graph, iterative.
  void check_left_recursion() {
    const size_t n = g_.alts.size();
    budget_.charge(g_.syms.size() + n);
    const std::vector<char> nullable = derives(/*with_bytes=*/false);
    // Rules entered before any byte, each edge marked when it leaves something to match.
    struct Edge {
      uint32_t to;
      bool grows;
    };
    std::vector<std::vector<Edge>> first(n);
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t start : g_.alts[r]) {
        for (uint32_t p = start; g_.syms[p].kind == Impl::Ref; ++p) {
          first[r].push_back({g_.syms[p].rule, g_.syms[p + 1].kind != Impl::End});
          if (!nullable[g_.syms[p].rule]) break;
        }
      }
    }
    // Tarjan's components, iterative: index/low per rule, the component stack, the DFS path.
    constexpr uint32_t kNone = UINT32_MAX;
    std::vector<uint32_t> index(n, kNone), low(n, 0), comp(n, kNone);
    std::vector<char> on_stack(n, 0);
    std::vector<uint32_t> stack;
    std::vector<std::pair<uint32_t, size_t>> path;
    uint32_t next_index = 0, next_comp = 0;
    for (uint32_t r0 = 0; r0 < n; ++r0) {
      if (index[r0] != kNone) continue;
      path.push_back({r0, 0});
      index[r0] = low[r0] = next_index++;
      stack.push_back(r0);
      on_stack[r0] = 1;
      while (!path.empty()) {
        auto& [r, k] = path.back();
        if (k < first[r].size()) {
          const uint32_t to = first[r][k++].to;
          if (index[to] == kNone) {
            index[to] = low[to] = next_index++;
            stack.push_back(to);
            on_stack[to] = 1;
            path.push_back({to, 0});
          } else if (on_stack[to]) {
            low[r] = std::min(low[r], index[to]);
          }
          continue;
        }
        const uint32_t done = r;
        path.pop_back();
        if (!path.empty()) low[path.back().first] = std::min(low[path.back().first], low[done]);
        if (low[done] == index[done]) {
          uint32_t x;
          do {
            x = stack.back();
            stack.pop_back();
            on_stack[x] = 0;
            comp[x] = next_comp;
          } while (x != done);
          ++next_comp;
        }
      }
    }
    for (size_t r = 0; r < n; ++r) {
      for (const Edge& e : first[r]) {
        if (e.grows && comp[e.to] == comp[r]) {
          fail("grammar: the rule '{}' is left-recursive (it can reach itself before matching any byte)",
               g_.names[e.to]);
        }
      }
    }
    // A rule that cannot derive any finite text (`x ::= "a" x`) would keep its parses alive
    // forever without completing.
    const std::vector<char> ends = derives(/*with_bytes=*/true);
    for (size_t r = 0; r < n; ++r) {
      if (!ends[r])
        fail("grammar: the rule '{}' never finishes (every way through it enters a rule again)", g_.names[r]);
    }
  }
};

// ---- the parser state -------------------------------------------------------------------------------

// Brings `s` to a byte range on top (or empty: complete), entering rules, and appends every
// result to `out`. Iterative, depth first in the order of the alternatives (a stack of stacks
// still to expand), so no input can deepen the C++ stack. `entered` holds the (rule, stack
// below) pairs entered so far in this step: entering a rule again over the same stack gives
// the same stacks again, so it is skipped; that keeps the work of one step bounded by the pairs
// it meets, and makes cycles through the ends of alternatives terminate (check_left_recursion).
// `work` counts the symbols visited, for the limit both parsers share.
struct Expansion {
  std::set<std::pair<uint32_t, Stack>> entered;
  std::vector<Stack> todo;
  size_t work = 0;
};

void expand(const Impl& g, Stack s, std::vector<Stack>& out, Expansion& e) {
  e.todo.push_back(std::move(s));
  while (!e.todo.empty()) {
    Stack t = std::move(e.todo.back());
    e.todo.pop_back();
    while (true) {
      if (++e.work > kMaxExpandWork) fail("grammar: over {} steps to take one byte (too ambiguous)", kMaxExpandWork);
      if (t.empty()) {
        out.push_back(std::move(t));
        break;
      }
      const uint32_t p = t.back();
      const Impl::Sym& y = g.syms[p];
      if (y.kind == Impl::End) {
        t.pop_back();
        continue;
      }
      if (y.kind == Impl::Bytes) {
        out.push_back(std::move(t));
        break;
      }
      t.pop_back();
      if (g.syms[p + 1].kind != Impl::End) t.push_back(p + 1);  // the tail of a rule is dropped
      if (!e.entered.emplace(y.rule, t).second) break;
      const auto& alts = g.alts[y.rule];
      for (size_t a = alts.size(); a-- > 0;) {
        Stack u = a == 0 ? std::move(t) : t;
        u.push_back(alts[a]);
        e.todo.push_back(std::move(u));
      }
      break;
    }
    if (out.size() > kMaxGrammarStacks) fail("grammar: over {} parses at once (too ambiguous)", kMaxGrammarStacks);
  }
}

void normalize(std::vector<Stack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

// The stacks after `byte` from `from` (empty: not allowed).
void step(const Impl& g, const std::vector<Stack>& from, uint8_t byte, std::vector<Stack>& to) {
  to.clear();
  Expansion e;
  for (const Stack& s : from) {
    if (s.empty()) continue;
    const Impl::Sym& y = g.syms[s.back()];
    if (byte < y.lo || byte > y.hi) continue;
    Stack t = s;
    ++t.back();
    expand(g, std::move(t), to, e);
  }
  if (to.size() > 1) normalize(to);
}

}  // namespace

void GrammarBudget::check() {
  if (used_ > max_) {
    fail("grammar: compiling it takes more than {} steps of work (too large or too ambiguous)", max_);
  }
  next_poll_ = used_ + (1u << 16);
  if (cancelled_ && cancelled_()) fail("grammar: compiling was cancelled");
}

Grammar Grammar::from_gbnf(std::string_view text, std::string_view root, GrammarBudget* budget) {
  GrammarBudget fallback;
  GrammarBudget& b = budget ? *budget : fallback;
  const auto rules = parse_gbnf(text, b);
  auto impl = std::make_shared<Impl>();
  Compiler(*impl, b).compile(rules, root);
  Grammar g(std::move(impl));
  GrammarState start(g);  // the first state: its expansion is part of compiling
  b.charge(start.stack_count());
  return g;
}

size_t Grammar::rule_count() const {
  return impl_->alts.size();
}
size_t Grammar::symbol_count() const {
  return impl_->syms.size();
}

GrammarState::GrammarState(const Grammar& grammar) : g_(grammar.impl_) {
  Expansion e;
  for (uint32_t start : g_->alts[g_->root]) expand(*g_, Stack{start}, stacks_, e);
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

bool GrammarState::complete() const {
  return !stacks_.empty() && stacks_.front().empty();
}

bool GrammarState::can_continue() const {
  return !stacks_.empty() && !stacks_.back().empty();
}

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
    : grammar_(grammar),
      trie_(std::move(trie)),
      eos_ids_(std::move(eos_ids)),
      state_(grammar),
      masker_(grammar_, *trie_) {}

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
