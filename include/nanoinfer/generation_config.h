// generation_config.json of a Hugging Face model directory, and how the sampling settings of
// a run are resolved from three layers: built-in defaults < generation_config.json < flags.
// Each resolved value remembers which layer it came from, so `--verbose` can say so.
//
// Built-in defaults are Hugging Face's GenerationConfig defaults (temperature 1, top-k 50,
// top-p 1, repetition penalty 1) plus min-p 0 (off). "do_sample": false in the file means
// greedy (temperature 0) unless a flag sets a temperature.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/sampler.h"

namespace nanoinfer {

struct GenerationConfig {
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": an int or a list (Qwen2.5 has two)

  // Parses JSON text; values out of range or of the wrong type throw Error naming `origin`
  // and the key. Unknown keys are ignored (the file carries many we do not use).
  static GenerationConfig parse(std::string_view json_text, std::string_view origin);
  // model_dir/generation_config.json; the file is optional (an empty config when absent).
  static GenerationConfig load_from_dir(const std::filesystem::path& model_dir);
};

enum class SettingSource { Default, GenerationConfig, Flag, Random };
std::string_view setting_source_name(SettingSource source);

template <class T>
struct Setting {
  T value{};
  SettingSource source = SettingSource::Default;
};

// Values given on the command line; unset ones fall through to the file, then the defaults.
struct SamplingOverrides {
  std::optional<double> temperature;
  std::optional<int64_t> top_k;
  std::optional<double> top_p;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<uint64_t> seed;  // absent: a random seed, reported so the run can be repeated
};

struct SamplingSettings {
  Setting<double> temperature{1.0};
  Setting<int64_t> top_k{50};
  Setting<double> top_p{1.0};
  Setting<double> min_p{0.0};
  Setting<double> repetition_penalty{1.0};
  Setting<uint64_t> seed{0};

  SamplerParams params() const;
  // One line per value: "temperature = 0.7 (generation_config.json)".
  std::string describe() const;
};

// Layers the overrides over the file over the defaults and validates the result (an invalid
// flag value throws naming the flag's setting).
SamplingSettings resolve_sampling(const GenerationConfig& file, const SamplingOverrides& flags);

}  // namespace nanoinfer
