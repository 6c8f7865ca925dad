// config.json of a Hugging Face model directory (Qwen2, Qwen3, Llama), typed and checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
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

// The architectures the forward implements. Each is one row of the table in model/config.cpp
// (its name in config.json's model_type and in GGUF's general.architecture, which are the
// same, and what its layers carry); the tensor manifest and the forward read the row's flags.
enum class Architecture { Qwen2, Qwen3, Llama };

struct ArchitectureInfo {
  Architecture arch;
  std::string_view name;      // "qwen2": HF model_type, GGUF general.architecture and key prefix
  std::string_view family;    // for messages: "Qwen2 / Qwen2.5"
  bool attention_bias;        // q, k and v carry biases (Qwen2)
  bool qk_norm;               // per-head RMSNorm on q and k before RoPE (Qwen3)
  bool head_dim_from_config;  // head_dim may differ from hidden / heads (Qwen3, Llama)
  bool llama3_rope_scaling;   // rope_scaling of type "llama3" is accepted (Llama)
};

const ArchitectureInfo& architecture_info(Architecture arch);
// The row named `name` (model_type or general.architecture), or nullptr.
const ArchitectureInfo* find_architecture(std::string_view name);
// "'qwen2' (Qwen2 / Qwen2.5), 'qwen3' (Qwen3, dense), 'llama' (Llama 3.x)": for error messages.
std::string supported_architectures();

// RoPE scaling of type "llama3" (Llama 3.1+): each frequency of the plain rule is kept, divided
// by `factor`, or blended between the two by its wavelength against the original context.
struct RopeScaling {
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

// How a file names each hyper-parameter, for check_hyperparameters' messages: config.json's
// keys quoted as field "KEY", a GGUF file's as metadata 'KEY'.
struct HyperParameterNames {
  bool gguf = false;
  std::string_view vocab_size, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
      num_key_value_heads, max_position_embeddings, rope_theta, rms_norm_eps, head_dim;
};

// The one set of range and consistency checks for a config, whichever format it came from:
// every dimension in [1, its bound above], rms_norm_eps in (0, 0.01], rope_theta finite in
// [1, 1e12], heads dividing the hidden size (unless head_dim is explicit), kv heads the heads,
// an even head dim of at most kMaxHeadDim, RoPE scaling factors that make sense. Throws Error "{origin}: field
// \"hidden_size\": expected ..." for the first problem.
void check_hyperparameters(const ModelConfig& c, std::string_view origin, const HyperParameterNames& names);

struct ModelConfig {
  std::string model_type;  // "qwen2", "qwen3" or "llama": architecture_info(architecture).name
  Architecture architecture = Architecture::Qwen2;
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
  // head_dim from the file (Qwen3-0.6B: 128 with hidden 1024 and 16 heads); 0 = hidden / heads.
  int64_t explicit_head_dim = 0;
  std::optional<RopeScaling> rope_scaling;  // Llama 3.1+ only

  const ArchitectureInfo& info() const { return architecture_info(architecture); }
  int64_t head_dim() const { return explicit_head_dim != 0 ? explicit_head_dim : hidden_size / num_attention_heads; }
  int64_t q_dim() const { return num_attention_heads * head_dim(); }
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
