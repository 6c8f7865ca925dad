// Speculative decoding (nanoinfer/speculative.h) on the embedded default model: the premise
// (a chunk's logits are bitwise those of single steps, and a rolled-back cache continues as a
// fresh one), then the promise: with prompt lookup or a draft model, greedy and seeded sampled
// output is token for token that of plain decoding, and the passes are counted exactly.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/speculative.h"
#include "support/checks.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/sanitized.h"

namespace nanoinfer {
namespace {

const SamplerParams kGreedyDraft{.temperature = 0.0, .repetition_penalty = 1.0};

// The default model as `generate` runs it: stored bf16 weights, the f16 KV cache.
OpenedModel open_default(std::optional<WeightType> weights = std::nullopt) {
  return open_model("", {.model = {.weights = weights, .threads = 2}});
}

const OpenedModel& target() {
  static const OpenedModel m = open_default();
  return m;
}

const std::vector<std::string>& prompts() {
  static const std::vector<std::string> p = {
      "ROMEO:",
      "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\nFirst Citizen:\n",
      // Copy-heavy: the passage, then its beginning again.
      "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up with our "
      "English dead.\n\nKING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close",
      "the the the the the the the the",
  };
  return p;
}

// Under the sanitizers (an order of magnitude slower) the two tests that loop over every
// prompt take two of them: the first (with its full-context case) and the copy-heavy one,
// and generate half as many tokens per run (the full-context case still runs until the
// context is full). The release run covers all four prompts at full length.
using test::kSanitized;
std::vector<std::string> looped_prompts() {
  if (!kSanitized) return prompts();
  return {prompts()[0], prompts()[2]};
}
// Tokens generated per run by those two tests.
constexpr int64_t looped_tokens(int64_t n) {
  return kSanitized ? n / 2 : n;
}

struct Outcome {
  std::vector<int32_t> tokens;  // generated
  std::string text;
  GenerationStats stats;
  uint64_t pushed = 0;  // positions through the target
  size_t cache_length = 0;
};

Outcome generate(const std::string& prompt, int64_t n, const SamplerParams& params,
                 std::unique_ptr<Drafter> drafter = nullptr, DraftLength length = DraftLength::adaptive()) {
  const OpenedModel& m = target();
  Generator gen(m.model, m.tokenizer, params);
  if (drafter) gen.set_drafter(std::move(drafter), length);
  const std::vector<int32_t> ids = encode_raw_prompt(m.tokenizer, prompt);
  Outcome run;
  const uint64_t before = gen.sequence().positions_pushed();
  run.stats = gen.generate(ids, {.max_new_tokens = n, .eos_ids = m.generation.eos_token_ids},
                           [&](std::string_view t) { run.text.append(t); });
  run.tokens.assign(gen.tokens().begin() + static_cast<ptrdiff_t>(ids.size()), gen.tokens().end());
  run.pushed = gen.sequence().positions_pushed() - before;
  run.cache_length = gen.cache().length();
  return run;
}

// The premise of exact verification: every position's logits from one chunk (a verification
// pass) are bitwise those of pushing the tokens one at a time (plain decoding), at every
// weight type a target or draft runs in, on the default f16 cache; and a cache rolled back
// over rejected positions continues bitwise as one that never held them.
TEST(Speculative, ChunkLogitsAreBitwiseThoseOfSingleStepsAndRollbackIsClean) {
  for (std::optional<WeightType> type : {std::optional<WeightType>{}, std::optional(WeightType::Q8_0),
                                         std::optional(WeightType::Q4_0), std::optional(WeightType::F32)}) {
    const OpenedModel m = open_default(type);
    const std::vector<int32_t> ids = encode_raw_prompt(m.tokenizer, prompts()[1]);
    ASSERT_GE(ids.size(), 20u);
    const size_t V = m.model.vocab_size();
    Sequence chunk = m.model.new_sequence();
    const std::span<const float> all = m.model.forward(ids, chunk, true);
    const std::vector<float> whole(all.begin(), all.end());
    Sequence single = m.model.new_sequence();
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::span<const float> row = m.model.forward({&ids[i], 1}, single);
      ASSERT_TRUE(test::same_bits(row, std::span(whole).subspan(i * V, V))) << "position " << i;
    }
    // Rollback: 10 positions, a chunk of 6 wrong ones, truncate, then the right ones in a chunk.
    Sequence rolled = m.model.new_sequence();
    m.model.forward(std::span(ids).first(10), rolled);
    const std::vector<int32_t> wrong = {5, 6, 7, 8, 9, 10};
    m.model.forward(wrong, rolled, true);
    rolled.cache().truncate(10);
    const std::span<const float> rest = m.model.forward(std::span(ids).subspan(10), rolled, true);
    EXPECT_TRUE(test::same_bits(rest, std::span(whole).subspan(10 * V)));
  }
}

TEST(Speculative, PromptLookupDraftsTheLatestLongestMatch) {
  PromptLookupDrafter lookup(3);
  std::vector<int32_t> out;
  // Suffix [1 2 3] occurs at 0; its continuation [4 5 1 2 3] is cut at k.
  lookup.draft(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2, 3}, 3, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 1}));
  lookup.draft(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2, 3}, 10, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5, 1, 2, 3}));
  // The latest occurrence wins: [9 7] then 8, later [9 7] then 6.
  lookup.draft(std::vector<int32_t>{9, 7, 8, 0, 9, 7, 6, 0, 9, 7}, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{6, 0}));
  // The longest suffix wins over a later shorter one: [1 2 3] -> 4, though [2 3] recurs later -> 9.
  lookup.draft(std::vector<int32_t>{1, 2, 3, 4, 2, 3, 9, 1, 2, 3}, 1, out);
  EXPECT_EQ(out, (std::vector<int32_t>{4}));
  // No earlier occurrence of even the last token: nothing.
  lookup.draft(std::vector<int32_t>{1, 2, 3, 4}, 4, out);
  EXPECT_TRUE(out.empty());
  // A run: the match may overlap the suffix.
  lookup.draft(std::vector<int32_t>{7, 7, 7}, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{7}));
  PromptLookupDrafter one(1);
  one.draft(std::vector<int32_t>{1, 2, 3, 4, 2, 3, 9, 1, 2, 3}, 1, out);
  EXPECT_EQ(out, (std::vector<int32_t>{9}));
  EXPECT_THROW(PromptLookupDrafter(0), Error);
  EXPECT_THROW(PromptLookupDrafter(PromptLookupDrafter::kMaxNgram + 1), Error);
}

