// The trace behind `nanoinfer viz` (format: docs/VIZ.md), recorded by the library so that the
// command only writes or serves it. Three runs of the same generation step (same sampling,
// same seed), each through GenerationStep like every other front end:
//   traced:   cached decoding with the attention tap; an observer records the candidates of
//             each step, the tap the attention of every layer and head over the context;
//   cached:   the same, untapped and timed: the prompt once, then one position per step;
//   uncached: from an empty cache at every step, the whole context pushed again, timed.
// The model's logits are bitwise independent of chunking, so all three choose the same
// tokens; the trace records what each actually chose, and the page shows whether they agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nanoinfer/model.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

struct VizTraceRequest {
  std::string model_label;      // "settings.model" of the trace
  std::string prompt_text;      // "settings.prompt": what the user typed
  std::vector<int32_t> prompt;  // its tokens (encode_raw_prompt / encode_chat_prompt); non-empty
  int64_t n_predict = 32;       // >= 1: steps traced at most
  SamplerParams params;
  std::vector<int32_t> eos_ids;  // the traced run ends at one (its step is shown)
};

struct VizTrace {
  std::string json;         // the trace, one line (partial UTF-8 in pieces as U+FFFD)
  size_t steps = 0;         // steps traced
  bool race_agrees = true;  // cached and recomputed decoding chose the same tokens
};

VizTrace record_viz_trace(const Model& model, const Tokenizer& tok, const VizTraceRequest& request);

// One timed step of a decoding race: the token chosen, positions pushed through the model for
// it and the seconds its forward pass took.
struct TimedStep {
  int32_t token;
  uint64_t positions;
  double seconds;
};

// `n_steps` steps of the generation step from `prompt` (no end-of-sequence rule: it runs the
// whole count unless the context fills), each forward pass timed: `cached` pushes the prompt
// once, then one position per step; otherwise the cache is cleared and the whole context
// pushed again at every step (full recomputation). Used by viz's race and `bench generate`.
std::vector<TimedStep> run_timed_steps(const Model& model, const Tokenizer& tok, std::span<const int32_t> prompt,
                                       size_t n_steps, const SamplerParams& params, bool cached);

}  // namespace nanoinfer
