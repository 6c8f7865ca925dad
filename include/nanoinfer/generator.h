// The generation loop shared by `generate`, `chat` and `bench generate`: prefill the new
// tokens, then sample -> stream -> decode one token at a time until an end-of-sequence id, a
// stop string, the token budget or the end of the context.
//
// A Generator owns one sequence: its KV cache and the token history (what the cache holds
// plus, at most, the last token sampled, which is only pushed through the model when the
// sequence continues). Calling generate() again continues the same sequence, so a chat turn
// prefills only its own new tokens. The history doubles as the repetition penalty's context
// (prompt and generated tokens, as in Hugging Face). Only ids the tokenizer has are ever
// sampled: embedding rows past its vocabulary (Qwen2.5 pads 151,665 tokens to 151,936) are
// padding that a random or quantized model might otherwise pick.
//
// Text reaches the caller through a callback as soon as it is safe: UTF-8 is never split
// (StreamDecoder), and text that could be the start of a stop string is held back until it
// is known not to be one. A stop string ends generation and is not emitted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/kv_cache.h"
#include "nanoinfer/model.h"
#include "nanoinfer/sampler.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

struct GenerateOptions {
  int64_t max_new_tokens = 256;        // >= 0
  std::vector<int32_t> eos_ids;        // sampling any of these ends generation (not emitted)
  std::vector<std::string> stop_strings;  // non-empty strings
};

enum class StopReason { Eos, StopString, MaxTokens, ContextFull };
std::string_view stop_reason_name(StopReason reason);

struct GenerationStats {
  size_t prompt_tokens = 0;     // positions prefilled by this call
  size_t generated_tokens = 0;  // tokens sampled and kept (an end-of-sequence id is not kept)
  size_t decode_steps = 0;      // single-token forward passes
  double prefill_seconds = 0;   // the prefill forward pass
  double first_token_seconds = 0;  // start of the call to the first token sampled
  double decode_seconds = 0;    // first token sampled to the last one
  StopReason stop_reason = StopReason::MaxTokens;

  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

using TextSink = std::function<void(std::string_view)>;

class Generator {
 public:
  // `model` and `tokenizer` must outlive the generator. The sequence spans model.max_context().
  Generator(const Model& model, const Tokenizer& tokenizer, const SamplerParams& params);

  // Appends `new_tokens` to the sequence, prefills everything not yet in the cache, then
  // generates. Throws Error, before any work, if the tokens do not fit in the context.
  GenerationStats generate(std::span<const int32_t> new_tokens, const GenerateOptions& options,
                           const TextSink& on_text);

  // Forgets the sequence (the cache keeps its storage).
  void reset();

  std::span<const int32_t> tokens() const { return history_; }  // prompt + generated so far
  const KvCache& cache() const { return seq_.cache(); }
  const Sequence& sequence() const { return seq_; }
  Sequence& sequence() { return seq_; }
  const Model& model() const { return model_; }
  size_t context_size() const { return seq_.cache().capacity(); }

 private:
  const Model& model_;
  const Tokenizer& tokenizer_;
  Sampler sampler_;
  Sequence seq_;
  std::vector<int32_t> history_;  // tokens of the sequence; the first cache_.length() are cached
  std::vector<int32_t> to_push_;  // scratch for the prefill
};

// Streams text while holding back any suffix that could begin a stop string.
class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);
  // Adds text; emits what is safe. Returns true when a stop string appeared: the text before
  // it has been emitted and the filter takes no more input.
  bool push(std::string_view text, const TextSink& on_text);
  // Emits whatever was held back (end of generation without a stop string).
  void finish(const TextSink& on_text);

 private:
  std::vector<std::string> stops_;
  size_t longest_ = 0;
  std::string text_;     // everything pushed
  size_t emitted_ = 0;   // bytes of text_ already emitted
  bool stopped_ = false;
};

}  // namespace nanoinfer
