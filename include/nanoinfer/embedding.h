// Text embeddings: each input's tokens through the model without the LM head, the final-normed
// hidden states of its positions pooled into one vector, then L2-normalised.
//
// An input is encoded as a plain prompt is (the tokenizer's prompt_prefix, the text, special
// tokens spelled in it parsed) and ends with the tokenizer's prompt_suffix (Qwen3-Embedding's
// <|endoftext|>, from its tokenizer.json post-processor or a GGUF file's add_eos_token).
// Pooling: Mean averages every position, Cls takes the first, Last the last (the appended end
// token for Qwen3-Embedding). `dimensions` keeps the first d components (Matryoshka
// representation), normalised again after the cut.
//
// Many inputs are computed in one batched pass: each is a sequence of its own in one forward
// step (Model::hidden_states), and an input longer than the rows of a pass continues in the next.
//
// Usage:
//   OpenedModel m = open_model("models/qwen3-embedding-0.6b");
//   EmbedOptions o{.pooling = resolve_pooling(std::nullopt, m.pooling)};
//   std::vector<std::vector<int32_t>> in{embedding_tokens(m.tokenizer, "a text")};
//   std::vector<float> e = embed(m.model, in, o)[0];
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/model.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

enum class Pooling { Mean, Cls, Last };

std::string_view pooling_name(Pooling pooling);  // "mean", "cls", "last"
// "mean", "cls" (or "first"), "last"; throws Error naming the accepted names otherwise.
Pooling parse_pooling(std::string_view name);

// What a model's files say about pooling: a Hugging Face directory's sentence-transformers
// Pooling module (modules.json, 1_Pooling/config.json), a GGUF file's `<arch>.pooling_type`.
struct ModelPooling {
  std::optional<Pooling> pooling;  // nullopt: the files say nothing (a generation model)
  std::string origin;              // where it was read, for messages: ".../1_Pooling/config.json"
  // Non-empty when the files ask for a pooling this engine does not compute (max, weighted mean,
  // a reranker's rank): embedding such a model needs an explicit pooling.
  std::string unsupported;
};

// The pooling to use: the flag when given, else the model's own, else Last (a causal model's
// last position is the only one that has seen the whole text). Throws Error when the model
// asks for one that is not computed and no flag overrides it.
Pooling resolve_pooling(std::optional<Pooling> flag, const ModelPooling& model);

struct EmbedOptions {
  Pooling pooling = Pooling::Last;
  bool normalize = true;  // L2-normalise (after the Matryoshka cut)
  size_t dimensions = 0;  // 0: the hidden size; else the first `dimensions` components
  size_t batch_rows = 0;  // rows (tokens of all inputs) per forward pass; 0: the model's max_batch
};

// The tokens one text is embedded from: prompt_prefix, the text, prompt_suffix.
std::vector<int32_t> embedding_tokens(const Tokenizer& tokenizer, std::string_view text);

// The embedding of every input, in order, each of `dimensions` floats (or the hidden size).
// Throws Error, before any work, for an empty input ("input 3 is empty"), one longer than the
// context ("input 2 is 900 tokens but the context holds 512"), a token id outside the
// vocabulary, or dimensions outside [1, hidden size]; and for a non-finite hidden state.
std::vector<std::vector<float>> embed(const Model& model, std::span<const std::vector<int32_t>> inputs,
                                      const EmbedOptions& options);

}  // namespace nanoinfer
