#include "nanoinfer/generation_config.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "base/json_object.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer {

namespace {

using Json = nlohmann::json;

const Json* find(const Json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> get_number(const Json& j, const char* key, std::string_view origin) {
  const Json* v = find(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail("{}: field \"{}\": expected a number, found {}", origin, key, json_excerpt(*v));
  return v->get<double>();
}

std::optional<int64_t> get_int(const Json& j, const char* key, std::string_view origin) {
  const Json* v = find(j, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer()) fail("{}: field \"{}\": expected an integer, found {}", origin, key, json_excerpt(*v));
  return v->get<int64_t>();
}

int32_t token_id(const Json& v, std::string_view origin) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > std::numeric_limits<int32_t>::max())
    fail("{}: field \"eos_token_id\": expected a token id (a non-negative integer), found {}", origin, json_excerpt(v));
  return static_cast<int32_t>(v.get<int64_t>());
}

}  // namespace

GenerationConfig GenerationConfig::parse(std::string_view json_text, std::string_view origin) {
  const Json j = parse_json_object(json_text, origin);

  GenerationConfig c;
  if (const Json* v = find(j, "do_sample")) {
    if (!v->is_boolean()) fail("{}: field \"do_sample\": expected true or false, found {}", origin, json_excerpt(*v));
    c.do_sample = v->get<bool>();
  }
  c.temperature = get_number(j, "temperature", origin);
  c.top_k = get_int(j, "top_k", origin);
  c.top_p = get_number(j, "top_p", origin);
  c.min_p = get_number(j, "min_p", origin);
  c.repetition_penalty = get_number(j, "repetition_penalty", origin);
  if (const Json* v = find(j, "eos_token_id")) {
    if (v->is_array()) {
      for (const Json& id : *v) c.eos_token_ids.push_back(token_id(id, origin));
    } else {
      c.eos_token_ids.push_back(token_id(*v, origin));
    }
  }

  // Range checks with the file named, so a bad file is not reported as a bad flag.
  SamplerParams p;
  p.temperature = c.temperature.value_or(1.0);
  p.top_k = c.top_k.value_or(0);
  p.top_p = c.top_p.value_or(1.0);
  p.min_p = c.min_p.value_or(0.0);
  p.repetition_penalty = c.repetition_penalty.value_or(1.0);
  try {
    validate(p);
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
  return c;
}

GenerationConfig GenerationConfig::load_from_dir(const std::filesystem::path& model_dir) {
  const std::filesystem::path path = model_dir / "generation_config.json";
  // Absent is fine (Hugging Face defaults); present but unreadable is an error, not "absent":
  // silently losing the model's eos ids and sampling defaults would change what it generates.
  if (!path_exists(path)) return {};
  return parse(read_file(path, kMaxConfigFileBytes), path.string());
}

std::string_view setting_source_name(SettingSource source) {
  switch (source) {
    case SettingSource::Default:
      return "default";
    case SettingSource::GenerationConfig:
      return "generation_config.json";
    case SettingSource::Flag:
      return "flag";
    case SettingSource::Random:
      return "random";
  }
  return "?";
}

template <class T>
static void layer(Setting<T>& s, const std::optional<T>& file, const std::optional<T>& flag) {
  if (file) s = {*file, SettingSource::GenerationConfig};
  if (flag) s = {*flag, SettingSource::Flag};
}

SamplingSettings resolve_sampling(const GenerationConfig& file, const SamplingOverrides& flags) {
  SamplingSettings s;
  std::optional<double> file_temperature = file.temperature;
  // do_sample=false is Hugging Face's greedy switch: it wins over the file's temperature
  // (which then only documents what sampling would use) but not over a --temp flag.
  if (file.do_sample == false) file_temperature = 0.0;
  layer(s.temperature, file_temperature, flags.temperature);
  layer(s.top_k, file.top_k, flags.top_k);
  layer(s.top_p, file.top_p, flags.top_p);
  layer(s.min_p, file.min_p, flags.min_p);
  layer(s.repetition_penalty, file.repetition_penalty, flags.repetition_penalty);
  if (flags.seed) {
    s.seed = {*flags.seed, SettingSource::Flag};
  } else {
    std::random_device device;
    s.seed = {(uint64_t{device()} << 32) | device(), SettingSource::Random};
  }
  validate(s.params());
  return s;
}

SamplerParams SamplingSettings::params() const {
  return {.temperature = temperature.value,
          .top_k = top_k.value,
          .top_p = top_p.value,
          .min_p = min_p.value,
          .repetition_penalty = repetition_penalty.value,
          .seed = seed.value};
}

std::string SamplingSettings::describe() const {
  std::string out;
  auto line = [&out](std::string_view name, const auto& setting) {
    out += fmt::format("{:<19}= {} ({})\n", name, setting.value, setting_source_name(setting.source));
  };
  line("temperature", temperature);
  line("top_k", top_k);
  line("top_p", top_p);
  line("min_p", min_p);
  line("repetition_penalty", repetition_penalty);
  line("seed", seed);
  return out;
}

}  // namespace nanoinfer
