// Parsing a small JSON configuration file (config.json, generation_config.json) into an
// object, with the one-line errors every config reader gives for malformed input.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

inline nlohmann::json parse_json_object(std::string_view json_text, std::string_view origin) {
  nlohmann::json j = parse_json(json_text, origin);
  if (!j.is_object()) fail("{}: expected a JSON object, found {}", origin, j.type_name());
  return j;
}

// A parsed value as JSON text for an error message, cut to a short prefix (see excerpt()).
template <class Json>
std::string json_excerpt(const Json& value) {
  return excerpt(value.dump(-1, ' ', false, Json::error_handler_t::replace));
}

}  // namespace nanoinfer