// The adaptive length's argmax by hand: with c = 0.15, a pass of k at acceptance a yields
// (1 + a + .. + a^k) / (1 + 0.15 k) tokens per step; at a = 0.7 that is 1.478, 1.587, 1.600,
// 1.581 for k = 1..4 (k = 3); a plain step's 1 beats every k only below a ~ 0.15 (c itself).
TEST(Speculative, AdaptiveLengthIsTheArgmaxOfTokensPerCost) {
  EXPECT_EQ(DraftLength::best(0.7, 0.15, 16), 3u);
  EXPECT_EQ(DraftLength::best(0.7, 0.15, 2), 2u);  // capped
  EXPECT_EQ(DraftLength::best(0.9, 0.15, 16), 8u);
  EXPECT_EQ(DraftLength::best(0.99, 0.15, 16), 16u);
  EXPECT_EQ(DraftLength::best(0.2, 0.15, 16), 1u);  // 1.2 / 1.15 = 1.04
  EXPECT_EQ(DraftLength::best(0.1, 0.15, 16), 0u);  // 1.1 / 1.15 < 1
  EXPECT_EQ(DraftLength::best(0.9, 0.5, 16), 3u);   // an expensive row: fewer
  EXPECT_EQ(DraftLength::best(0.99, 1.0, 16), 0u);  // a row as dear as a step never pays
  EXPECT_EQ(DraftLength::best(1.0, 0.0, 16), 16u);
}

