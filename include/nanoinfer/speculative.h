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
// tests/generate/speculative_test.cpp), the emitted tokens are bitwise those of plain decoding, greedy
// or sampled with the same seed (the sampler draws one number per token chosen, so its stream
// advances identically). Drafts never change what is emitted, only how many passes it takes.
//
// Drafters:
//   PromptLookupDrafter  the continuation of the latest earlier occurrence of the context's
//                        longest suffix n-gram (n <= N): copy-heavy text drafts itself.
//   ModelDrafter         a second model with the same tokenizer (the target's own weights
//                        quantized, or a smaller model), greedy, on its own sequence.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/logit_processor.h"
#include "nanoinfer/model.h"
#include "nanoinfer/sampler.h"
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
  // How many tokens of `context` the next draft() would have to process besides the last one
  // (whose logits give the first draft): a draft model's catch-up after plain steps or a new
  // turn. A drafter that keeps no state of its own (prompt lookup) is never behind.
  virtual size_t behind(std::span<const int32_t> context) const {
    (void)context;
    return 0;
  }
  // Drafts for a sequence sampled with `params` from now on (a server's sequence serves
  // requests with settings of their own); a drafter that samples or penalises uses them.
  virtual void set_sampling(const SamplerParams& params) { (void)params; }
  // The distributions the last draft()'s tokens were drawn from, one per token, for
  // rejection sampling; empty when they were chosen deterministically (a point mass each).
  virtual std::span<const DraftDistribution> distributions() const { return {}; }
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

// Drafts of a second model on its own sequence, chosen by the target's sampling `params`
// over ids [0, sample_vocab) through a step's TokenChooser (nanoinfer/generation_step.h):
// greedy (argmax, ties to the lower id) at temperature 0, else drawn from the drafter's own
// distribution q (the same chain: repetition penalty over the context and the drafts before,
// temperature, top-k, top-p, min-p) with a stream seeded from params.seed, and q kept for
// rejection sampling (distributions()). A draft that ignored the
// penalty would be refused wherever it changes the target's choice. Its sequence follows the
// context: before each draft it keeps the cached positions the context still starts with
// (KvCache::truncate drops the rest, e.g. rejected drafts) and prefills what it lacks.
// `draft` must outlive the drafter; it may be the target model itself (then every draft is
// accepted, greedy or sampled with the target's params: q is p bitwise; a test of the
// mechanism).
class ModelDrafter final : public Drafter {
 public:
  ModelDrafter(const Model& draft, int64_t sample_vocab, const SamplerParams& params);
  // Greedy drafts under a repetition penalty.
  ModelDrafter(const Model& draft, int64_t sample_vocab, double repetition_penalty = 1.0);
  void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) override;
  void prefill(std::span<const int32_t> context) override;
  void reset() override;  // empties its sequence: the next draft prefills the whole context
  size_t behind(std::span<const int32_t> context) const override;
  std::string_view name() const override { return "draft model"; }
  const Sequence& sequence() const { return seq_; }
  std::span<const DraftDistribution> distributions() const override;
  void set_sampling(const SamplerParams& params) override;

  // A measuring hook (bench generate --draft-oracle with --draft or --draft-self): the draft
  // model does all its work as usual, and the token it drafts for context position `position`
  // becomes choose(position, the token it chose). The time is the draft model's; which drafts
  // are right is the override's. Greedy drafts only (refused once sampling is set).
  using ChoiceOverride = std::function<int32_t(size_t position, int32_t drafted)>;
  void override_choices(ChoiceOverride choose);

 private:
  const Model& model_;
  size_t vocab_;
  Sequence seq_;
  // Brings seq_ to `context` (see the class comment); returns the last position's logits, or
  // nothing when all of it was cached (never with `last`).
  std::span<const float> push(std::span<const int32_t> context, bool last);

  // How many of cached_ `context` starts with.
  size_t cached_prefix(std::span<const int32_t> context) const;

  std::vector<int32_t> cached_;           // the tokens seq_'s cache holds
  std::optional<TokenChooser> chooser_;   // the params' processors and sampler (set_sampling)
  bool sampling_ = false;                 // temperature > 0: drafts are drawn, q kept
  std::vector<DraftDistribution> dists_;  // of the last draft's tokens (sampled)
  size_t drafted_ = 0;                    // tokens of the last draft
  ChoiceOverride choose_;                 // override_choices()
};

