// What a GGUF file's metadata means for nanoinfer's models: the config from the `{arch}.*`
// keys of its general.architecture (qwen2, qwen3, llama). (The GGUF tensor names are a column of
// the tensor manifest: model/manifest.h, included here for the name mapping.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "io/gguf.h"
#include "model/manifest.h"
#include "nanoinfer/config.h"

namespace nanoinfer {

// Reads general.architecture (a row of the architecture table; anything else is rejected by
// name) and its hyperparameters, ARCH standing for the architecture's name:
//   ARCH.block_count -> num_hidden_layers        ARCH.embedding_length -> hidden_size
//   ARCH.feed_forward_length -> intermediate_size ARCH.context_length -> max_position_embeddings
//   ARCH.attention.head_count[_kv] -> num_attention_heads / num_key_value_heads
//   ARCH.rope.freq_base -> rope_theta            ARCH.attention.layer_norm_rms_epsilon ->
//   rms_norm_eps                                 ARCH.attention.key_length -> head_dim (qwen3, llama)
// vocab_size is the row count of token_embd.weight (it must agree with ARCH.vocab_size and the
// tokenizer.ggml.tokens length when those are present); tie_word_embeddings is true when the
// file has no output.weight. f32 values are widened exactly (1e-6f stays 9.99999997e-7).
// Checks the same invariants as ModelConfig::parse; throws Error naming the file and key.
ModelConfig config_from_gguf(const GgufLayout& layout);

}  // namespace nanoinfer