TEST(Speculative, AdaptiveLengthFollowsTheAcceptanceAndBacksOffToPlainSteps) {
  // Untimed, c = 0.15, up to 8. The estimate a starts at 0.7 (k = 3); each kept draft moves it
  // 20% of the way to 1, the first rejected one 20% of the way to 0.
  DraftLength d = DraftLength::adaptive(8);
  EXPECT_EQ(d.next(), 3u);
  d.passed(3, 3);  // a = 0.8464
  EXPECT_NEAR(d.acceptance(), 0.8464, 1e-12);
  EXPECT_EQ(d.next(), 6u);
  d.passed(6, 6);           // a = 0.9597
  EXPECT_EQ(d.next(), 8u);  // capped
  d.passed(8, 8);           // 0.9932
  d.passed(8, 8);           // 0.9989
  d.passed(8, 2);           // 0.9993 after the two kept, 0.7994 after the rejection
  EXPECT_NEAR(d.acceptance(), 0.7994, 1e-4);
  EXPECT_EQ(d.next(), 5u);
  // Drafts that are never kept: a falls by a fifth per pass, 0.6395, 0.5116, 0.4093,
  // 0.3274, 0.2620, 0.2096, 0.1677 (k = 3, 2, 1, 1, 1, 1, 1), then 0.1341: no k pays.
  const std::vector<size_t> ks = {3, 2, 1, 1, 1, 1, 1};
  d.passed(5, 0);
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(d.next(), ks[i]) << i;
    d.passed(d.next(), 0);
  }
  EXPECT_NEAR(d.acceptance(), 0.1341, 1e-4);
  EXPECT_EQ(d.next(), 0u);  // one plain step, then a probe of 1
  d.plain_step();
  EXPECT_EQ(d.next(), 1u);
  d.passed(1, 0);  // a probe that leaves k at 0 doubles the wait
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(d.next(), 0u);
    d.plain_step();
  }
  EXPECT_EQ(d.next(), 1u);
  d.passed(1, 1);  // an accepted probe: a = 0.1073 -> 0.2858, k = 1 again, and the wait resets
  EXPECT_EQ(d.next(), 1u);
  // Timed: plain steps first, to know what a step costs (1 s here: the fastest); the first
  // pass drafts one token whatever k the prior gives; each pass then measures
  // c = (seconds, less the drafter's catch-up, / 1 s - 1) / k, the first one taken as it is,
  // the next ones averaged in with weight 1/4.
  DraftLength t = DraftLength::adaptive(8, /*timed=*/true);
  for (size_t i = 0; i < DraftLength::kTimedStart; ++i) {
    EXPECT_EQ(t.next(), 0u);
    t.plain_step(i == 0 ? 1.0 : 3.0);  // slower steps do not count: the fastest does
  }
  EXPECT_EQ(t.next(), 1u);  // the prior's k would be 3
  t.passed(1, 1, 1.1);      // c = 0.1, a = 0.76: 1.76 / 1.1, .., 3.364 / 1.5 (k = 5), 3.557 / 1.6
  EXPECT_NEAR(t.row_cost(), 0.1, 1e-12);
  EXPECT_EQ(t.next(), 5u);
  t.passed(5, 5, 1.5);  // c = 0.1, a = 0.9214
  EXPECT_EQ(t.next(), 8u);
  // Lost against plain steps so far: 1.1 s for 2 tokens, 1.5 s for 6: a gain of 5.4 s.
  EXPECT_NEAR(t.lost_seconds(), -5.4, 1e-12);
  EXPECT_NEAR(t.decode_seconds(), 1.0 + 3 * 3.0 + 1.1 + 1.5, 1e-12);
  // A drafter that prefilled 10 tokens in 2 s catches up at 0.2 s a token; a pass for which it
  // caught up 3 tokens first does not count those 0.6 s in c.
  t.prefilled(10, 2.0);
  t.passed(8, 8, 1.8 + 0.6, 3);
  EXPECT_NEAR(t.row_cost(), 0.1, 1e-12);
  // Passes far slower than plain steps (every draft kept, 100 s each): c grows past 1, where
  // no k pays, and the length backs off to plain steps. The loss is now far beyond
  // kLossShare of the time, so no probe is made again.
  size_t plain = 0, passes = 0;
  for (int i = 0; i < 40; ++i) {
    if (t.next() == 0) {
      t.plain_step(1.0);
      ++plain;
      continue;
    }
    t.passed(t.next(), t.next(), 100.0);
    ++passes;
  }
  EXPECT_GT(t.row_cost(), 1.0);
  EXPECT_EQ(DraftLength::best(t.acceptance(), t.row_cost(), 8), 0u);
  EXPECT_GE(passes, 1u);
  EXPECT_EQ(plain + passes, 40u);
  EXPECT_GE(plain, 36u);
  EXPECT_GT(t.lost_seconds(), DraftLength::kLossShare * t.decode_seconds());
  DraftLength f = DraftLength::fixed(5);
  f.passed(5, 0);
  EXPECT_EQ(f.next(), 5u);
  EXPECT_THROW(DraftLength::adaptive(0), Error);
}

