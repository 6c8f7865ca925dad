// The parser's stack sets as the states of a deterministic automaton over bytes, built lazily
// for the mask (token_masker.cpp). GrammarState keeps its stacks as vectors and steps them
// with fresh vectors each byte (grammar.cpp): simple, and the reference. Here a stack is an
// id in a persistent tree (a parent stack and the position on top, interned), a state is the
// id of a sorted set of stack ids (interned), and a state's successor on a byte is computed
// once per byte class and then read from a table: the trie walk costs a table load per node
// and allocates nothing once the states it meets are known.
//
// The two parsers agree exactly: a state here is the set of stacks GrammarState would hold
// after the same bytes (interning is canonical: the same stack is the same id), and expand()
// mirrors the reference's expand step for step, the ambiguity limit included.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar_impl.h"

namespace nanoinfer {

class ParserAutomaton {
 public:
  static constexpr uint32_t kDead = 0;  // the state with no stack: nothing can follow

  explicit ParserAutomaton(std::shared_ptr<const Grammar::Impl> g);

  // The state holding `stacks` (sorted and unique, as GrammarState keeps them).
  uint32_t state_of(std::span<const GrammarState::Stack> stacks);

  // The state after `byte`; kDead when no stack takes it.
  uint32_t next(uint32_t state, uint8_t byte) {
    const size_t at = static_cast<size_t>(state) * n_classes_ + class_of_[byte];
    if (next_[at] >= 0) return static_cast<uint32_t>(next_[at]);
    const uint32_t to = compute_next(state, byte);  // may grow next_
    next_[at] = static_cast<int32_t>(to);
    return to;
  }

  bool complete(uint32_t state) const;  // one of its stacks is empty

  uint8_t byte_class(uint8_t byte) const { return class_of_[byte]; }
  size_t class_count() const { return n_classes_; }
  size_t state_count() const { return set_begin_.size() - 1; }
  size_t transitions_computed() const { return transitions_computed_; }
  uint64_t expand_work() const { return total_work_; }  // symbols visited by every expansion

  // Forgets every state (ids handed out before are void); bounds the memory of a long run.
  void clear();

 private:
  struct StackNode {
    uint32_t parent;  // the stack below the top; 0 is the empty stack
    uint32_t pos;     // the position on top, in syms
  };

  uint32_t stack(uint32_t parent, uint32_t pos);
  void expand(uint32_t s);    // appends the expanded stacks to scratch_ (entered_, work_: this step's)
  uint32_t intern_scratch();  // sorts scratch_, the set's state
  uint32_t compute_next(uint32_t state, uint8_t byte);

  std::shared_ptr<const Grammar::Impl> g_;
  uint8_t class_of_[256];  // bytes no range of the grammar tells apart share a class
  size_t n_classes_ = 0;

  std::vector<StackNode> stacks_;                        // [0]: the empty stack
  std::unordered_map<uint64_t, uint32_t> stack_ids_;     // (parent, pos) -> stack
  std::vector<uint32_t> set_items_;                      // the stacks of state k:
  std::vector<uint32_t> set_begin_;                      // set_items_[set_begin_[k], set_begin_[k + 1])
  std::unordered_multimap<uint64_t, uint32_t> set_ids_;  // hash of the items -> state
  std::vector<int32_t> next_;                            // [state][class]: the next state, -1 unknown
  std::vector<uint32_t> scratch_;
  std::unordered_set<uint64_t> entered_;  // (rule, stack below) pairs entered in this step
  std::vector<uint32_t> todo_;            // stacks still to expand
  size_t work_ = 0;
  uint64_t total_work_ = 0;
  size_t transitions_computed_ = 0;
};

}  // namespace nanoinfer
