// What a GGUF file's metadata means for nanoinfer's Qwen2 model: the config from the `qwen2.*`
// keys. (The GGUF tensor names are a column of the tensor manifest: model/manifest.h, included
// here for the name mapping.)
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "io/gguf.h"
#include "model/manifest.h"
#include "nanoinfer/config.h"

namespace nanoinfer {

// Reads general.architecture (must be "qwen2"; anything else is rejected by name) and the
// qwen2.* hyperparameters:
//   qwen2.block_count -> num_hidden_layers        qwen2.embedding_length -> hidden_size
//   qwen2.feed_forward_length -> intermediate_size qwen2.context_length -> max_position_embeddings
//   qwen2.attention.head_count[_kv] -> num_attention_heads / num_key_value_heads
//   qwen2.rope.freq_base -> rope_theta            qwen2.attention.layer_norm_rms_epsilon ->
//   rms_norm_eps
// vocab_size is the row count of token_embd.weight (it must agree with qwen2.vocab_size and the
// tokenizer.ggml.tokens length when those are present); tie_word_embeddings is true when the
// file has no output.weight. f32 values are widened exactly (1e-6f stays 9.99999997e-7).
// Checks the same invariants as ModelConfig::parse; throws Error naming the file and key.
ModelConfig config_from_gguf(const GgufLayout& layout);


}  // namespace nanoinfer
