// The logit-processor seam of the generation step (nanoinfer/generation_step.h).
//
// Between the model's logits and the sampler's temperature and filters, each sequence runs an
// ordered list of processors over its scores: the raw logits widened to double, [vocab], one
// per token the sampler may choose. A processor may lower, raise or forbid (-infinity) any
// score; it sees the sequence's context (prompt and generated tokens) and is told every token
// that is chosen, so a stateful one (a grammar's parser) can advance. The repetition penalty,
// OpenAI's penalties, logit bias and grammar masks are processors; none touches the step.
// (Speculative decoding needs no processor: the step verifies drafts by choosing from each
// row of a verification pass as it would from a single step's logits; nanoinfer/speculative.h.)
//
// Scores are doubles because the sampler filters in double (nanoinfer/sampler.h): a processor
// edits exactly the values the sampler then scales and filters, so moving the repetition
// penalty into this seam left every sampled token bitwise what it was.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <vector>

namespace nanoinfer {

class LogitProcessor {
 public:
  virtual ~LogitProcessor() = default;
  // Edits `scores` [vocab] for the next token of a sequence whose tokens so far are `context`.
  // Throws nanoinfer::Error for input it cannot handle (the step names the token).
  virtual void process(std::span<double> scores, std::span<const int32_t> context) = 0;
  // The token that was chosen from the scores of the last process() call.
  virtual void accept(int32_t token) { (void)token; }
  // A new generation of the same sequence begins (a chat's next turn): per-generation state
  // (a grammar's parser) starts over.
  virtual void restart() {}
  virtual std::string_view name() const = 0;
};

// Hugging Face's RepetitionPenaltyLogitsProcessor: every distinct token of the context has its
// score divided by the penalty when positive and multiplied by it when negative, once no
// matter how often it occurs. A penalty of 1 changes nothing.
class RepetitionPenalty final : public LogitProcessor {
 public:
  RepetitionPenalty(int64_t vocab_size, double penalty);  // penalty > 0 and finite
  void process(std::span<double> scores, std::span<const int32_t> context) override;
  std::string_view name() const override { return "repetition penalty"; }
  double penalty() const { return penalty_; }

 private:
  double penalty_;
  // [vocab] stamp of the last call that penalised the id: repeats count once without
  // clearing a vocabulary-sized array each token.
  std::vector<uint32_t> seen_;
  uint32_t stamp_ = 0;
};

// OpenAI's frequency and presence penalties over the tokens generated so far (not the prompt):
// score[j] -= count[j] * frequency + (count[j] > 0) * presence. Counts come from accept().
class FrequencyPresencePenalty final : public LogitProcessor {
 public:
  FrequencyPresencePenalty(int64_t vocab_size, double frequency, double presence);
  void process(std::span<double> scores, std::span<const int32_t> context) override;
  void accept(int32_t token) override;
  void restart() override;  // counts start over
  std::string_view name() const override { return "frequency/presence penalty"; }

 private:
  double frequency_, presence_;
  std::vector<uint32_t> count_;     // [vocab]
  std::vector<int32_t> generated_;  // distinct ids with a count
};

// OpenAI's logit_bias: a fixed value added to the score of each listed token id.
class LogitBias final : public LogitProcessor {
 public:
  explicit LogitBias(std::map<int32_t, double> bias) : bias_(std::move(bias)) {}
  void process(std::span<double> scores, std::span<const int32_t> context) override;
  std::string_view name() const override { return "logit bias"; }

 private:
  std::map<int32_t, double> bias_;
};

}  // namespace nanoinfer