// The timed length at acceptance 0, in seconds given by a model of the costs: a plain step
// takes 1 s, a pass 1 s plus `row` s per draft plus `follow` s per token the drafter caught up
// (a draft model following the plain steps; prompt lookup follows for free), and every draft
// is rejected. What speculation loses against plain decoding stays within kLossShare of the
// time: a drafter whose catch-up alone costs more than that share (0.1 s a token) is given up
// after its first passes, and one that follows for free keeps being probed. Without the loss
// account (probes after waits of 1, 2 .. 64 steps, the drafter catching up before each) the
// first would lose 10% of the time: ~0.90 of plain speed, where this gives >= 0.95 over 64
// tokens and >= 0.99 over 2,000.
TEST(Speculative, TimedLengthBoundsTheLossOfUselessDrafts) {
  struct Run {
    double speed = 0;  // tokens / seconds, against 1 for plain decoding
    size_t passes = 0;
    double lost = 0, elapsed = 0;
  };
  auto run = [](size_t tokens, double follow, double row) {
    DraftLength d = DraftLength::adaptive(16, /*timed=*/true);
    d.prefilled(16, follow * 16);
    Run r;
    size_t made = 0, behind = 0;
    double seconds = 0;
    while (made < tokens) {
      const size_t k = d.next(behind);
      if (k == 0) {
        d.plain_step(1.0);
        seconds += 1.0;
        ++behind;
      } else {
        const double s = 1.0 + follow * static_cast<double>(behind) + row * static_cast<double>(k);
        d.passed(k, 0, s, behind);
        seconds += s;
        behind = 0;
        ++r.passes;
      }
      ++made;
    }
    r.speed = static_cast<double>(made) / seconds;
    r.lost = d.lost_seconds();
    r.elapsed = d.decode_seconds();
    EXPECT_NEAR(r.elapsed, seconds, 1e-9);
    return r;
  };
  for (size_t tokens : {size_t{64}, size_t{2000}}) {
    SCOPED_TRACE(tokens);
    const Run model = run(tokens, 0.1, 0.5);
    EXPECT_EQ(model.passes, 2u);  // the first pass (k = 1), one more at k = 1, then none
    EXPECT_LE(model.lost, DraftLength::kLossShare * model.elapsed);
    EXPECT_GE(model.speed, tokens == 64 ? 0.95 : 0.99);
    const Run cheap = run(tokens, 0.02, 0.5);  // following costs less than the share: probed
    EXPECT_LE(cheap.lost, DraftLength::kLossShare * cheap.elapsed);
    const Run lookup = run(tokens, 0.0, 0.1);
    EXPECT_LE(lookup.lost, DraftLength::kLossShare * lookup.elapsed);
    if (tokens == 2000) {
      EXPECT_GE(cheap.passes, 20u);
      EXPECT_GE(lookup.passes, 40u);
    }
  }
}

// Greedy output with prompt lookup (adaptive and fixed k, longest n-grams 1 and 3) equals plain
// greedy output token for token, on prompts that copy and prompts that do not, and with the
// repetition penalty the default model's generation_config.json sets.
TEST(Speculative, LookupGreedyOutputIsPlainGreedyOutput) {
  size_t accepted = 0;
  for (double penalty : {1.0, 1.1}) {
    SamplerParams params = kGreedyDraft;
    params.repetition_penalty = penalty;
    for (const std::string& prompt : looped_prompts()) {
      const Outcome plain = generate(prompt, looped_tokens(120), params);
      for (size_t ngram : {1, 3}) {
        for (DraftLength length : {DraftLength::adaptive(), DraftLength::fixed(1), DraftLength::fixed(7)}) {
          const Outcome spec =
              generate(prompt, looped_tokens(120), params, std::make_unique<PromptLookupDrafter>(ngram), length);
          ASSERT_EQ(spec.tokens, plain.tokens) << prompt << " ngram " << ngram << " penalty " << penalty;
          EXPECT_EQ(spec.text, plain.text);
          EXPECT_EQ(spec.stats.stop_reason, plain.stats.stop_reason);
          EXPECT_EQ(spec.stats.generated_tokens, plain.stats.generated_tokens);
          accepted += spec.stats.accepted_tokens;
          EXPECT_LE(spec.stats.accepted_tokens, spec.stats.drafted_tokens);
        }
      }
    }
  }
  EXPECT_GT(accepted, 0u);  // the drafts were used, not all refused
}

