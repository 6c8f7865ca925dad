// config.json of a Hugging Face Qwen2 model directory, typed and checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace nanoinfer {

struct ModelConfig {
  std::string model_type;  // "qwen2"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t max_position_embeddings = 0;
  double rope_theta = 10000.0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  std::string torch_dtype;  // informational: "bfloat16", "float32", ...

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
  int64_t group_size() const { return num_attention_heads / num_key_value_heads; }
  // Parameters of the model's required tensors (a tied LM head shares the embedding), from
  // the tensor manifest: the one count every command reports.
  uint64_t parameter_count() const;

  // Parses JSON text and checks invariants; `origin` names the source in error messages.
  static ModelConfig parse(std::string_view json_text, std::string_view origin);
  static ModelConfig load(const std::filesystem::path& config_json);
};

}  // namespace nanoinfer
