#include "nanoinfer/config.h"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/json_object.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

namespace {

using Json = nlohmann::json;

// An integer field as it is (the range is check_hyperparameters'): beyond int64 reads as its max.
int64_t get_int(const Json& j, const char* key, std::string_view origin,
                std::optional<int64_t> fallback = std::nullopt) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    fail("{}: missing required field \"{}\"", origin, key);
  }
  if (!it->is_number_integer()) fail("{}: field \"{}\": expected an integer, found {}", origin, key, json_excerpt(*it));
  if (it->is_number_unsigned())
    return static_cast<int64_t>(std::min<uint64_t>(it->get<uint64_t>(), uint64_t{INT64_MAX}));
  return it->get<int64_t>();
}

double get_number(const Json& j, const char* key, double fallback, std::string_view origin) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail("{}: field \"{}\": expected a number, found {}", origin, key, json_excerpt(*it));
  return it->get<double>();
}

const HyperParameterNames kJsonNames{.gguf = false,
                                     .vocab_size = "vocab_size",
                                     .hidden_size = "hidden_size",
                                     .intermediate_size = "intermediate_size",
                                     .num_hidden_layers = "num_hidden_layers",
                                     .num_attention_heads = "num_attention_heads",
                                     .num_key_value_heads = "num_key_value_heads",
                                     .max_position_embeddings = "max_position_embeddings",
                                     .rope_theta = "rope_theta",
                                     .rms_norm_eps = "rms_norm_eps",
                                     .head_dim = "head_dim"};

bool get_bool(const Json& j, const char* key, bool fallback, std::string_view origin) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail("{}: field \"{}\": expected true or false, found {}", origin, key, json_excerpt(*it));
  return it->get<bool>();
}

// The architectures, one row each (the order is Architecture's).
constexpr std::array<ArchitectureInfo, 3> kArchitectures{{
    {.arch = Architecture::Qwen2,
     .name = "qwen2",
     .family = "Qwen2 / Qwen2.5",
     .attention_bias = true,
     .qk_norm = false,
     .head_dim_from_config = false,
     .llama3_rope_scaling = false},
    {.arch = Architecture::Qwen3,
     .name = "qwen3",
     .family = "Qwen3, dense",
     .attention_bias = false,
     .qk_norm = true,
     .head_dim_from_config = true,
     .llama3_rope_scaling = false},
    {.arch = Architecture::Llama,
     .name = "llama",
     .family = "Llama 3.x",
     .attention_bias = false,
     .qk_norm = false,
     .head_dim_from_config = true,
     .llama3_rope_scaling = true},
}};

// rope_scaling: null, or {"rope_type" (or "type"): "llama3", factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings} where the architecture takes it.
std::optional<RopeScaling> parse_rope_scaling(const Json& j, const ArchitectureInfo& arch, std::string_view origin) {
  const auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return std::nullopt;
  const Json* type = nullptr;
  if (it->is_object())
    type = it->contains("rope_type") ? &(*it)["rope_type"] : it->contains("type") ? &(*it)["type"] : nullptr;
  if (!arch.llama3_rope_scaling || type == nullptr || *type != "llama3")
    fail("{}: rope_scaling {} is not supported ({} takes {})", origin, json_excerpt(*it), arch.name,
         arch.llama3_rope_scaling ? "null or type \"llama3\"" : "none");
  RopeScaling r;
  const auto need = [&](const char* key) {
    if (!it->contains(key)) fail("{}: rope_scaling: missing required field \"{}\"", origin, key);
  };
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    need(key);
  r.factor = get_number(*it, "factor", 1.0, origin);
  r.low_freq_factor = get_number(*it, "low_freq_factor", 1.0, origin);
  r.high_freq_factor = get_number(*it, "high_freq_factor", 4.0, origin);
  r.original_max_position_embeddings = get_int(*it, "original_max_position_embeddings", origin);
  return r;
}

}  // namespace

const ArchitectureInfo& architecture_info(Architecture arch) {
  return kArchitectures[static_cast<size_t>(arch)];
}

