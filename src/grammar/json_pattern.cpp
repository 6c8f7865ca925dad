// The text pieces of JSON Schema -> GBNF (grammar/json_pattern.h): literals, classes, one
// JSON-encoded character of a set, the regex subset of `pattern`, integer ranges.
#include "grammar/json_pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

std::string code_point(uint32_t cp) {
  return cp < 0x10000 ? fmt::format("\\u{:04X}", cp) : fmt::format("\\U{:08X}", cp);
}

}  // namespace

// A GBNF literal matching exactly `bytes`.
std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"') {
      out += "\\\"";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string gbnf_class(const std::vector<CodeRange>& ranges) {
  std::string out = "[";
  for (CodeRange r : ranges) {
    out += code_point(r.lo);
    if (r.hi > r.lo) out += "-" + code_point(r.hi);
  }
  return out + "]";
}

namespace {

bool contains(const std::vector<CodeRange>& set, uint32_t cp) {
  return std::any_of(set.begin(), set.end(), [&](CodeRange r) { return r.lo <= cp && cp <= r.hi; });
}

std::vector<CodeRange> subtract(const std::vector<CodeRange>& a, const std::vector<CodeRange>& b) {
  // a AND NOT b = NOT (NOT a OR b)
  std::vector<CodeRange> u = complement(a);
  u.insert(u.end(), b.begin(), b.end());
  return complement(u);
}

// One character of the decoded string from `set`, as it is written inside a JSON string.
std::string json_chars(const std::vector<CodeRange>& set_in, const std::string& where) {
  const std::vector<CodeRange> set = normalize_ranges(set_in);
  std::vector<std::string> alts;
  const std::vector<CodeRange> plain = subtract(set, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0xD800, 0xDFFF}});
  if (!plain.empty()) alts.push_back(gbnf_class(plain));
  if (contains(set, '"')) alts.push_back(gbnf_literal("\\\""));
  if (contains(set, '\\')) alts.push_back(gbnf_literal("\\\\"));
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!contains(set, c)) continue;
    switch (c) {
      case '\n':
        alts.push_back(gbnf_literal("\\n"));
        break;
      case '\r':
        alts.push_back(gbnf_literal("\\r"));
        break;
      case '\t':
        alts.push_back(gbnf_literal("\\t"));
        break;
      case '\b':
        alts.push_back(gbnf_literal("\\b"));
        break;
      case '\f':
        alts.push_back(gbnf_literal("\\f"));
        break;
      default:
        alts.push_back(gbnf_literal(fmt::format("\\u{:04x}", c)));
    }
  }
  if (alts.empty()) fail("JSON Schema: 'pattern' at {}: a character class that matches nothing", where);
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// ---- the documented regex subset (ECMAScript with the u flag, as ajv compiles it) ----------------

const std::vector<CodeRange> kDigit = {{'0', '9'}};
const std::vector<CodeRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const std::vector<CodeRange> kSpace = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680},
                                       {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                                       {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const std::vector<CodeRange> kDot = complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}});

class Regex {
 public:
  Regex(std::string_view pattern, std::string where) : p_(pattern), where_(std::move(where)) {}

  std::string translate() {
    std::string out = alternation(0);
    if (i_ != p_.size()) error(fmt::format("unbalanced ')' at offset {}", i_));
    return out;
  }

 private:
  std::string_view p_;
  size_t i_ = 0;
  std::string where_;

  [[noreturn]] void error(const std::string& what) const {
    fail("JSON Schema: 'pattern' at {} is outside the supported regex subset: {}", where_, what);
  }

  std::string alternation(int depth) {
    std::vector<std::string> parts{concat(depth)};
    while (i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      parts.push_back(concat(depth));
    }
    if (parts.size() == 1) return parts[0];
    std::string out = "(";
    for (size_t k = 0; k < parts.size(); ++k) out += (k ? " | " : "") + parts[k];
    return out + ")";
  }

