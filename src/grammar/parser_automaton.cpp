#include "grammar/parser_automaton.h"

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

using Impl = Grammar::Impl;

ParserAutomaton::ParserAutomaton(std::shared_ptr<const Impl> g) : g_(std::move(g)) {
  // A class starts at every byte where some range starts or ends: within a class every range
  // either holds all its bytes or none, so every stack takes all of them or none.
  bool starts[257] = {};
  starts[0] = true;
  for (const Impl::Sym& y : g_->syms) {
    if (y.kind != Impl::Bytes) continue;
    starts[y.lo] = true;
    starts[y.hi + 1] = true;
  }
  int c = -1;
  for (int b = 0; b < 256; ++b) {
    if (starts[b]) ++c;
    class_of_[b] = static_cast<uint8_t>(c);
  }
  n_classes_ = static_cast<size_t>(c + 1);
  clear();
}

void ParserAutomaton::clear() {
  stacks_.assign(1, StackNode{0, 0});
  stack_ids_.clear();
  set_items_.clear();
  set_begin_.assign(1, 0);
  set_ids_.clear();
  next_.clear();
  transitions_computed_ = 0;
  scratch_.clear();
  intern_scratch();  // the empty set: state 0, kDead
}

uint32_t ParserAutomaton::stack(uint32_t parent, uint32_t pos) {
  const uint64_t key = (static_cast<uint64_t>(parent) << 32) | pos;
  auto [it, added] = stack_ids_.try_emplace(key, static_cast<uint32_t>(stacks_.size()));
  if (added) stacks_.push_back({parent, pos});
  return it->second;
}

// GrammarState's expand (grammar.cpp) over interned stacks, in the same order, skipping the
// same (rule, stack below) pairs and counting the same work.
void ParserAutomaton::expand(uint32_t s0) {
  const Impl& g = *g_;
  todo_.push_back(s0);
  while (!todo_.empty()) {
    uint32_t s = todo_.back();
    todo_.pop_back();
    while (true) {
      if (++work_ > kMaxExpandWork) fail("grammar: over {} steps to take one byte (too ambiguous)", kMaxExpandWork);
      if (s == 0) {
        scratch_.push_back(s);
        break;
      }
      const uint32_t p = stacks_[s].pos;
      const Impl::Sym& y = g.syms[p];
      if (y.kind == Impl::End) {
        s = stacks_[s].parent;
        continue;
      }
      if (y.kind == Impl::Bytes) {
        scratch_.push_back(s);
        break;
      }
      uint32_t base = stacks_[s].parent;
      if (g.syms[p + 1].kind != Impl::End) base = stack(base, p + 1);  // the tail of a rule is dropped
      if (!entered_.insert((static_cast<uint64_t>(y.rule) << 32) | base).second) break;
      const auto& alts = g.alts[y.rule];
      for (size_t a = alts.size(); a-- > 0;) todo_.push_back(stack(base, alts[a]));
      break;
    }
    if (scratch_.size() > kMaxGrammarStacks) fail("grammar: over {} parses at once (too ambiguous)", kMaxGrammarStacks);
  }
}

uint32_t ParserAutomaton::intern_scratch() {
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  uint64_t h = 0x9E3779B97F4A7C15ull ^ scratch_.size();
  for (uint32_t s : scratch_) h = (h ^ s) * 0x100000001B3ull + (h >> 29);
  const auto [lo, hi] = set_ids_.equal_range(h);
  for (auto it = lo; it != hi; ++it) {
    const uint32_t k = it->second;
    if (std::equal(set_items_.begin() + set_begin_[k], set_items_.begin() + set_begin_[k + 1], scratch_.begin(),
                   scratch_.end())) {
      return k;
    }
  }
  const uint32_t k = static_cast<uint32_t>(set_begin_.size() - 1);
  set_items_.insert(set_items_.end(), scratch_.begin(), scratch_.end());
  set_begin_.push_back(static_cast<uint32_t>(set_items_.size()));
  set_ids_.emplace(h, k);
  next_.resize(next_.size() + n_classes_, -1);
  return k;
}

uint32_t ParserAutomaton::state_of(std::span<const GrammarState::Stack> stacks) {
  scratch_.clear();
  for (const GrammarState::Stack& st : stacks) {
    uint32_t s = 0;
    for (uint32_t pos : st) s = stack(s, pos);
    scratch_.push_back(s);
  }
  return intern_scratch();
}

// GrammarState's step (grammar.cpp) over interned stacks.
uint32_t ParserAutomaton::compute_next(uint32_t state, uint8_t byte) {
  ++transitions_computed_;
  scratch_.clear();
  entered_.clear();
  todo_.clear();
  work_ = 0;
  for (uint32_t i = set_begin_[state]; i < set_begin_[state + 1]; ++i) {
    const uint32_t s = set_items_[i];
    if (s == 0) continue;
    const StackNode top = stacks_[s];
    const Impl::Sym& y = g_->syms[top.pos];
    if (byte < y.lo || byte > y.hi) continue;
    expand(stack(top.parent, top.pos + 1));
  }
  total_work_ += work_;
  return intern_scratch();
}

bool ParserAutomaton::complete(uint32_t state) const {
  return set_begin_[state] < set_begin_[state + 1] && set_items_[set_begin_[state]] == 0;
}

void Grammar::probe(GrammarBudget& budget, size_t max_states) const {
  ParserAutomaton a(impl_);
  const GrammarState start(*this);
  std::vector<uint8_t> bytes;  // one byte of each class
  for (int b = 0; b < 256; ++b) {
    if (bytes.size() == a.byte_class(static_cast<uint8_t>(b))) bytes.push_back(static_cast<uint8_t>(b));
  }
  // States are numbered as they are found, so the queue is the range of ids not yet explored.
  uint32_t next_to_explore = a.state_of(start.stacks_);
  uint64_t charged = 0;  // expansion work charged so far
  while (next_to_explore < a.state_count() && a.state_count() <= max_states) {
    for (uint8_t b : bytes) a.next(next_to_explore, b);
    ++next_to_explore;
    budget.charge(bytes.size() + a.expand_work() - charged);
    charged = a.expand_work();
  }
}

}  // namespace nanoinfer