const ArchitectureInfo* find_architecture(std::string_view name) {
  for (const ArchitectureInfo& a : kArchitectures)
    if (a.name == name) return &a;
  return nullptr;
}

std::string supported_architectures() {
  std::string s;
  for (const ArchitectureInfo& a : kArchitectures)
    s += fmt::format("{}'{}' ({})", s.empty() ? "" : ", ", a.name, a.family);
  return s;
}

ModelConfig ModelConfig::parse(std::string_view json_text, std::string_view origin) {
  const Json j = parse_json_object(json_text, origin);

  ModelConfig c;
  const auto type_it = j.find("model_type");
  if (type_it == j.end()) fail("{}: missing required field \"model_type\"", origin);
  const ArchitectureInfo* arch = type_it->is_string() ? find_architecture(type_it->get<std::string>()) : nullptr;
  if (arch == nullptr)
    fail("{}: unsupported model_type {} (nanoinfer supports {})", origin, json_excerpt(*type_it),
         supported_architectures());
  c.model_type = std::string(arch->name);
  c.architecture = arch->arch;

  // Features of these architectures that our forward pass does not implement: refusing them
  // here is better than generating plausible-looking garbage later.
  if (get_bool(j, "use_sliding_window", false, origin))
    fail("{}: use_sliding_window=true is not supported (nanoinfer attends over the full context)", origin);
  if (const auto it = j.find("hidden_act"); it != j.end() && *it != "silu")
    fail("{}: unsupported hidden_act {} ({} uses \"silu\")", origin, json_excerpt(*it), arch->name);
  if (get_bool(j, "attention_bias", arch->attention_bias, origin) != arch->attention_bias)
    fail("{}: attention_bias={} is not supported for {} (its q/k/v projections {})", origin, !arch->attention_bias,
         arch->name, arch->attention_bias ? "carry biases" : "carry no biases");
  if (get_bool(j, "mlp_bias", false, origin)) fail("{}: mlp_bias=true is not supported", origin);
  c.rope_scaling = parse_rope_scaling(j, *arch, origin);

  c.vocab_size = get_int(j, "vocab_size", origin);
  c.hidden_size = get_int(j, "hidden_size", origin);
  c.intermediate_size = get_int(j, "intermediate_size", origin);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", origin);
  c.num_attention_heads = get_int(j, "num_attention_heads", origin);
  // Hugging Face's default: no grouped-query attention when the field is absent.
  c.num_key_value_heads = get_int(j, "num_key_value_heads", origin, c.num_attention_heads);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", origin, 32768);
  c.rope_theta = get_number(j, "rope_theta", 10000.0, origin);
  c.rms_norm_eps = get_number(j, "rms_norm_eps", 1e-6, origin);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false, origin);
  if (const auto it = j.find("torch_dtype"); it != j.end() && it->is_string()) c.torch_dtype = it->get<std::string>();
  if (arch->head_dim_from_config) c.explicit_head_dim = get_int(j, "head_dim", origin, 0);

  check_hyperparameters(c, origin, kJsonNames);
  if (const auto it = j.find("head_dim"); !arch->head_dim_from_config && it != j.end() && !it->is_null() &&
                                          (!it->is_number_integer() || *it != c.head_dim()))
    fail("{}: head_dim {} differs from hidden_size / num_attention_heads = {}", origin, json_excerpt(*it),
         c.head_dim());
  return c;
}

