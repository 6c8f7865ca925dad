// Token sampling: repetition penalty -> temperature -> top-k -> top-p -> min-p -> draw.
//
// The filtering chain follows Hugging Face's logits processors/warpers, evaluated in double:
//  - repetition penalty: every distinct token already in the context has its logit divided
//    by the penalty when positive and multiplied by it when negative (applied once per token
//    no matter how often it occurs): the RepetitionPenalty logit processor
//    (nanoinfer/logit_processor.h), the first of a sequence's processors;
//  - temperature: logits / T; T == 0 means greedy (argmax of the penalised logits, lowest
//    id on ties) and skips every other step;
//  - top-k (k > 0): keeps every token whose score is >= the k-th largest score, so ties at
//    the k-th value are all kept;
//  - top-p (p < 1): sorts ascending with a stable sort (equal scores ordered by id), removes
//    tokens whose cumulative probability is <= 1 - p, always keeping the most probable one
//    (the same nucleus as Hugging Face's TopPLogitsWarper, ties included);
//  - min-p (m > 0): removes tokens whose probability is < m * (the largest probability).
// What survives is renormalised (`filter`), then one uniform number picks a token by inverse
// CDF (`draw`). Filtering and drawing are separate so each can be tested exactly.
//
// The random stream is our own xoshiro256** seeded through splitmix64, so a seed gives the
// same tokens on every platform and standard library.
//
// Every buffer is sized to the vocabulary once, in the constructor: sampling a token
// allocates nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "nanoinfer/logit_processor.h"

namespace nanoinfer {

struct SamplerParams {
  double temperature = 1.0;         // >= 0; 0 = greedy
  int64_t top_k = 0;                // >= 0; 0 = off
  double top_p = 1.0;               // (0, 1]; 1 = off
  double min_p = 0.0;               // [0, 1]; 0 = off
  double repetition_penalty = 1.0;  // > 0; 1 = off
  uint64_t seed = 0;
};

// Throws nanoinfer::Error naming the first value out of range.
void validate(const SamplerParams& params);

// xoshiro256** (Blackman & Vigna), state filled from the seed by splitmix64 so that any
// seed, including 0, gives a well-mixed non-zero state.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  // A raw xoshiro256** state (not all zero), to check the generator against published vectors.
  static Rng from_state(uint64_t s0, uint64_t s1, uint64_t s2, uint64_t s3);
  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double next_double();

 private:
  uint64_t s_[4];
};

// The tokens that survive filtering, in ascending id order, with probabilities that sum to 1.
// Views into the sampler's buffers, valid until the next call.
struct Candidates {
  std::span<const int32_t> ids;
  std::span<const double> probs;
};

// The distribution a speculative draft token was drawn from (a drafter's own candidates):
// ids ascending, probabilities summing to 1.
struct DraftDistribution {
  std::vector<int32_t> ids;
  std::vector<double> probs;
  void assign(const Candidates& c);
  double prob_of(int32_t id) const;  // 0 for an id not among the candidates
};

class Sampler {
 public:
  Sampler(int64_t vocab_size, const SamplerParams& params);

  const SamplerParams& params() const { return params_; }
  int64_t vocab_size() const { return vocab_size_; }

  // The two halves the generation step runs with its logit processors in between:
  // load() widens `logits` [vocab] into the sampler's scores and returns them for processors
  // to edit (a NaN or infinite logit, from a broken model, throws nanoinfer::Error naming the
  // token and value); select() applies temperature, top-k, top-p and min-p to those scores.
  // With temperature 0 the result is the single greedy token with probability 1. Never
  // returns an empty set. A temperature small enough to overflow the scaled scores throws.
  std::span<double> load(std::span<const float> logits);
  Candidates select();
  // select(), then draw with the next number of the seeded stream (greedy draws nothing, so
  // the stream does not advance). A draw also leaves in `drawn_from`, when given, the
  // candidates it was drawn from (a drafter's q for rejection sampling); greedy leaves it as is.
  int32_t choose(DraftDistribution* drawn_from = nullptr);

  // load(), the repetition penalty of the params over `history` (the tokens seen so far:
  // prompt and generated; duplicates allowed), select(): the whole chain of this header.
  Candidates filter(std::span<const float> logits, std::span<const int32_t> history);

  // Inverse CDF: the first candidate (in the order given) whose cumulative probability
  // exceeds u * total. `u` in [0, 1). Throws for an empty set or a sum that is not positive.
  static int32_t draw(const Candidates& candidates, double u);

  // Speculative rejection sampling (Leviathan et al. 2023, Chen et al. 2023) of `draft`, drawn
  // by a drafter from `q`, against p = select() (the distribution choose() would draw from):
  // accepts the draft with probability min(1, p(draft) / q(draft)) (one number of the seeded
  // stream), else draws from normalize(max(0, p - q)) (a second number). The token returned
  // is then distributed exactly as p, whatever q is: a rejection returns another token
  // (max(0, p - q) is 0 at a rejected draft, whose p < q). Greedy (temperature 0) is choose().
  // Call after load() and the processors, in place of choose().
  int32_t choose_draft(int32_t draft, const DraftDistribution& q);

  // filter, then draw as choose() does.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

 private:
  SamplerParams params_;
  int64_t vocab_size_;
  Rng rng_;
  RepetitionPenalty penalty_;
  std::vector<double> scores_;      // [vocab] logits, processed, then temperature-scaled
  std::vector<int32_t> order_;      // [vocab] candidate ids being filtered
  std::vector<int32_t> kept_ids_;   // [vocab]
  std::vector<double> kept_probs_;  // [vocab]
  std::vector<double> heap_;        // [top_k] selection of the k-th largest score
};

}  // namespace nanoinfer