// A draft model must speak the target's vocabulary: the same size and the same bytes for
// every id. Throws a one-line Error naming the first difference.
void require_same_vocabulary(const Tokenizer& target, const Tokenizer& draft);

// How many tokens to draft for the next verification pass.
//   fixed(k):     always k (0: never speculate).
//   adaptive(max): the k that maximizes the expected tokens per unit of cost. With a per-draft
//                 acceptance a (drafts are kept in order, so a pass of k yields
//                 (1 - a^(k+1)) / (1 - a) tokens on average) and a cost of 1 + c k plain steps
//                 (c: what one more row costs, drafting and verifying), k is the argmax over
//                 0..max of (1 - a^(k+1)) / ((1 - a)(1 + c k)); 0 when no k beats a plain step.
//                 a is estimated from the passes: a moving average (weight kAlphaWeight) over
//                 each accepted draft (1) and the first rejected one (0), starting at
//                 kPriorAcceptance; drafts after a rejection say nothing and do not count.
//                 c is kDefaultRowCost. At k = 0 the sequence decodes plainly and probes again
//                 with k = 1 after a wait that doubles with each probe that leaves k at 0
//                 (1, 2, 4 .. 64 steps) and resets when a pass leaves k above 0, so a useless
//                 draft costs at most one extra row every so often.
//   adaptive(max, timed = true): c is measured instead. It starts with kTimedStart plain
//                 steps, and every kRetime passes takes another, to know what a plain step
//                 costs (the fastest so far); the first pass drafts one token. Each pass then
//                 gives c = (its seconds, drafting included but the drafter's catch-up not,
//                 / the plain step - 1) / k, averaged over the passes (weight kCostWeight).
//                 Where verifying k tokens costs nearly k steps, or the draft is nearly as
//                 slow as the target, no k beats a plain step and speculation falls back to
//                 plain decoding.
//                 A drafter with a model of its own follows every token it did not draft
//                 (Drafter::behind): after n plain steps its next draft first processes n
//                 tokens, at the per-token cost its prompt prefill showed (prefilled()). That
//                 cost grows with the wait, so a longer wait does not make a probe cheaper per
//                 step. The timed length therefore keeps an account: what speculation has lost
//                 against plain decoding (each pass's seconds, catch-up included, less a plain
//                 step per token it yielded; a gain counts as a negative loss) and the decode
//                 time so far. After k fell to 0, a probe is made only when the loss, with the
//                 probe's predicted cost (catch-up plus one row at c), stays within
//                 kLossShare of the time; otherwise the step is plain. A drafter whose
//                 following alone costs more than that share of a step falls ever further
//                 behind and is not probed again in this sequence (until a new prefill has
//                 it catch up outside decoding), which bounds the loss at acceptance 0.
//                 The tokens are the same either way; only the counts depend on timing, so
//                 tests use the untimed form or give the seconds.
class DraftLength {
 public:
  static constexpr size_t kDefaultMax = 16;
  static constexpr size_t kRetime = 16;
  static constexpr size_t kTimedStart = 4;  // plain steps timed before the first draft
  static constexpr double kPriorAcceptance = 0.7;
  static constexpr double kAlphaWeight = 0.2;
  static constexpr double kDefaultRowCost = 0.15;
  static constexpr double kCostWeight = 0.25;
  static constexpr double kLossShare = 1.0 / 32;
  static DraftLength fixed(size_t k);
  static DraftLength adaptive(size_t max = kDefaultMax, bool timed = false);