void check_hyperparameters(const ModelConfig& c, std::string_view origin, const HyperParameterNames& names) {
  const auto label = [&](std::string_view key) {
    return names.gguf ? fmt::format("metadata '{}'", key) : fmt::format("field \"{}\"", key);
  };
  const auto dim = [&](int64_t v, std::string_view key, int64_t max) {
    if (v < 1 || v > max) fail("{}: {}: expected an integer in [1, {}], found {}", origin, label(key), max, v);
  };
  dim(c.vocab_size, names.vocab_size, kMaxVocabSize);
  dim(c.hidden_size, names.hidden_size, kMaxHiddenSize);
  dim(c.intermediate_size, names.intermediate_size, kMaxIntermediateSize);
  dim(c.num_hidden_layers, names.num_hidden_layers, kMaxLayers);
  dim(c.num_attention_heads, names.num_attention_heads, kMaxHeads);
  dim(c.num_key_value_heads, names.num_key_value_heads, kMaxHeads);
  dim(c.max_position_embeddings, names.max_position_embeddings, kMaxPositions);
  if (!(c.rope_theta > 0.0))
    fail("{}: {}: expected a positive number, found {}", origin, label(names.rope_theta), c.rope_theta);
  if (!(c.rope_theta >= kMinRopeTheta && c.rope_theta <= kMaxRopeTheta))
    fail("{}: {}: expected a number in [{}, {}], found {}", origin, label(names.rope_theta), kMinRopeTheta,
         kMaxRopeTheta, c.rope_theta);
  if (!(c.rms_norm_eps > 0.0))
    fail("{}: {}: expected a positive number, found {}", origin, label(names.rms_norm_eps), c.rms_norm_eps);
  // Real models use 1e-5 or 1e-6. Anything near 1 swamps the mean square it is added to (an
  // eps of 1e308 ran and printed garbage), so a value outside (0, 0.01] is a broken config.
  if (!(c.rms_norm_eps <= kMaxRmsNormEps))
    fail("{}: {}: expected a small positive number in (0, {}], found {}", origin, label(names.rms_norm_eps),
         kMaxRmsNormEps, c.rms_norm_eps);

  if (c.explicit_head_dim != 0) dim(c.explicit_head_dim, names.head_dim, kMaxHeadDim);
  if (c.explicit_head_dim == 0 && c.hidden_size % c.num_attention_heads != 0)
    fail("{}: {} {} is not divisible by {} {}", origin, names.hidden_size, c.hidden_size, names.num_attention_heads,
         c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: {} {} is not divisible by {} {}", origin, names.num_attention_heads, c.num_attention_heads,
         names.num_key_value_heads, c.num_key_value_heads);
  if (c.explicit_head_dim != 0 && c.explicit_head_dim % 2 != 0)
    fail("{}: {}: {} must be even for RoPE", origin, label(names.head_dim), c.explicit_head_dim);
  if (c.head_dim() % 2 != 0)
    fail("{}: head dim {} ({} {} / {} {}) must be even for RoPE", origin, c.head_dim(), names.hidden_size,
         c.hidden_size, names.num_attention_heads, c.num_attention_heads);
  if (c.head_dim() > kMaxHeadDim)
    fail("{}: head dim {} ({} {} / {} {}) exceeds {}", origin, c.head_dim(), names.hidden_size, c.hidden_size,
         names.num_attention_heads, c.num_attention_heads, kMaxHeadDim);
  if (const auto& r = c.rope_scaling) {
    // A factor of at least 1, 1 <= low < high (the blend divides by high - low), an original
    // context in the positions' range: Llama 3.1 and 3.2 use 8, 1, 4 and 8192.
    if (!(r->factor >= 1.0 && r->factor <= 1024.0) || !(r->low_freq_factor >= 1.0) ||
        !(r->high_freq_factor > r->low_freq_factor && r->high_freq_factor <= 1024.0) ||
        r->original_max_position_embeddings < 1 || r->original_max_position_embeddings > kMaxPositions)
      fail(
          "{}: rope scaling factor {}, low_freq_factor {}, high_freq_factor {}, original_max_position_embeddings {}: "
          "expected factor in [1, 1024], 1 <= low_freq_factor < high_freq_factor <= 1024, and a context in [1, {}]",
          origin, r->factor, r->low_freq_factor, r->high_freq_factor, r->original_max_position_embeddings,
          kMaxPositions);
  }
}

ModelConfig ModelConfig::load(const std::filesystem::path& config_json) {
  return parse(read_file(config_json, kMaxConfigFileBytes), config_json.string());
}

}  // namespace nanoinfer