  std::string concat(int depth) {
    std::string out;
    bool start_anchor = false, end_anchor = false;
    if (depth == 0 && i_ < p_.size() && p_[i_] == '^') {
      start_anchor = true;
      ++i_;
    }
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (depth == 0 && p_[i_] == '$' && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) {
        end_anchor = true;
        ++i_;
        break;
      }
      std::string item = atom(depth);
      item = quantified(item);
      out += (out.empty() ? "" : " ") + item;
    }
    if (depth == 0) {
      // A JSON Schema pattern matches anywhere in the string unless anchored.
      if (!start_anchor) out = "char* " + out;
      if (!end_anchor) out += " char*";
      out = "(" + out + ")";
    }
    return out;
  }

  std::string quantified(std::string item) {
    if (i_ >= p_.size()) return item;
    const char c = p_[i_];
    std::string q;
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      const size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) error("'{' without '}'");
      const std::string body(p_.substr(i_ + 1, close - i_ - 1));
      const size_t comma = body.find(',');
      const auto num = [&](const std::string& s) -> int64_t {
        if (s.empty() || s.size() > 5 ||
            !std::all_of(s.begin(), s.end(), [](char d) { return d >= '0' && d <= '9'; })) {
          error(fmt::format("bad repetition '{{{}}}'", body));
        }
        return std::stoll(s);
      };
      if (comma == std::string::npos) {
        q = fmt::format("{{{}}}", num(body));
      } else if (comma + 1 == body.size()) {
        q = fmt::format("{{{},}}", num(body.substr(0, comma)));
      } else {
        const int64_t lo = num(body.substr(0, comma)), hi = num(body.substr(comma + 1));
        if (hi < lo) error(fmt::format("repetition '{{{}}}' has max < min", body));
        q = fmt::format("{{{},{}}}", lo, hi);
      }
      i_ = close + 1;
    } else {
      return item;
    }
    if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: the same language
    return "(" + item + ")" + q;
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) error("bad hex escape");
      const char c = p_[i_++];
      v = v * 16 +
          static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
    }
    return v;
  }

  // An escape after '\': a set (\d, \w, \s and negations) or one code point.
  std::vector<CodeRange> escape(bool in_class) {
    if (i_ >= p_.size()) error("'\\' at the end");
    const char e = p_[i_++];
    switch (e) {
      case 'd':
        return kDigit;
      case 'D':
        return complement(kDigit);
      case 'w':
        return kWord;
      case 'W':
        return complement(kWord);
      case 's':
        return kSpace;
      case 'S':
        return complement(kSpace);
      case 'n':
        return {{'\n', '\n'}};
      case 'r':
        return {{'\r', '\r'}};
      case 't':
        return {{'\t', '\t'}};
      case 'f':
        return {{'\f', '\f'}};
      case 'v':
        return {{'\v', '\v'}};
      case '0':
        return {{0, 0}};
      case 'x': {
        const uint32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        if (i_ < p_.size() && p_[i_] == '{') error("\\u{...} escapes");
        const uint32_t v = hex(4);
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{8, 8}};
        error("word boundaries (\\b)");
      default:
        if ((e >= '1' && e <= '9') || e == 'B' || e == 'k' || e == 'p' || e == 'P' || e == 'c') {
          error(fmt::format("the escape '\\{}'", e));
        }
        if (std::isalnum(static_cast<unsigned char>(e))) error(fmt::format("the escape '\\{}'", e));
        return {{static_cast<unsigned char>(e), static_cast<unsigned char>(e)}};
    }
  }

  uint32_t literal_char() {
    size_t len = 0;
    const uint32_t cp = decode_utf8(p_.substr(i_), len);
    if (len == 0) error("invalid UTF-8");
    i_ += len;
    return cp;
  }

  std::string atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (i_ < p_.size() && p_[i_] == '?') {
        error("lookarounds and named groups");
      }
      // Groups recurse here: bounded, well inside the GBNF parser's own limit on the groups
      // of the text this becomes.
      if (depth >= 32) error("groups nested deeper than 32 levels");
      std::string inner = alternation(depth + 1);
      if (i_ >= p_.size() || p_[i_] != ')') error("'(' without ')'");
      ++i_;
      return "(" + inner + ")";
    }
    if (c == '[') {
      ++i_;
      bool negated = false;
      if (i_ < p_.size() && p_[i_] == '^') {
        negated = true;
        ++i_;
      }
      std::vector<CodeRange> set;
      bool first = true;
      while (true) {
        if (i_ >= p_.size()) error("'[' without ']'");
        if (p_[i_] == ']' && !first) break;
        if (p_[i_] == ']' && first) error("an empty class '[]'");
        first = false;
        std::vector<CodeRange> lo;
        if (p_[i_] == '\\') {
          ++i_;
          lo = escape(true);
        } else {
          const uint32_t cp = literal_char();
          lo = {{cp, cp}};
        }
        if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
          ++i_;
          std::vector<CodeRange> hi;
          if (p_[i_] == '\\') {
            ++i_;
            hi = escape(true);
          } else {
            const uint32_t cp = literal_char();
            hi = {{cp, cp}};
          }
          if (lo.size() != 1 || hi.size() != 1 || lo[0].lo != lo[0].hi || hi[0].lo != hi[0].hi) {
            error("a range with a class escape as an end");
          }
          if (hi[0].lo < lo[0].lo) error("a backwards range");
          set.push_back({lo[0].lo, hi[0].lo});
        } else {
          set.insert(set.end(), lo.begin(), lo.end());
        }
      }
      ++i_;
      if (negated) set = complement(set);
      return json_chars(set, where_);
    }
    if (c == '.') {
      ++i_;
      return json_chars(kDot, where_);
    }
    if (c == '\\') {
      ++i_;
      return json_chars(escape(false), where_);
    }
    if (c == '^' || c == '$') error("anchors ('^', '$') other than at the ends of the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') error(fmt::format("nothing to repeat before '{}'", c));
    if (c == ']' || c == '}') error(fmt::format("a lone '{}'", c));
    const uint32_t cp = literal_char();
    return json_chars({{cp, cp}}, where_);
  }
};

}  // namespace