  bool is_adaptive() const { return adaptive_; }
  size_t max() const { return max_; }
  // Tokens to draft next, for a drafter `behind` tokens behind (Drafter::behind); 0 means
  // decode this step plainly.
  size_t next(size_t behind = 0) const;
  // The drafter prefilled `tokens` tokens in `seconds` (Drafter::prefill): what following one
  // token costs it. Timed only.
  void prefilled(size_t tokens, double seconds);
  // After a pass that verified `drafted` (>= 1) tokens of which the first `accepted` were
  // kept, taking `seconds` with the drafting, for which the drafter first caught up `behind`
  // tokens.
  void passed(size_t drafted, size_t accepted, double seconds = 0, size_t behind = 0);
  // After a plain decode step (next() was 0, or nothing was drafted) of `seconds`.
  void plain_step(double seconds = 0);
  // Timed: seconds speculation lost against plain steps (negative: gained), and decode seconds.
  double lost_seconds() const { return lost_; }
  double decode_seconds() const { return elapsed_; }
  double acceptance() const { return alpha_; }   // the current estimate of a
  double row_cost() const { return row_cost_; }  // the current c
  // The argmax of the class comment for acceptance a and row cost c, k in 0..max.
  static size_t best(double a, double c, size_t max);

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
  size_t backoff_ = 1;  // the wait after the next probe that leaves k at 0
  double alpha_ = kPriorAcceptance;
  double row_cost_ = kDefaultRowCost;
  bool cost_measured_ = false;  // row_cost_ comes from a timed pass
  double plain_spt_ = 0;        // seconds of the fastest plain step (0: none yet)
  size_t passes_ = 0;           // since the last plain step
  bool first_pass_ = true;      // timed: the first pass drafts one token
  bool probing_ = false;        // timed: k fell to 0; probes must fit the loss account
  double follow_spt_ = 0;       // seconds the drafter takes per token it catches up
  double lost_ = 0;             // see lost_seconds()
  double elapsed_ = 0;          // decode seconds: plain steps and passes
};

// The speculative half of one sequence's decoding, the one Generator and the serve scheduler
// both run: before each forward pass draft() asks the drafter for what may follow the step's
// pending token, within what the context and the token budget leave; after it, verify()
// hands the pass's rows to the sequence's GenerationStep in order (see the top of this
// header), rolls the cache back past the first rejected draft and tells the DraftLength how
// the pass went. Without a drafter every pass is one plain row, verified the same way.
class SpeculativeStep {
 public:
  SpeculativeStep() = default;  // plain decoding
  SpeculativeStep(std::unique_ptr<Drafter> drafter, DraftLength length);

  bool speculates() const { return drafter_ != nullptr; }
  // For a sequence sampled with `params` from now on, drafting `length` per pass.
  void restart(const SamplerParams& params, DraftLength length);
  // Forgets the sequence: the drafter's too, and the draft length starts over.
  void reset();

  // After the target prefilled `context` (its tokens so far): the drafter prefills them too,
  // timed for a timed draft length. Throws what the drafter throws.
  void prefill(std::span<const int32_t> context);

  // Drafts for the next pass: the tokens after `context` (whose last token is the step's
  // pending one), at most `room` (positions the cache has left besides the pending token's)
  // and `budget` (tokens the step may still keep besides its own next one). Returns them
  // (none: a plain pass). Throws what the drafter throws.
  std::span<const int32_t> draft(std::span<const int32_t> context, size_t room, size_t budget);
  std::span<const int32_t> drafts() const { return drafts_; }
  double draft_seconds() const { return draft_seconds_; }  // the last draft()'s

  // What verify() made of a pass's rows.
  struct Verdict {
    std::optional<StopReason> end;  // why the generation ended, if it did
    size_t drafted = 0;             // rows that verified a draft
    size_t accepted = 0;            // drafts kept
    size_t chosen = 0;              // rows a token was chosen from (kept, or end of sequence)
  };
  // Called after each row a token was chosen from, with the tokens kept before it.
  using ChoiceHook = std::function<void(size_t kept_before)>;

  // The rows of one forward pass of `cache`'s sequence, [rows][vocab]: its last position's
  // after a prefill (`decode_pass` false), or the pending token's and one per draft() token.
  // `history` is the sequence's tokens; the step appends what it keeps and streams its text.
  // Throws what the step throws (then nothing after that row has happened).
  Verdict verify(GenerationStep& step, std::span<const float> logits, size_t vocab, std::vector<int32_t>& history,
                 KvCache& cache, const TextSink& on_text, bool decode_pass, const ChoiceHook& on_choice = {});

 private:
  std::unique_ptr<Drafter> drafter_;
  DraftLength length_ = DraftLength::fixed(0);
  DraftLength start_ = DraftLength::fixed(0);  // reset() goes back to it
  std::vector<int32_t> drafts_;
  std::span<const DraftDistribution> dists_;          // the drafter's, of drafts_ (empty: point masses)
  std::chrono::steady_clock::time_point pass_start_;  // of the drafting and pass being verified
  size_t pass_behind_ = 0;                            // tokens the drafter caught up before drafting for that pass
  double draft_seconds_ = 0;
};

}  // namespace nanoinfer
