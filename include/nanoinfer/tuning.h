// How a model's products are split across its thread pool, tuned per machine.
//
// A product y = W x is cut into ranges of rows that the pool's threads claim (nanoinfer/
// thread_pool.h). How it is cut — whether it is shared with the workers at all, how many row
// ranges each thread gets, and for gate/up how many outputs are computed before SwiGLU is
// applied to them — was one set of constants chosen on one machine. A `Tuning` replaces them
// per product shape (weight type, rows, columns, decode or prefill) with what `bench tune`
// measured faster on this machine (`Model::tune`), cached per CPU model, ISA and thread count
// (nanoinfer/tuning_cache.h) and read when a model is opened.
//
// A rule changes only how rows are cut into tasks, never what a row computes: the kernels
// compute each output element with one chain independent of the row range (kernels/kernels.h),
// so the logits are bitwise the same under every rule (tests/model/tuning_test.cpp checks this over
// the whole range of each parameter).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/weight_type.h"

namespace nanoinfer {

struct SplitRule {
  // Whether the product is shared with the pool's workers: Auto below a fixed amount of work
  // (kMinParallelLinearWork multiply-adds, model/linear.h) runs it on the caller alone.
  enum class Split : uint8_t { Auto, Always, Never };
  Split split = Split::Auto;
  // Row ranges per thread (ThreadPool::chunk_size); 0 = ThreadPool::kChunksPerThread.
  uint32_t chunks_per_thread = 0;
  // gate/up only: KiB of outputs computed before SwiGLU is applied to them; 0 = 64.
  uint32_t epilogue_kib = 0;

  bool operator==(const SplitRule&) const = default;
};

// The limits a rule's parameters are held to (a cache file's values are checked against them).
inline constexpr uint32_t kMaxChunksPerThread = 64;
inline constexpr uint32_t kMinEpilogueKib = 4, kMaxEpilogueKib = 4096;

// "auto", "always" or "never"; the parse returns false for anything else.
const char* split_name(SplitRule::Split split);
bool parse_split(std::string_view name, SplitRule::Split& out);
// "split=always chunks/thread=8 epilogue=64KiB", the default values named "default".
std::string describe(const SplitRule& rule);

// What a rule applies to: products of this weight type and shape, at decode (one token per
// call) or prefill (more: a prompt chunk, or a batched decode step of several rows).
struct ProductShape {
  WeightType type = WeightType::F32;
  size_t rows = 0, cols = 0;
  bool prefill = false;
  bool operator==(const ProductShape&) const = default;
};

struct TunedRule {
  ProductShape shape;
  SplitRule rule;
};

struct Tuning {
  std::vector<TunedRule> rules;
  // The rule for a product, or nullptr (the defaults).
  const SplitRule* find(WeightType type, size_t rows, size_t cols, size_t n_tokens) const;
  // Adds or replaces the rule for `shape`; a default rule removes it.
  void set(const ProductShape& shape, const SplitRule& rule);
};

// What `Model::tune` measures.
struct TuneOptions {
  size_t prefill_tokens = 64;  // tokens per prefill call (0: no prefill shapes)
  bool decode = true;          // the decode shapes
  int rounds = 7;              // timed rounds; every candidate runs once per round, alternating
  // Calls per candidate per round: a decode call cycles through every layer's matrix of the
  // shape (so the weights stream from memory, as in a decode step); prefill likewise.
  int decode_calls = 0;   // 0: four per layer (at least 8)
  int prefill_calls = 0;  // 0: one per layer, at most 8 (at least 2)
  // A candidate is kept only when it was faster than the default in enough of the rounds
  // (each round times them back to back: a paired comparison, so drift in the machine's load
  // cancels) that the two-sided sign test puts chance at or below max_p, and its median gain
  // over the rounds is at least min_gain. (Not the range of the samples, which only widens
  // with more rounds on a shared machine.)
  double min_gain = 0.03;
  double max_p = 0.01;
  // Candidates as the search visits them (name, shape, rule), for progress output.
  void (*progress)(void* context, const std::string& line) = nullptr;
  void* progress_context = nullptr;
};

// One candidate of a product shape's search: its time per call over the rounds, and its gain
// against the default in each round (default time / its time, > 1 = faster).
struct TuneCandidate {
  SplitRule rule;
  double median_us = 0, min_us = 0, max_us = 0;        // per call
  double gain_median = 1, gain_min = 1, gain_max = 1;  // paired, per round
  int wins = 0, rounds = 0;                            // rounds it was faster than the default
  double p_value = 1;                                  // two-sided sign test of those wins
};
struct TunedShape {
  std::string name;  // "qkv", "o", "gate_up", "down", "logits"
  ProductShape shape;
  std::vector<TuneCandidate> candidates;  // [0] is the default rule
  size_t best = 0;                        // the largest median gain (0: none beat the default)
  bool kept = false;                      // best passed the sign test and min_gain
  double gain() const { return candidates[best].gain_median; }
};

// The two-sided sign test: the chance of `wins` or more (or as few) of `n` fair coin flips.
double sign_test_p(int wins, int n);

}  // namespace nanoinfer