// Greedy output with a draft model equals plain greedy output: the target itself as its own
// draft (every draft accepted), and its round-to-nearest int4 and int8 quantizations (what
// `quantize --method rtn` writes), whose drafts are sometimes rejected. Also until the context
// is full (the default model's context is 256), where drafts are cut to the room left.
TEST(Speculative, DraftModelGreedyOutputIsPlainGreedyOutput) {
  const OpenedModel int4 = open_default(WeightType::Q4_0);
  const OpenedModel int8 = open_default(WeightType::Q8_0);
  const int64_t vocab = target().tokenizer.vocab_size();
  size_t rejected = 0;
  for (const std::string& prompt : looped_prompts()) {
    // 1000: until the context (256) is full, once.
    for (int64_t n : prompt == prompts()[0] ? std::vector<int64_t>{looped_tokens(100), 1000}
                                            : std::vector<int64_t>{looped_tokens(100)}) {
      const Outcome plain = generate(prompt, n, kGreedyDraft);
      const Outcome self = generate(prompt, n, kGreedyDraft, std::make_unique<ModelDrafter>(target().model, vocab));
      EXPECT_EQ(self.tokens, plain.tokens) << prompt;
      EXPECT_EQ(self.stats.accepted_tokens, self.stats.drafted_tokens) << prompt;
      // With the repetition penalty, which the draft applies as the target does.
      SamplerParams penalised = kGreedyDraft;
      penalised.repetition_penalty = 1.1;
      const Outcome plain_penalised = generate(prompt, n, penalised);
      const Outcome self_penalised =
          generate(prompt, n, penalised, std::make_unique<ModelDrafter>(target().model, vocab, 1.1));
      EXPECT_EQ(self_penalised.tokens, plain_penalised.tokens) << prompt;
      EXPECT_EQ(self_penalised.stats.accepted_tokens, self_penalised.stats.drafted_tokens) << prompt;
      for (const OpenedModel* draft : {&int4, &int8}) {
        for (DraftLength length : {DraftLength::adaptive(), DraftLength::fixed(3)}) {
          const Outcome spec =
              generate(prompt, n, kGreedyDraft, std::make_unique<ModelDrafter>(draft->model, vocab), length);
          ASSERT_EQ(spec.tokens, plain.tokens) << prompt << " draft " << weight_type_name(draft->model.weight_type());
          EXPECT_EQ(spec.stats.stop_reason, plain.stats.stop_reason);
          rejected += spec.stats.drafted_tokens - spec.stats.accepted_tokens;
        }
      }
    }
  }
  EXPECT_GT(rejected, 0u);  // the quantized drafts were wrong sometimes: rollback was exercised
}

// Verification hands each row to the step, sampler included: sampled output with a seed is
// the plain sampled output with that seed (one random number per token either way).
TEST(Speculative, SeededSampledOutputIsPlainSampledOutput) {
  const int64_t vocab = target().tokenizer.vocab_size();
  for (uint64_t seed : {1, 2, 3}) {
    const SamplerParams params{.temperature = 0.7, .top_k = 40, .top_p = 0.95, .repetition_penalty = 1.1, .seed = seed};
    const Outcome plain = generate(prompts()[2], 100, params);
    const Outcome lookup = generate(prompts()[2], 100, params, std::make_unique<PromptLookupDrafter>(2));
    EXPECT_EQ(lookup.tokens, plain.tokens) << seed;
    const Outcome draft = generate(prompts()[2], 100, params, std::make_unique<ModelDrafter>(target().model, vocab));
    EXPECT_EQ(draft.tokens, plain.tokens) << seed;
  }
}

// A drafter that knows the plain continuation and spoils the draft at `wrong_at` (or never).
class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> truth, size_t wrong_at) : truth_(std::move(truth)), wrong_at_(wrong_at) {}
  void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) override {
    out.assign(truth_.begin() + static_cast<ptrdiff_t>(context.size()),
               truth_.begin() + static_cast<ptrdiff_t>(std::min(truth_.size(), context.size() + k)));
    if (wrong_at_ < out.size()) out[wrong_at_] = (out[wrong_at_] + 1) % 2000;
  }
  std::string_view name() const override { return "oracle"; }

 private:
  std::vector<int32_t> truth_;
  size_t wrong_at_;
};

