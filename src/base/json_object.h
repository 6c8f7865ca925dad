// Parsing a small JSON configuration file (config.json, generation_config.json) into an
// object, with the one-line errors every config reader gives for malformed input.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "nanoinfer/error.h"

namespace nanoinfer {

inline nlohmann::json parse_json_object(std::string_view json_text, std::string_view origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", origin, e.what());
  }
  if (!j.is_object()) fail("{}: expected a JSON object, found {}", origin, j.type_name());
  return j;
}

}  // namespace nanoinfer
