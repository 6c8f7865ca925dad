// The schema algebra behind json_schema_to_gbnf (src/grammar/json_schema.cpp): which keywords
// are known, what types a schema admits, allOf merged into one schema where that is exact,
// oneOf proven exclusive (so that it can be generated as anyOf), and the count keywords'
// checks. Every refusal is an Error naming the keyword and where in the schema it stands.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace nanoinfer::json_schema {

// ordered: properties are generated in the order the schema lists them.
using json = nlohmann::ordered_json;

inline constexpr int64_t kMaxCount = 10000;  // lengths and item counts

// Keywords that only annotate (dropped), and the JSON types by name.
extern const std::set<std::string> kAnnotations;
extern const std::set<std::string> kTypes;

// Whether the value v is of JSON Schema type t ("integer": a number with no fraction).
bool type_matches(const json& v, const std::string& t);
// The JSON types a value of `t` can have; "number" covers integers.
std::set<std::string> cover(const std::string& t);

[[noreturn]] void unsupported(const std::string& what, const std::string& where);
// Refuses any keyword that is neither enforced nor an annotation.
void check_keywords(const json& s, const std::string& where);
// The schema's "type" as a list (a string or an array of known type names).
std::vector<std::string> types_of(const json& s, const std::string& where);
// allOf of two schemas as one, for the cases where that is exact (refused otherwise).
json merge(const json& a, const json& b, const std::string& where);
// The schema without `keys` and without annotations.
json without(json s, std::initializer_list<const char*> keys);
// oneOf is generated as anyOf: refused unless no value can match two branches (distinct types,
// distinct constants, or a required property with a distinct 'const' in each branch).
void check_exclusive(const std::vector<json>& branches, const std::string& where);
// A count keyword (minItems, maxLength, ...): nullopt when absent, else a non-negative integer
// up to kMaxCount.
std::optional<int64_t> count_keyword(const json& s, const char* key, const std::string& where);

}  // namespace nanoinfer::json_schema
