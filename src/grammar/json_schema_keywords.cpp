// The schema algebra of json_schema_to_gbnf (src/grammar/json_schema_keywords.h).
#include "grammar/json_schema_keywords.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "nanoinfer/error.h"

namespace nanoinfer::json_schema {

namespace {
const std::set<std::string> kKeywords = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "items",
                                         "prefixItems",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref",
                                         "$defs",
                                         "definitions",
                                         "minItems",
                                         "maxItems",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum"};
}  // namespace

const std::set<std::string> kAnnotations = {"title", "description", "default",    "examples", "$schema",
                                            "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};
const std::set<std::string> kTypes = {"null", "boolean", "object", "array", "number", "integer", "string"};

bool type_matches(const json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() ||
           (v.is_number_float() && std::isfinite(v.get<double>()) && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

std::set<std::string> cover(const std::string& t) {
  if (t == "number") return {"number", "integer"};
  if (t == "integer") return {"integer"};
  return {t};
}

[[noreturn]] void unsupported(const std::string& what, const std::string& where) {
  fail("JSON Schema: {} at {} is not supported", what, where);
}

void check_keywords(const json& s, const std::string& where) {
  for (const auto& item : s.items()) {
    const std::string& k = item.key();
    if (!kKeywords.count(k) && !kAnnotations.count(k)) unsupported(fmt::format("the keyword '{}'", k), where);
  }
}

std::vector<std::string> types_of(const json& s, const std::string& where) {
  std::vector<std::string> types;
  const json& t = s.at("type");
  if (t.is_string()) {
    types.push_back(t.get<std::string>());
  } else if (t.is_array()) {
    for (const json& x : t) {
      if (!x.is_string()) fail("JSON Schema: 'type' at {} must be a string or an array of strings", where);
      types.push_back(x.get<std::string>());
    }
  } else {
    fail("JSON Schema: 'type' at {} must be a string or an array of strings", where);
  }
  for (const std::string& x : types) {
    if (!kTypes.count(x)) fail("JSON Schema: unknown type '{}' at {}", x, where);
  }
  if (types.empty()) fail("JSON Schema: 'type' at {} is an empty list", where);
  return types;
}

json merge(const json& a, const json& b, const std::string& where) {
  if (a.is_boolean()) {
    if (!a.get<bool>()) fail("JSON Schema: allOf at {} includes the false schema", where);
    return b;
  }
  if (b.is_boolean()) {
    if (!b.get<bool>()) fail("JSON Schema: allOf at {} includes the false schema", where);
    return a;
  }
  if (!a.is_object() || !b.is_object()) fail("JSON Schema: the schemas at {} must be objects", where);
  for (const auto* x : {&a, &b}) {
    const json& other = x == &a ? b : a;
    if (x->contains("additionalProperties") && other.contains("properties")) {
      for (const auto& item : other.at("properties").items()) {
        if (!x->contains("properties") || !x->at("properties").contains(item.key())) {
          unsupported("allOf combining 'additionalProperties' with properties of another branch", where);
        }
      }
    }
  }
  json out = a;
  for (const auto& [k, v] : b.items()) {
    if (kAnnotations.count(k)) continue;
    if (!out.contains(k)) {
      out[k] = v;
    } else if (k == "properties") {
      for (const auto& [name, ps] : v.items()) {
        json& slot = out[k][name];
        if (slot.is_null()) {
          slot = ps;
        } else if (slot != ps) {
          slot = json{{"allOf", json::array({slot, ps})}};
        }
      }
    } else if (k == "required") {
      for (const json& r : v) {
        if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
      }
    } else if (k == "type") {
      std::vector<std::string> ta = types_of(out, where), tb = types_of(b, where), both;
      for (const std::string& t : ta) {
        for (const std::string& u : tb) {
          if (t == u || (t == "number" && u == "integer"))
            both.push_back(u);
          else if (t == "integer" && u == "number")
            both.push_back(t);
        }
      }
      if (both.empty()) fail("JSON Schema: allOf at {}: the types do not intersect", where);
      out[k] = both;
    } else if (k == "minLength" || k == "minItems" || k == "minimum" || k == "exclusiveMinimum") {
      out[k] = std::max(out[k].get<double>(), v.get<double>());
    } else if (k == "maxLength" || k == "maxItems" || k == "maximum" || k == "exclusiveMaximum") {
      out[k] = std::min(out[k].get<double>(), v.get<double>());
    } else if (out[k] != v) {
      unsupported(fmt::format("allOf with different '{}' in its branches", k), where);
    }
  }
  return out;
}

json without(json s, std::initializer_list<const char*> keys) {
  for (const char* k : keys) s.erase(k);
  for (const std::string& k : kAnnotations) s.erase(k);
  return s;
}

void check_exclusive(const std::vector<json>& branches, const std::string& where) {
  // Distinct types.
  std::vector<std::set<std::string>> covers;
  bool typed = true;
  for (const json& b : branches) {
    std::set<std::string> c;
    if (!b.is_object()) {
      typed = false;
      break;
    }
    if (b.contains("const")) {
      for (const std::string& t : kTypes)
        if (type_matches(b.at("const"), t)) c.insert(t);
    } else if (b.contains("type")) {
      for (const std::string& t : types_of(b, where))
        for (const std::string& u : cover(t)) c.insert(u);
    } else {
      typed = false;
      break;
    }
    covers.push_back(c);
  }
  // No element in two of the sets: their sizes add up to their union's (linear in the sizes,
  // where comparing every pair of branches would be quadratic in a long oneOf).
  const auto disjoint = [](const auto& sets) {
    std::set<std::string> all;
    size_t total = 0;
    for (const auto& set : sets) {
      total += set.size();
      all.insert(set.begin(), set.end());
    }
    return all.size() == total;
  };
  if (typed && disjoint(covers)) return;
  // Constants.
  std::vector<std::set<std::string>> values;
  bool constant = true;
  for (const json& b : branches) {
    std::set<std::string> v;
    if (b.is_object() && b.contains("const"))
      v.insert(b.at("const").dump());
    else if (b.is_object() && b.contains("enum") && b.at("enum").is_array())
      for (const json& x : b.at("enum")) v.insert(x.dump());
    else
      constant = false;
    values.push_back(v);
  }
  if (constant && disjoint(values)) return;
  // A required property with a distinct constant in each branch (a discriminator).
  if (branches[0].is_object() && branches[0].contains("properties") && branches[0].at("properties").is_object()) {
    for (const auto& item : branches[0].at("properties").items()) {
      const std::string& name = item.key();
      std::vector<std::set<std::string>> tags;
      bool ok = true;
      for (const json& b : branches) {
        const bool required =
            b.is_object() && b.contains("required") && b.at("required").is_array() &&
            std::find(b.at("required").begin(), b.at("required").end(), name) != b.at("required").end();
        if (!required || !b.contains("properties") || !b.at("properties").contains(name) ||
            !b.at("properties").at(name).is_object() || !b.at("properties").at(name).contains("const")) {
          ok = false;
          break;
        }
        tags.push_back({b.at("properties").at(name).at("const").dump()});
      }
      if (ok && disjoint(tags)) return;
    }
  }
  unsupported(
      "'oneOf' whose branches are not provably exclusive (distinct types, distinct constants, or a "
      "required property with a distinct 'const' in each branch)",
      where);
}

std::optional<int64_t> count_keyword(const json& s, const char* key, const std::string& where) {
  if (!s.contains(key)) return std::nullopt;
  const json& v = s.at(key);
  if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
    fail("JSON Schema: '{}' at {} must be a non-negative integer", key, where);
  }
  if (v.get<double>() > kMaxCount) unsupported(fmt::format("'{}' over {}", key, kMaxCount), where);
  return static_cast<int64_t>(v.get<double>());
}

}  // namespace nanoinfer::json_schema
