// Speculative decoding: a cheap drafter guesses the next few tokens of a sequence, the target
// model checks all of them in one forward pass, and every guess it would have chosen itself is
// kept. Decode is bound by the bytes of weights streamed per pass, so a pass over 1 + k tokens
// costs little more than a pass over one, and each accepted guess is a token for free.
//
// Verification is exact by construction: the rows of the verification pass (the pending token
// and the k drafts, all logits) are handed one by one to the sequence's own GenerationStep,
// exactly as plain decoding hands it the logits of each single-token step. The step chooses
// (processors, sampler, its random stream, stop rules, streamed text, all unchanged); while its
// choice equals the next draft, the next row is already the logits plain decoding would have
// computed for it, so it goes on; at the first difference (or after the last draft) the row's
// choice is the step's own next token and the pass ends. The KV cache then drops the positions
// of rejected drafts (KvCache::truncate). Because the model computes every row of a chunk
// bitwise as it computes that position alone (the kernels promise batched == per-token, and
// attention reads the chunk's own keys back from the cache in its element type: see
// tests/speculative_test.cpp), the emitted tokens are bitwise those of plain decoding, greedy
// or sampled with the same seed (the sampler draws one number per token chosen, so its stream
// advances identically). Drafts never change what is emitted, only how many passes it takes.
//
// Drafters:
//   PromptLookupDrafter  the continuation of the latest earlier occurrence of the context's
//                        longest suffix n-gram (n <= N): copy-heavy text drafts itself.
//   ModelDrafter         a second model with the same tokenizer (the target's own weights
//                        quantized, or a smaller model), greedy, on its own sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nanoinfer/logit_processor.h"
#include "nanoinfer/model.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Replaces `out` with at most `k` (>= 1) guesses of the tokens after `context` (a sequence's
  // tokens so far: prompt and generated). Fewer, or none, is fine: the step then verifies what
  // there is, or decodes plainly.
  virtual void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) = 0;
  // Called once the target has prefilled `context`, before the first draft: a drafter with a
  // model of its own prefills it now, so that cost is not taken for decoding's.
  virtual void prefill(std::span<const int32_t> context) { (void)context; }
  // The sequence was forgotten (Generator::reset): drop what was kept for it.
  virtual void reset() {}
  virtual std::string_view name() const = 0;
};

class PromptLookupDrafter final : public Drafter {
 public:
  // Matches suffixes of up to `max_ngram` tokens (1 <= max_ngram <= kMaxNgram), longest first.
  explicit PromptLookupDrafter(size_t max_ngram);
  static constexpr size_t kMaxNgram = 64;
  void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) override;
  std::string_view name() const override { return "prompt lookup"; }

 private:
  size_t max_ngram_;
};

// Greedy drafts of a second model (argmax over ids [0, sample_vocab), ties to the lower id),
// after the target's repetition penalty over the context and the drafts before (a draft that
// ignored it would be refused wherever the penalty changes the target's choice). Its sequence follows the context: before each draft it keeps the cached positions the
// context still starts with (KvCache::truncate drops the rest, e.g. rejected drafts) and
// prefills what it lacks. `draft` must outlive the drafter; it may be the target model itself
// (then every draft is accepted: a test of the mechanism).
class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(const Model& draft, int64_t sample_vocab, double repetition_penalty = 1.0);
  void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) override;
  void prefill(std::span<const int32_t> context) override;
  void reset() override;  // empties its sequence: the next draft prefills the whole context
  std::string_view name() const override { return "draft model"; }
  const Sequence& sequence() const { return seq_; }

 private:
  const Model& model_;
  size_t vocab_;
  Sequence seq_;
  // Brings seq_ to `context` (see the class comment); returns the last position's logits, or
  // nothing when all of it was cached (never with `last`).
  std::span<const float> push(std::span<const int32_t> context, bool last);

  std::vector<int32_t> cached_;  // the tokens seq_'s cache holds
  std::optional<RepetitionPenalty> penalty_;
  std::vector<double> scores_;   // [vocab_] with the penalty
};

// A draft model must speak the target's vocabulary: the same size and the same bytes for
// every id. Throws a one-line Error naming the first difference.
void require_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

// How many tokens to draft for the next verification pass.
//   fixed(k):     always k (0: never speculate).
//   adaptive(max): starts at 4 (at most max); a pass whose drafts were all accepted adds 2, a
//                 rejection sets k to the number accepted. At 0 the sequence decodes plainly
//                 and probes again with k = 1 after a wait that doubles with each failed probe
//                 (1, 2, 4 .. 64 steps) and resets when a probe is accepted, so a useless draft
//                 costs at most one extra row every so often.
//   adaptive(max, timed = true): also weighs time. It starts with kTimedStart plain steps, and every
//                 kRetime passes takes another, to know what a plain token costs (the fastest
//                 plain step so far); a pass whose seconds per token (drafting included,
//                 averaged with the passes before since the last back-off) exceed that backs
//                 off as a rejection would. On a machine where verifying k tokens costs nearly k steps, or with a
//                 draft nearly as slow as the target, speculation thus falls back to plain
//                 decoding. The tokens are the same either way; only the counts depend on
//                 timing, so tests use the untimed form.
class DraftLength {
 public:
  static constexpr size_t kDefaultMax = 16;
  static constexpr size_t kRetime = 16;
  static constexpr size_t kTimedStart = 4;  // plain steps timed before the first draft
  static DraftLength fixed(size_t k);
  static DraftLength adaptive(size_t max = kDefaultMax, bool timed = false);

  bool is_adaptive() const { return adaptive_; }
  size_t max() const { return max_; }
  // Tokens to draft next; 0 means decode this step plainly.
  size_t next() const { return wait_ > 0 ? 0 : k_; }
  // After a pass that verified `drafted` (>= 1) tokens of which the first `accepted` were
  // kept, taking `seconds` with the drafting.
  void passed(size_t drafted, size_t accepted, double seconds = 0);
  // After a plain decode step (next() was 0, or nothing was drafted) of `seconds`.
  void plain_step(double seconds = 0);

 private:
  DraftLength(size_t k, size_t max, bool adaptive, bool timed)
      : k_(k), max_(max), adaptive_(adaptive), timed_(timed), wait_(timed ? kTimedStart : 0) {}
  static constexpr size_t kMaxWait = 64;
  void back_off();
  size_t k_;
  size_t max_;
  bool adaptive_;
  bool timed_;
  size_t wait_ = 0;     // plain steps left before the next probe
  size_t backoff_ = 1;  // the wait after the next failed probe
  double plain_spt_ = 0;  // seconds of the fastest plain step (0: none yet)
  double spec_spt_ = 0;   // of speculative passes since the last back-off
  size_t passes_ = 0;     // since the last plain step
};

}  // namespace nanoinfer