// Passes, drafts, acceptances and positions pushed, counted by hand for 10 tokens at k = 3.
TEST(Speculative, CountsPassesExactly) {
  const OpenedModel& m = target();
  const std::string prompt = prompts()[1];
  const Outcome plain = generate(prompt, 10, kGreedyDraft);
  ASSERT_EQ(plain.tokens.size(), 10u);
  std::vector<int32_t> truth = encode_raw_prompt(m.tokenizer, prompt);
  const size_t p = truth.size();
  truth.insert(truth.end(), plain.tokens.begin(), plain.tokens.end());

  // Always right: token 1 from the prefill; passes of 3 drafts + 1 give tokens 2-5 and 6-9;
  // the budget leaves no room for a draft before token 10, a plain step.
  const Outcome right =
      generate(prompt, 10, kGreedyDraft, std::make_unique<OracleDrafter>(truth, 99), DraftLength::fixed(3));
  EXPECT_EQ(right.tokens, plain.tokens);
  EXPECT_EQ(right.stats.decode_steps, 3u);
  EXPECT_EQ(right.stats.verify_passes, 2u);
  EXPECT_EQ(right.stats.drafted_tokens, 6u);
  EXPECT_EQ(right.stats.accepted_tokens, 6u);
  EXPECT_EQ(right.stats.verified_tokens, 8u);
  EXPECT_EQ(right.stats.decode_tokens, 9u);
  EXPECT_DOUBLE_EQ(right.stats.tokens_per_verify_pass(), 4.0);
  EXPECT_EQ(right.pushed, p + 4 + 4 + 1);
  EXPECT_EQ(right.cache_length, p + 9);  // the last token is not pushed, as in plain decoding

  // The second draft of every pass is wrong: each pass keeps 1 draft + the target's token
  // (tokens 2-3, 4-5, 6-7, 8-9, the last pass drafting only 2), then a plain step for token 10.
  const Outcome spoilt =
      generate(prompt, 10, kGreedyDraft, std::make_unique<OracleDrafter>(truth, 1), DraftLength::fixed(3));
  EXPECT_EQ(spoilt.tokens, plain.tokens);
  EXPECT_EQ(spoilt.stats.decode_steps, 5u);
  EXPECT_EQ(spoilt.stats.verify_passes, 4u);
  EXPECT_EQ(spoilt.stats.drafted_tokens, 3u + 3 + 3 + 2);
  EXPECT_EQ(spoilt.stats.accepted_tokens, 4u);
  EXPECT_EQ(spoilt.stats.verified_tokens, 8u);
  EXPECT_EQ(spoilt.pushed, p + 4 + 4 + 4 + 3 + 1);
  EXPECT_EQ(spoilt.cache_length, p + 9);  // rejected positions rolled back

  // The first draft always wrong: nothing accepted, every pass gives the target's own token.
  const Outcome useless =
      generate(prompt, 10, kGreedyDraft, std::make_unique<OracleDrafter>(truth, 0), DraftLength::fixed(2));
  EXPECT_EQ(useless.tokens, plain.tokens);
  EXPECT_EQ(useless.stats.accepted_tokens, 0u);
  EXPECT_EQ(useless.stats.decode_steps, 9u);
  EXPECT_EQ(useless.cache_length, p + 9);
}

// The adaptive length bounds what useless drafts cost: passes of 3, 2, 2 and then 1 draft
// while the acceptance estimate falls (after tokens 1 to 7), then probes of 1 after waits of
// 1, 2, 4 .. 64 plain steps (after tokens 9, 12, 17, 26, 43, 76 and 141). Over 150 tokens
// (the prefill's and 149 passes of one token each) that is 18 rows drafted in 14 passes, 12%
// more positions than plain decoding pushes.
TEST(Speculative, AdaptiveLengthBoundsTheCostOfUselessDrafts) {
  const OpenedModel& m = target();
  const std::string prompt = prompts()[0];
  const Outcome plain = generate(prompt, 150, kGreedyDraft);
  ASSERT_EQ(plain.tokens.size(), 150u);
  std::vector<int32_t> truth = encode_raw_prompt(m.tokenizer, prompt);
  const size_t p = truth.size();
  truth.insert(truth.end(), plain.tokens.begin(), plain.tokens.end());
  const Outcome useless = generate(prompt, 150, kGreedyDraft, std::make_unique<OracleDrafter>(truth, 0));
  EXPECT_EQ(useless.tokens, plain.tokens);
  EXPECT_EQ(useless.stats.accepted_tokens, 0u);
  EXPECT_EQ(useless.stats.verify_passes, 14u);
  EXPECT_EQ(useless.stats.drafted_tokens, 3u + 2 + 2 + 11);
  EXPECT_EQ(useless.stats.decode_steps, 149u);
  EXPECT_EQ(useless.pushed, p + 149 + 18);
  EXPECT_EQ(plain.pushed, p + 149);
}

