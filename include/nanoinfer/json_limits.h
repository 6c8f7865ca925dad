// Limits on JSON that comes from files a user hands us (config.json, generation_config.json,
// tokenizer.json, safetensors headers, --jsonl lines), shared by every parser we use.
//
// Depth: nlohmann's parser is iterative, but dump() and the destruction of a parsed value
// recurse once per level, so an array nested 100,000 deep overflows the stack. No real
// file nests more than a handful of levels; 64 leaves room and keeps every recursion shallow.
// The check is a scan of the bytes before any parser sees them, so it holds for any parser.
//
// Excerpts: an error message quotes at most a short prefix of a value taken from the input,
// so a hostile 100 MB string or a deeply nested value never becomes a 100 MB "one line".
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nanoinfer {

inline constexpr size_t kMaxJsonDepth = 64;

// Throws nanoinfer::Error "{origin}: JSON nested deeper than {max_depth} levels (at byte N)"
// when arrays and objects nest deeper than max_depth. Brackets inside strings do not count;
// malformed JSON is otherwise left to the parser to report.
void check_json_depth(std::string_view json_text, std::string_view origin, size_t max_depth = kMaxJsonDepth);

// What nlohmann::ordered_json::parse costs beyond reading the bytes: each new member of an
// object is compared with those before it, so an object of m members costs m^2 / 2 comparisons
// (a schema of 100,000 properties took 7 s, ~1.5 ns a comparison). The sum over the text's
// objects, counted by a linear scan (strings skipped), so that a caller can refuse the text
// before parsing it.
uint64_t ordered_parse_cost(std::string_view json_text);

// The one parser for JSON text the program reads (files, their lines, strings inside them) into
// nlohmann values: the depth check above first, then the parser. On failure `problem` is set to
// "JSON nested deeper than 64 levels (at byte N)" or "not valid JSON: <the parser's words, cut
// short>", `out` is left unchanged, and false is returned. (simdjson, which the tokenizer reads
// with, is given the same depth limit as its own.)
bool try_parse_json(std::string_view json_text, nlohmann::json& out, std::string& problem);
bool try_parse_json(std::string_view json_text, nlohmann::ordered_json& out, std::string& problem);
// The same, throwing nanoinfer::Error "{origin}: {problem}".
nlohmann::json parse_json(std::string_view json_text, std::string_view origin);
nlohmann::ordered_json parse_ordered_json(std::string_view json_text, std::string_view origin);

// `text` for quoting in a one-line message: at most max_bytes of it, cut on a UTF-8 character
// boundary, with control characters escaped (\n, \t, \xNN); when cut, "... (N bytes)" follows.
std::string excerpt(std::string_view text, size_t max_bytes = 60);

// `text` on one line: \n, \r and \t escaped, other control bytes (and DEL) as \xNN, each
// character of `also_escape` preceded by a backslash; every other byte as it is.
std::string escape_control(std::string_view text, std::string_view also_escape = {});

}  // namespace nanoinfer
