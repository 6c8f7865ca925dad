#include "nanoinfer/config.h"

#include <nlohmann/json.hpp>
#include <optional>

#include "base/json_object.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

namespace {

using Json = nlohmann::json;

// Dimensions above this are not a real model and would let products of two of them (e.g.
// vocab x hidden) approach 64-bit overflow in size computations downstream.
constexpr int64_t kMaxDim = int64_t{1} << 24;

constexpr double kMaxRmsNormEps = 1e-2;

int64_t get_dim(const Json& j, const char* key, std::string_view origin,
                std::optional<int64_t> fallback = std::nullopt) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    fail("{}: missing required field \"{}\"", origin, key);
  }
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > kMaxDim)
    fail("{}: field \"{}\": expected an integer in [1, {}], found {}", origin, key, kMaxDim,
         json_excerpt(*it));
  return it->get<int64_t>();
}

double get_positive(const Json& j, const char* key, double fallback, std::string_view origin) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number() || !(it->get<double>() > 0.0))
    fail("{}: field \"{}\": expected a positive number, found {}", origin, key, json_excerpt(*it));
  return it->get<double>();
}

bool get_bool(const Json& j, const char* key, bool fallback, std::string_view origin) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    fail("{}: field \"{}\": expected true or false, found {}", origin, key, json_excerpt(*it));
  return it->get<bool>();
}

}  // namespace

ModelConfig ModelConfig::parse(std::string_view json_text, std::string_view origin) {
  const Json j = parse_json_object(json_text, origin);

  ModelConfig c;
  const auto type_it = j.find("model_type");
  if (type_it == j.end()) fail("{}: missing required field \"model_type\"", origin);
  if (!type_it->is_string() || *type_it != "qwen2")
    fail("{}: unsupported model_type {} (nanoinfer supports \"qwen2\": the Qwen2 / Qwen2.5 family)",
         origin, json_excerpt(*type_it));
  c.model_type = type_it->get<std::string>();

  // Features of the Qwen2 architecture that our forward pass does not implement: refusing them
  // here is better than generating plausible-looking garbage later.
  if (get_bool(j, "use_sliding_window", false, origin))
    fail("{}: use_sliding_window=true is not supported (nanoinfer attends over the full context)",
         origin);
  if (const auto it = j.find("hidden_act"); it != j.end() && *it != "silu")
    fail("{}: unsupported hidden_act {} (Qwen2 uses \"silu\")", origin, json_excerpt(*it));
  if (const auto it = j.find("rope_scaling"); it != j.end() && !it->is_null())
    fail("{}: rope_scaling {} is not supported", origin, json_excerpt(*it));

  c.vocab_size = get_dim(j, "vocab_size", origin);
  c.hidden_size = get_dim(j, "hidden_size", origin);
  c.intermediate_size = get_dim(j, "intermediate_size", origin);
  c.num_hidden_layers = get_dim(j, "num_hidden_layers", origin);
  c.num_attention_heads = get_dim(j, "num_attention_heads", origin);
  // Hugging Face's default: no grouped-query attention when the field is absent.
  c.num_key_value_heads = get_dim(j, "num_key_value_heads", origin, c.num_attention_heads);
  c.max_position_embeddings = get_dim(j, "max_position_embeddings", origin, 32768);
  c.rope_theta = get_positive(j, "rope_theta", 10000.0, origin);
  c.rms_norm_eps = get_positive(j, "rms_norm_eps", 1e-6, origin);
  // Real models use 1e-5 or 1e-6. Anything near 1 swamps the mean square it is added to (an
  // eps of 1e308 ran and printed garbage), so a value outside (0, 0.01] is a broken config.
  if (c.rms_norm_eps > kMaxRmsNormEps)
    fail("{}: field \"rms_norm_eps\": expected a small positive number in (0, {}], found {}",
         origin, kMaxRmsNormEps, c.rms_norm_eps);
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", false, origin);
  if (const auto it = j.find("torch_dtype"); it != j.end() && it->is_string())
    c.torch_dtype = it->get<std::string>();

  if (c.hidden_size % c.num_attention_heads != 0)
    fail("{}: hidden_size {} is not divisible by num_attention_heads {}", origin, c.hidden_size,
         c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail("{}: num_attention_heads {} is not divisible by num_key_value_heads {}", origin,
         c.num_attention_heads, c.num_key_value_heads);
  if (c.head_dim() % 2 != 0)
    fail("{}: head dim {} (hidden_size {} / num_attention_heads {}) must be even for RoPE", origin,
         c.head_dim(), c.hidden_size, c.num_attention_heads);
  if (const auto it = j.find("head_dim");
      it != j.end() && !it->is_null() && (!it->is_number_integer() || *it != c.head_dim()))
    fail("{}: head_dim {} differs from hidden_size / num_attention_heads = {}", origin,
         json_excerpt(*it), c.head_dim());
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& config_json) {
  return parse(read_file(config_json, kMaxConfigFileBytes), config_json.string());
}

}  // namespace nanoinfer
