// config.json of a Hugging Face Qwen2 model directory, typed and checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace nanoinfer {

// The ranges a hyper-parameter must be in, from either file format (config.json, GGUF): what
// real models use with a wide margin. The largest open models have 256k vocabularies, hidden
// size 16,384, intermediate size 53,248, 126 layers, 128 heads, head dim 256 and 1M positions;
// rms_norm_eps is 1e-5 or 1e-6 and rope_theta 1e4 to 1e7. Beyond these a file is broken or
// hostile: 100,000 layers made an error line of 103 MB, 2^24 reached 11 GB before bad_alloc.
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 20;
inline constexpr int64_t kMaxHiddenSize = int64_t{1} << 16;
inline constexpr int64_t kMaxIntermediateSize = int64_t{1} << 18;
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 1024;
inline constexpr int64_t kMaxHeadDim = 1024;
inline constexpr int64_t kMaxPositions = int64_t{1} << 24;
inline constexpr double kMaxRmsNormEps = 1e-2;
inline constexpr double kMinRopeTheta = 1.0;
inline constexpr double kMaxRopeTheta = 1e12;

struct ModelConfig;

// How a file names each hyper-parameter, for check_hyperparameters' messages: config.json's
// keys quoted as field "KEY", a GGUF file's as metadata 'KEY'.
struct HyperParameterNames {
  bool gguf = false;
  std::string_view vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
      num_key_value_heads, max_position_embeddings, rope_theta, rms_norm_eps;
};

// The one set of range and consistency checks for a config, whichever format it came from:
// every dimension in [1, its bound above], rms_norm_eps in (0, 0.01], rope_theta finite in
// [1, 1e12], heads dividing the hidden size, kv heads the heads, an even head dim of at most
// kMaxHeadDim. Throws Error "{origin}: field \"hidden_size\": expected ..." for the first problem.
void check_hyperparameters(const ModelConfig& c, std::string_view origin, const HyperParameterNames& names);

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
