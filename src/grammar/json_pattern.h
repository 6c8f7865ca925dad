// Text pieces of JSON Schema -> GBNF (src/grammar/json_pattern.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace nanoinfer {

// A GBNF literal matching exactly `bytes`; a GBNF class of code-point ranges.
std::string gbnf_literal(std::string_view bytes);
std::string gbnf_class(const std::vector<CodeRange>& ranges);
// A JSON Schema `pattern` (the documented ECMAScript subset) as GBNF matching the inside of a
// JSON string (escaped as JSON) whose decoded text the pattern matches. Throws Error naming
// the construct it does not support.
std::string pattern_to_gbnf(std::string_view pattern, const std::string& where);
// Decimal digit strings of equal length: every number from lo to hi; every number in [a, b]
// (0 <= a <= b) without leading zeros.
std::string same_length(const std::string& lo, const std::string& hi);
std::string non_negative(int64_t a, int64_t b);

}  // namespace nanoinfer
