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

// The GGUF keys of the hyper-parameters: "{arch}.block_count" and so on, held as strings for
// the HyperParameterNames views.
struct GgufKeys {
  explicit GgufKeys(std::string_view arch)
      : vocab_size(fmt::format("{}.vocab_size", arch)),
        hidden_size(fmt::format("{}.embedding_length", arch)),
        intermediate_size(fmt::format("{}.feed_forward_length", arch)),
        num_hidden_layers(fmt::format("{}.block_count", arch)),
        num_attention_heads(fmt::format("{}.attention.head_count", arch)),
        num_key_value_heads(fmt::format("{}.attention.head_count_kv", arch)),
        max_position_embeddings(fmt::format("{}.context_length", arch)),
        rope_theta(fmt::format("{}.rope.freq_base", arch)),
        rms_norm_eps(fmt::format("{}.attention.layer_norm_rms_epsilon", arch)),
        head_dim(fmt::format("{}.attention.key_length", arch)) {}
  std::string vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
      max_position_embeddings, rope_theta, rms_norm_eps, head_dim;
  HyperParameterNames names() const {
    return {.gguf = true,
            .vocab_size = vocab_size,
            .hidden_size = hidden_size,
            .intermediate_size = intermediate_size,
            .num_hidden_layers = num_hidden_layers,
            .num_attention_heads = num_attention_heads,
            .num_key_value_heads = num_key_value_heads,
            .max_position_embeddings = max_position_embeddings,
            .rope_theta = rope_theta,
            .rms_norm_eps = rms_norm_eps,
            .head_dim = head_dim};
  }
};

}  // namespace

ModelConfig config_from_gguf(const GgufLayout& layout) {
  const std::string_view origin = layout.origin;
  const std::string& arch_name = layout.get_string("general.architecture");
  const ArchitectureInfo* arch = find_architecture(arch_name);
  if (arch == nullptr)
    fail("{}: general.architecture '{}' is not supported (nanoinfer supports {})", origin, arch_name,
         supported_architectures());
  const GgufKeys k(arch->name);
  const auto key = [&](std::string_view suffix) { return fmt::format("{}.{}", arch->name, suffix); };

  // RoPE scaling in the metadata: Llama 3's scaling is carried by the rope_freqs.weight tensor
  // (read with the weights), not by these keys, so any scaling type named here is refused.
  if (const GgufValue* v = layout.find(key("rope.scaling.type"))) {
    const auto* s = std::get_if<std::string>(&v->value);
    if (s == nullptr || *s != "none")
      fail("{}: metadata '{}': RoPE scaling is not supported", origin, key("rope.scaling.type"));
  }

  ModelConfig c;
  c.model_type = std::string(arch->name);
  c.architecture = arch->arch;
  c.hidden_size = dim(layout, k.hidden_size);
  c.intermediate_size = dim(layout, k.intermediate_size);
  c.num_hidden_layers = dim(layout, k.num_hidden_layers);
  c.num_attention_heads = dim(layout, k.num_attention_heads);
  c.num_key_value_heads =
      layout.find(k.num_key_value_heads) != nullptr ? dim(layout, k.num_key_value_heads) : c.num_attention_heads;
  c.max_position_embeddings =
      layout.find(k.max_position_embeddings) != nullptr ? dim(layout, k.max_position_embeddings) : 32768;
  c.rope_theta = number(layout, k.rope_theta, 10000.0);
  c.rms_norm_eps = number(layout, k.rms_norm_eps, 1e-6);
  if (arch->head_dim_from_config && layout.find(k.head_dim) != nullptr) c.explicit_head_dim = dim(layout, k.head_dim);
  c.tie_word_embeddings = layout.find_tensor("output.weight") == nullptr;
  c.torch_dtype = "";  // not recorded in GGUF; the tensors carry their own types

  const GgufTensorInfo* embd = layout.find_tensor("token_embd.weight");
  if (embd == nullptr) fail("{}: missing tensor 'token_embd.weight'", origin);
  if (embd->dims.size() != 2 || embd->dims[0] != static_cast<uint64_t>(c.hidden_size) || embd->dims[1] == 0 ||
      embd->dims[1] > static_cast<uint64_t>(kMaxVocabSize))
    fail(
        "{}: tensor 'token_embd.weight': expected dims [{}, vocab] (vocab in [1, {}]), found "
        "[{}]",
        origin, c.hidden_size, kMaxVocabSize, fmt::join(embd->dims, ", "));
  c.vocab_size = static_cast<int64_t>(embd->dims[1]);
  if (layout.find(k.vocab_size) != nullptr && dim(layout, k.vocab_size) != c.vocab_size)
    fail("{}: metadata '{}' {} differs from the {} rows of token_embd.weight", origin, k.vocab_size,
         dim(layout, k.vocab_size), c.vocab_size);
  if (const GgufValue* tokens = layout.find("tokenizer.ggml.tokens")) {
    const auto* a = std::get_if<GgufArray>(&tokens->value);
    if (a != nullptr && a->size() != static_cast<size_t>(c.vocab_size))
      fail("{}: metadata 'tokenizer.ggml.tokens' has {} tokens, token_embd.weight {} rows", origin, a->size(),
           c.vocab_size);
  }

  check_hyperparameters(c, origin, k.names());  // the same checks as config.json's
  for (const std::string& name : {key("rope.dimension_count"), k.head_dim, key("attention.value_length")}) {
    if (layout.find(name) != nullptr && layout.get_uint(name) != static_cast<uint64_t>(c.head_dim()))
      fail("{}: metadata '{}' {} differs from the head dim {}{}", origin, name, layout.get_uint(name), c.head_dim(),
           c.explicit_head_dim != 0 ? "" : " (embedding_length / attention.head_count)");
  }
  return c;
}

}  // namespace nanoinfer