std::string pattern_to_gbnf(std::string_view pattern, const std::string& where) {
  return Regex(pattern, where).translate();
}

// Decimal strings of the same length: every number from lo to hi.
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  const size_t n = lo.size();
  if (lo == std::string(n, '0') && hi == std::string(n, '9')) return fmt::format("[0-9]{{{}}}", n);
  if (lo[0] == hi[0]) {
    const std::string rest = same_length(lo.substr(1), hi.substr(1));
    return gbnf_literal(lo.substr(0, 1)) + (rest.empty() ? "" : " " + rest);
  }
  std::vector<std::string> parts;
  const auto with = [](std::string head, const std::string& rest) { return rest.empty() ? head : head + " " + rest; };
  parts.push_back(with(gbnf_literal(lo.substr(0, 1)), same_length(lo.substr(1), std::string(n - 1, '9'))));
  if (hi[0] - lo[0] > 1) {
    parts.push_back(with(fmt::format("[{}-{}]", static_cast<char>(lo[0] + 1), static_cast<char>(hi[0] - 1)),
                         n > 1 ? fmt::format("[0-9]{{{}}}", n - 1) : ""));
  }
  parts.push_back(with(gbnf_literal(hi.substr(0, 1)), same_length(std::string(n - 1, '0'), hi.substr(1))));
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

std::string non_negative(int64_t a, int64_t b) {
  std::vector<std::string> parts;
  const size_t da = std::to_string(a).size(), db = std::to_string(b).size();
  for (size_t len = da; len <= db; ++len) {
    const int64_t first = len == 1 ? 0 : static_cast<int64_t>(std::pow(10.0, static_cast<double>(len - 1)));
    const int64_t last = static_cast<int64_t>(std::pow(10.0, static_cast<double>(len))) - 1;
    const int64_t lo = std::max(a, first), hi = std::min(b, last);
    if (lo > hi) continue;
    parts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
  return out + ")";
}

}  // namespace nanoinfer
