#include "model/gguf_config.h"

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

// An integer key as it is (the range is check_hyperparameters'): beyond int64 reads as its max.
int64_t dim(const GgufLayout& layout, std::string_view key) {
  return static_cast<int64_t>(std::min<uint64_t>(layout.get_uint(key), uint64_t{INT64_MAX}));
}

double number(const GgufLayout& layout, std::string_view key, double fallback) {
  return layout.find(key) == nullptr ? fallback : layout.get_float(key);
}

const HyperParameterNames kGgufNames{.gguf = true,
                                     .vocab_size = "qwen2.vocab_size",
                                     .hidden_size = "qwen2.embedding_length",
                                     .intermediate_size = "qwen2.feed_forward_length",
                                     .num_hidden_layers = "qwen2.block_count",
                                     .num_attention_heads = "qwen2.attention.head_count",
                                     .num_key_value_heads = "qwen2.attention.head_count_kv",
                                     .max_position_embeddings = "qwen2.context_length",
                                     .rope_theta = "qwen2.rope.freq_base",
                                     .rms_norm_eps = "qwen2.attention.layer_norm_rms_epsilon"};

}  // namespace

ModelConfig config_from_gguf(const GgufLayout& layout) {
  const std::string_view origin = layout.origin;
  const std::string& arch = layout.get_string("general.architecture");
  if (arch != "qwen2")
    fail(
        "{}: general.architecture '{}' is not supported (nanoinfer supports 'qwen2': the Qwen2 "
        "/ Qwen2.5 family)",
        origin, arch);

  // Features of other qwen2-family files that the forward pass does not implement.
  if (const GgufValue* v = layout.find("qwen2.rope.scaling.type")) {
    const auto* s = std::get_if<std::string>(&v->value);
    if (s == nullptr || *s != "none")
      fail("{}: metadata 'qwen2.rope.scaling.type': RoPE scaling is not supported", origin);
  }

  ModelConfig c;
  c.model_type = "qwen2";
  c.hidden_size = dim(layout, "qwen2.embedding_length");
  c.intermediate_size = dim(layout, "qwen2.feed_forward_length");
  c.num_hidden_layers = dim(layout, "qwen2.block_count");
  c.num_attention_heads = dim(layout, "qwen2.attention.head_count");
  c.num_key_value_heads = layout.find("qwen2.attention.head_count_kv") != nullptr
                              ? dim(layout, "qwen2.attention.head_count_kv")
                              : c.num_attention_heads;
  c.max_position_embeddings =
      layout.find("qwen2.context_length") != nullptr ? dim(layout, "qwen2.context_length") : 32768;
  c.rope_theta = number(layout, "qwen2.rope.freq_base", 10000.0);
  c.rms_norm_eps = number(layout, "qwen2.attention.layer_norm_rms_epsilon", 1e-6);
  c.tie_word_embeddings = layout.find_tensor("output.weight") == nullptr;
  c.torch_dtype = "";  // not recorded in GGUF; the tensors carry their own types

  const GgufTensorInfo* embd = layout.find_tensor("token_embd.weight");
  if (embd == nullptr) fail("{}: missing tensor 'token_embd.weight'", origin);
  if (embd->dims.size() != 2 || embd->dims[0] != static_cast<uint64_t>(c.hidden_size) ||
      embd->dims[1] == 0 || embd->dims[1] > static_cast<uint64_t>(kMaxVocabSize))
    fail(
        "{}: tensor 'token_embd.weight': expected dims [{}, vocab] (vocab in [1, {}]), found "
        "[{}]",
        origin, c.hidden_size, kMaxVocabSize, fmt::join(embd->dims, ", "));
  c.vocab_size = static_cast<int64_t>(embd->dims[1]);
  if (layout.find("qwen2.vocab_size") != nullptr && dim(layout, "qwen2.vocab_size") != c.vocab_size)
    fail("{}: metadata 'qwen2.vocab_size' {} differs from the {} rows of token_embd.weight", origin,
         dim(layout, "qwen2.vocab_size"), c.vocab_size);
  if (const GgufValue* tokens = layout.find("tokenizer.ggml.tokens")) {
    const auto* a = std::get_if<GgufArray>(&tokens->value);
    if (a != nullptr && a->size() != static_cast<size_t>(c.vocab_size))
      fail("{}: metadata 'tokenizer.ggml.tokens' has {} tokens, token_embd.weight {} rows", origin,
           a->size(), c.vocab_size);
  }

  check_hyperparameters(c, origin, kGgufNames);  // the same checks as config.json's
  for (const std::string_view key : {"qwen2.rope.dimension_count", "qwen2.attention.key_length",
                                     "qwen2.attention.value_length"}) {
    if (layout.find(key) != nullptr && layout.get_uint(key) != static_cast<uint64_t>(c.head_dim()))
      fail("{}: metadata '{}' {} differs from embedding_length / attention.head_count = {}", origin,
           key, layout.get_uint(key), c.head_dim());
  }
  return c;
}

}  // namespace nanoinfer
