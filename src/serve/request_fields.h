// The fields of a request body, checked before they are read: each top-level field is one that
// OpenAI's reference (or a listed extension) names for the endpoint, and is honoured, accepted
// and ignored (type-checked; docs/SERVING.md says why ignoring it is safe), or refused by name
// because it would change the output and is not implemented. Any other name is a 400
// "Unrecognized request argument supplied: NAME", as OpenAI answers. Also the small JSON
// helpers the request parser (api.cpp) shares.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "serve/api.h"

namespace nanoinfer::serve {

// Unknown, ignored-but-malformed and unimplemented top-level fields are 400s naming them.
void check_request_fields(const nlohmann::json& body, Endpoint endpoint);
// The same for the keys of messages[index] (an object).
void check_message_fields(const nlohmann::json& message, size_t index);

// A field that is absent or null is unset.
const nlohmann::json* field(const nlohmann::json& body, const char* name);
const char* json_type_name(const nlohmann::json& v);
[[noreturn]] void wrong_type(std::string_view field, std::string_view expected, const nlohmann::json& v);
[[noreturn]] void unsupported_field(std::string_view field, std::string_view why);

}  // namespace nanoinfer::serve