// The draft model prefills the prompt with the target, then follows the context: it pushes
// only the tokens its cache lacks (the first token, then what the last pass kept beyond its
// drafts), never the prompt again.
TEST(Speculative, DraftModelCachePrefillsOnceAndFollowsTheContext) {
  const OpenedModel& m = target();
  const std::string prompt = prompts()[1];
  const size_t p = encode_raw_prompt(m.tokenizer, prompt).size();
  const int64_t vocab = m.tokenizer.vocab_size();
  for (int64_t n : {1, 10}) {
    Generator gen(m.model, m.tokenizer, kGreedyDraft);
    auto drafter = std::make_unique<ModelDrafter>(m.model, vocab);
    const ModelDrafter& draft = *drafter;
    gen.set_drafter(std::move(drafter), DraftLength::fixed(3));
    gen.generate(encode_raw_prompt(m.tokenizer, prompt), {.max_new_tokens = n}, [](std::string_view) {});
    // n = 1: the prefill only. n = 10: the prefill; pass 1 pushes t1, d1, d2 (drafting d1..d3);
    // pass 2 pushes d3, t5, e1, e2; then the budget leaves no room to draft.
    EXPECT_EQ(draft.sequence().positions_pushed(), n == 1 ? p : p + 3 + 4) << n;
    EXPECT_EQ(draft.sequence().length(), n == 1 ? p : p + 3 + 4) << n;
  }
}

// bench generate --draft-oracle with a draft model: the draft model does its usual work, and
// the override decides the tokens; the cache then holds the tokens it drafted (the overridden
// ones), as it would hold accepted drafts.
TEST(Speculative, OverriddenDraftChoicesKeepTheDraftModelsWork) {
  const OpenedModel& m = target();
  const std::vector<int32_t> context = encode_raw_prompt(m.tokenizer, prompts()[1]);
  const int64_t vocab = m.tokenizer.vocab_size();
  ModelDrafter own(m.model, vocab);
  ModelDrafter forced(m.model, vocab);
  std::vector<std::pair<size_t, int32_t>> seen;
  forced.override_choices([&](size_t position, int32_t drafted) {
    seen.emplace_back(position, drafted);
    return static_cast<int32_t>((drafted + 1 + position) % static_cast<size_t>(vocab));
  });
  std::vector<int32_t> a, b;
  own.draft(context, 4, a);
  forced.draft(context, 4, b);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  ASSERT_EQ(seen.size(), 4u);
  // The same work: the context and three drafts pushed through the draft model.
  EXPECT_EQ(forced.sequence().positions_pushed(), context.size() + 3);
  EXPECT_EQ(own.sequence().positions_pushed(), context.size() + 3);
  // The first choice is the model's own (the same logits); each token is the override's.
  EXPECT_EQ(seen[0].second, a[0]);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(seen[i].first, context.size() + i);
    EXPECT_EQ(b[i], static_cast<int32_t>((seen[i].second + 1 + seen[i].first) % static_cast<size_t>(vocab)));
  }
  EXPECT_NE(b, a);
  // The overridden tokens are what its cache holds: accepting all four pushes only the last.
  std::vector<int32_t> accepted = context;
  accepted.insert(accepted.end(), b.begin(), b.end());
  std::vector<int32_t> c;
  EXPECT_EQ(forced.behind(accepted), 0u);  // the last draft is the context's last: pushed anyway
  forced.draft(accepted, 1, c);
  EXPECT_EQ(forced.sequence().positions_pushed(), context.size() + 3 + 1);
  // Behind: what the next draft must push besides the context's last token. After three more
  // tokens (plain steps) that is two: the last of them is pushed anyway. A context that parts
  // from the cached tokens counts from where they part.
  EXPECT_EQ(forced.behind(accepted), 0u);
  std::vector<int32_t> later = accepted;
  for (int32_t t : {5, 6, 7}) later.push_back(t);
  EXPECT_EQ(forced.behind(later), 2u);
  ASSERT_GE(context.size(), 3u);
  std::vector<int32_t> other = context;  // parts from the cache two tokens before its end
  other[other.size() - 3] = (other[other.size() - 3] + 1) % static_cast<int32_t>(vocab);
  EXPECT_EQ(forced.behind(other), 2u);
  forced.reset();
  EXPECT_EQ(forced.behind(later), later.size() - 1);
  EXPECT_EQ(PromptLookupDrafter(2).behind(later), 0u);
  // Sampled drafts cannot be overridden.
  ModelDrafter sampled(m.model, vocab, SamplerParams{.temperature = 0.8});
  EXPECT_THROW(sampled.override_choices([](size_t, int32_t t) { return t; }), Error);
}

