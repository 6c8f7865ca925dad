#include "nanoinfer/json_limits.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <vector>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

// The problem of text nested deeper than max_depth, or "" when it is not.
std::string depth_problem(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char c = *p++;
    if (c == '"') {
      // Skip the string: to the next quote not escaped by a backslash (an unterminated
      // string ends the scan; the parser reports it).
      while (p < end && *p != '"') p += *p == '\\' ? 2 : 1;
      ++p;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return fmt::format("JSON nested deeper than {} levels (at byte {})", max_depth, p - 1 - text.data());
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return {};
}

template <class Json>
bool try_parse(std::string_view text, Json& out, std::string& problem) {
  problem = depth_problem(text, kMaxJsonDepth);
  if (!problem.empty()) return false;
  try {
    out = Json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    problem = "not valid JSON: " + excerpt(e.what(), 200);
    return false;
  }
  return true;
}

template <class Json>
Json parse_or_fail(std::string_view text, std::string_view origin) {
  Json out;
  std::string problem;
  if (!try_parse(text, out, problem)) fail("{}: {}", origin, problem);
  return out;
}

}  // namespace

void check_json_depth(std::string_view text, std::string_view origin, size_t max_depth) {
  const std::string problem = depth_problem(text, max_depth);
  if (!problem.empty()) fail("{}: {}", origin, problem);
}

bool try_parse_json(std::string_view text, nlohmann::json& out, std::string& problem) {
  return try_parse(text, out, problem);
}

bool try_parse_json(std::string_view text, nlohmann::ordered_json& out, std::string& problem) {
  return try_parse(text, out, problem);
}

nlohmann::json parse_json(std::string_view text, std::string_view origin) {
  return parse_or_fail<nlohmann::json>(text, origin);
}

nlohmann::ordered_json parse_ordered_json(std::string_view text, std::string_view origin) {
  return parse_or_fail<nlohmann::ordered_json>(text, origin);
}

uint64_t ordered_parse_cost(std::string_view text) {
  std::vector<uint64_t> members;  // per open array or object: its members so far (0: empty yet)
  std::vector<char> is_object;
  uint64_t steps = 0;
  bool value_seen = false;  // something since the last '[', '{' or ','
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) i += text[i] == '\\';
      value_seen = true;
    } else if (c == '[' || c == '{') {
      members.push_back(0);
      is_object.push_back(c == '{');
      value_seen = false;
    } else if (c == ',') {
      if (!members.empty()) ++members.back();
      value_seen = false;
    } else if (c == ']' || c == '}') {
      if (members.empty()) break;  // malformed: the parser says so
      const uint64_t m = members.back() + (value_seen ? 1 : 0);
      if (is_object.back()) steps += m * m / 2;
      members.pop_back();
      is_object.pop_back();
      value_seen = true;
    } else if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != ':') {
      value_seen = true;
    }
  }
  return steps;
}

std::string excerpt(std::string_view text, size_t max_bytes) {
  size_t cut = text.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    // Back up over continuation bytes so a multi-byte character is never split.
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string out = escape_control(text.substr(0, cut));
  if (cut < text.size()) out += fmt::format("... ({} bytes)", text.size());
  return out;
}

std::string escape_control(std::string_view text, std::string_view also_escape) {
  std::string out;
  out.reserve(text.size() + 24);
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (also_escape.find(c) != std::string_view::npos) {
      out += '\\';
      out += c;
    } else if (b < 0x20 || b == 0x7F) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace nanoinfer
