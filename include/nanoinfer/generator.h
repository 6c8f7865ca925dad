// One sequence generated on its own, for `generate`, `chat`, `viz` and `bench generate`:
// prefill the new tokens, then run the generation step (nanoinfer/generation_step.h: logit
// processors -> sampler -> stop rules -> streamed text) and push each chosen token through
// the model until the step says the generation ended.
//
// A Generator owns one sequence: its KV cache and the token history (what the cache holds
// plus, at most, the last token sampled, which is only pushed through the model when the
// sequence continues). Calling generate() again continues the same sequence, so a chat turn
// prefills only its own new tokens. The history doubles as the repetition penalty's context
// (prompt and generated tokens, as in Hugging Face).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/generation_step.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/model.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/speculative.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

struct GenerationStats {
  size_t prompt_tokens = 0;        // positions prefilled by this call
  size_t generated_tokens = 0;     // tokens sampled and kept (an end-of-sequence id is not kept)
  size_t decode_steps = 0;         // forward passes after the prefill (one token, or a verification pass)
  size_t decode_tokens = 0;        // tokens chosen from those passes' logits (kept, or end of sequence)
  double prefill_seconds = 0;      // the prefill forward pass (and a draft model's: Drafter::prefill)
  double first_token_seconds = 0;  // start of the call to the first token sampled
  double decode_seconds = 0;       // first token sampled to the last one
  StopReason stop_reason = StopReason::MaxTokens;

  // Speculative decoding (Generator::set_drafter): passes that verified at least one draft,
  // tokens drafted for them, drafts accepted, and tokens chosen from their logits (the accepted
  // drafts plus, usually, the target's own next token).
  size_t verify_passes = 0;
  size_t drafted_tokens = 0;
  size_t accepted_tokens = 0;
  size_t verified_tokens = 0;
  double draft_seconds = 0;  // of decode_seconds, the time the drafter took

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;  // decode_tokens / decode_seconds
  double acceptance_rate() const;           // accepted / drafted (0 when nothing was drafted)
  double tokens_per_verify_pass() const;    // verified_tokens / verify_passes (0 without passes)
};

class Generator {
 public:
  // `model` and `tokenizer` must outlive the generator. The sequence spans model.max_context().
  Generator(const Model& model, const Tokenizer& tokenizer, const SamplerParams& params);

  // Appends `new_tokens` to the sequence, prefills everything not yet in the cache, then
  // generates. Each call starts a new step (a fresh sampler stream from the params' seed). Throws Error, before any
  // work, if the tokens do not fit in the context. `observer`, when set, sees every step (nanoinfer/generation_step.h).
  GenerationStats generate(std::span<const int32_t> new_tokens, const StopRules& rules, const TextSink& on_text,
                           const StepObserver& observer = {});

  // Decodes speculatively from now on (nanoinfer/speculative.h): each step drafts up to
  // length.next() tokens with `drafter` and verifies them in one forward pass of the model.
  // Greedy, and sampled with deterministic drafts (prompt lookup, greedy draft models), the
  // tokens are bitwise those of plain decoding with the same seed; with sampled drafts they
  // are chosen by rejection sampling, distributed as plain sampling's. A null drafter decodes
  // plainly.
  void set_drafter(std::unique_ptr<Drafter> drafter, DraftLength length);

  // Adds a logit processor to the sequence's step (restarted with each generate() call).
  void add_processor(std::unique_ptr<LogitProcessor> processor) { step_.add_processor(std::move(processor)); }

  // Forgets the sequence (the cache keeps its storage); a drafter forgets it too and the draft
  // length starts over.
  void reset();

  std::span<const int32_t> tokens() const { return history_; }  // prompt + generated so far
  const KvCache& cache() const { return seq_.cache(); }
  const Sequence& sequence() const { return seq_; }
  Sequence& sequence() { return seq_; }
  const Model& model() const { return model_; }
  size_t context_size() const { return seq_.cache().capacity(); }

 private:
  const Model& model_;
  GenerationStep step_;  // one per sequence: its sampler stream goes on across generate() calls
  Sequence seq_;
  std::vector<int32_t> history_;  // tokens of the sequence; the first cache_.length() are cached
  std::vector<int32_t> to_push_;  // scratch: the prefill, then each pass's pending token and drafts
  SpeculativeStep spec_;          // set_drafter(); plain decoding without one

  // Throws Error unless the rules are valid and the tokens the cache lacks (to_push_: the
  // pending token and `new_tokens`) fit in the context.
  void check_fits(std::span<const int32_t> new_tokens, const StopRules& rules) const;
};

}  // namespace nanoinfer