// Prompt lookup on a copy-heavy prompt, counted against a simulation of the scheme over the
// plain output: each pass drafts lookup(context, k) for the k the budget allows, keeps the
// longest prefix that matches the plain tokens, plus one.
TEST(Speculative, LookupCountsMatchASimulationOverThePlainOutput) {
  const OpenedModel& m = target();
  for (const std::string& prompt : {prompts()[2], prompts()[3]}) {
    const int64_t n = 80;
    const Outcome plain = generate(prompt, n, kGreedyDraft);
    ASSERT_EQ(plain.stats.stop_reason, StopReason::MaxTokens);
    std::vector<int32_t> truth = encode_raw_prompt(m.tokenizer, prompt);
    const size_t p = truth.size();
    truth.insert(truth.end(), plain.tokens.begin(), plain.tokens.end());
    const size_t k = 5;
    size_t passes = 0, drafted = 0, accepted = 0, steps = 0;
    PromptLookupDrafter lookup(3);
    std::vector<int32_t> d;
    for (size_t have = p + 1; have < truth.size();) {
      const size_t room = std::min(k, truth.size() - have - 1);
      d.clear();
      if (room > 0) lookup.draft(std::span(truth).first(have), room, d);
      size_t a = 0;
      while (a < d.size() && d[a] == truth[have + a]) ++a;
      ++steps;
      passes += d.empty() ? 0 : 1;
      drafted += d.size();
      accepted += a;
      have += a + 1;
    }
    const Outcome spec =
        generate(prompt, n, kGreedyDraft, std::make_unique<PromptLookupDrafter>(3), DraftLength::fixed(k));
    EXPECT_EQ(spec.tokens, plain.tokens);
    EXPECT_EQ(spec.stats.decode_steps, steps);
    EXPECT_EQ(spec.stats.verify_passes, passes);
    EXPECT_EQ(spec.stats.drafted_tokens, drafted);
    EXPECT_EQ(spec.stats.accepted_tokens, accepted);
    EXPECT_GT(accepted, 20u) << prompt;  // copy-heavy: most tokens come from the prompt
  }
}

// A sequence continued by a second generate() (a chat turn) stays exact under speculation.
TEST(Speculative, ContinuedSequenceStaysExact) {
  const OpenedModel& m = target();
  const auto turns = [&](std::unique_ptr<Drafter> drafter) {
    Generator gen(m.model, m.tokenizer, kGreedyDraft);
    if (drafter) gen.set_drafter(std::move(drafter), DraftLength::adaptive());
    for (const std::string& text : {prompts()[2], std::string("\n\nKING HENRY:\nOnce more")}) {
      gen.generate(encode_raw_prompt(m.tokenizer, text), {.max_new_tokens = 30}, [](std::string_view) {});
    }
    return std::vector<int32_t>(gen.tokens().begin(), gen.tokens().end());
  };
  const std::vector<int32_t> plain = turns(nullptr);
  EXPECT_EQ(turns(std::make_unique<PromptLookupDrafter>(2)), plain);
  const OpenedModel int4 = open_default(WeightType::Q4_0);
  EXPECT_EQ(turns(std::make_unique<ModelDrafter>(int4.model, m.tokenizer.vocab_size())), plain);
}

TEST(Speculative, DraftWithAnotherVocabularyIsRefused) {
  test::TempDir dir;
  test::write_tiny_model_dir(dir.path());
  const Tokenizer tiny = Tokenizer::load(dir.path());
  require_same_vocabulary(target().tokenizer, target().tokenizer);
  try {
    require_same_vocabulary(target().tokenizer, tiny);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\n'), std::string::npos);
    EXPECT_NE(what.find("vocabulary has 300 tokens but the target's has 2048"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace nanoinfer
