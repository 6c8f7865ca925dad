// GBNF text -> syntax tree (grammar/gbnf_parser.h).
#include "grammar/gbnf_parser.h"

#include <algorithm>
#include <map>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

Node from_sequences(const std::vector<std::vector<ByteRange>>& seqs) {
  Node alt{Node::Alt};
  for (const auto& seq : seqs) {
    Node s{Node::Seq};
    for (const ByteRange& r : seq) {
      Node b{Node::Range};
      b.lo = r.lo;
      b.hi = r.hi;
      s.kids.push_back(std::move(b));
    }
    alt.kids.push_back(std::move(s));
  }
  if (alt.kids.size() == 1) return std::move(alt.kids[0]);
  return alt;
}

constexpr uint32_t kMaxRepeat = 100000;

class GbnfParser {
 public:
  GbnfParser(std::string_view text, GrammarBudget& budget) : s_(text), budget_(budget) {}

  std::vector<std::pair<std::string, Node>> parse() {
    budget_.charge(s_.size());
    std::vector<std::pair<std::string, Node>> rules;
    std::map<std::string, size_t> seen;
    while (true) {
      skip_space();
      if (i_ == s_.size()) break;
      std::string name = rule_name();
      skip_space();
      if (s_.substr(i_, 3) != "::=") error(fmt::format("expected '::=' after the rule name '{}'", name));
      i_ += 3;
      Node body = alternatives();
      skip_space();
      if (i_ < s_.size() && s_[i_] == ')') error("unbalanced ')'");
      if (seen.count(name)) error(fmt::format("the rule '{}' is defined twice", name));
      seen[name] = rules.size();
      rules.emplace_back(std::move(name), std::move(body));
    }
    if (rules.empty()) fail("grammar: no rules");
    return rules;
  }

 private:
  std::string_view s_;
  GrammarBudget& budget_;
  size_t i_ = 0;
  // line(): the newlines before line_at_ are counted in line_; the parser only moves forward,
  // so each byte is counted once (a count from the start for every rule reference made a
  // grammar of many rules quadratic).
  size_t line_at_ = 0;
  size_t line_ = 1;
  // Groups (and stacked repetition operators) nest by recursion here and in every later pass
  // over the rule tree: bounded, so a hostile "((((...))))" or "a****..." is an error instead
  // of a stack overflow.
  static constexpr size_t kMaxGroupDepth = 64;
  size_t group_depth_ = 0;

  size_t line() {
    const size_t end = std::max(line_at_, std::min(i_, s_.size()));
    line_ += static_cast<size_t>(
        std::count(s_.begin() + static_cast<ptrdiff_t>(line_at_), s_.begin() + static_cast<ptrdiff_t>(end), '\n'));
    line_at_ = end;
    return line_;
  }
  [[noreturn]] void error(const std::string& what) { fail("grammar line {}: {}", line(), what); }

  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  }
  static bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

  void skip_space() {
    while (i_ < s_.size()) {
      if (space(s_[i_])) {
        ++i_;
      } else if (s_[i_] == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) error(fmt::format("expected a rule name, got '{}'", s_.substr(i_, 1)));
    return std::string(s_.substr(start, i_ - start));
  }

  // Is the text at i_ the start of the next rule ("name ::=")?
  bool at_rule_start() const {
    size_t j = i_;
    while (j < s_.size() && name_char(s_[j])) ++j;
    if (j == i_) return false;
    while (j < s_.size() && space(s_[j])) ++j;
    return s_.substr(j, 3) == "::=";
  }

  Node alternatives() {
    Node alt{Node::Alt};
    alt.kids.push_back(sequence());
    while (true) {
      skip_space();
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        alt.kids.push_back(sequence());
      } else {
        break;
      }
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node sequence() {
    Node seq{Node::Seq};
    while (true) {
      skip_space();
      if (i_ == s_.size() || s_[i_] == '|' || s_[i_] == ')' || at_rule_start()) break;
      Node item = primary();
      for (size_t stacked = 0;; ++stacked) {
        if (i_ >= s_.size()) break;
        // Each operator wraps the item once more (a deeper tree): bounded like groups.
        if (stacked == kMaxGroupDepth) error(fmt::format("more than {} repetition operators in a row", kMaxGroupDepth));
        const char c = s_[i_];
        Node rep{Node::Repeat};
        if (c == '*') {
          rep.unbounded = true;
          ++i_;
        } else if (c == '+') {
          rep.min = 1;
          rep.unbounded = true;
          ++i_;
        } else if (c == '?') {
          rep.max = 1;
          ++i_;
        } else if (c == '{') {
          ++i_;
          skip_space();
          rep.min = number();
          skip_space();
          if (i_ < s_.size() && s_[i_] == ',') {
            ++i_;
            skip_space();
            if (i_ < s_.size() && s_[i_] == '}') {
              rep.unbounded = true;
            } else {
              rep.max = number();
            }
          } else {
            rep.max = rep.min;
          }
          skip_space();
          if (i_ >= s_.size() || s_[i_] != '}') error("expected '}' closing a repetition");
          ++i_;
          if (!rep.unbounded && rep.max < rep.min)
            error(fmt::format("repetition {{{},{}}}: max < min", rep.min, rep.max));
        } else {
          break;
        }
        rep.kids.push_back(std::move(item));
        item = std::move(rep);
      }
      seq.kids.push_back(std::move(item));
    }
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    return seq;
  }

  uint32_t number() {
    const size_t start = i_;
    uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[i_] - '0');
      if (v > kMaxRepeat) error(fmt::format("a repetition count over {}", kMaxRepeat));
      ++i_;
    }
    if (i_ == start) error("expected a number in a repetition");
    return static_cast<uint32_t>(v);
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      if (i_ >= s_.size()) error("unfinished escape");
      const char c = s_[i_++];
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        error(fmt::format("'{}' is not a hex digit", c));
      v = v * 16 + d;
    }
    return v;
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  uint32_t character() {
    if (i_ >= s_.size()) error("unfinished literal or class");
    const unsigned char c = static_cast<unsigned char>(s_[i_]);
    if (c == '\\') {
      ++i_;
      if (i_ >= s_.size()) error("unfinished escape");
      const char e = s_[i_++];
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '0':
          return 0;
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '.':
          return static_cast<unsigned char>(e);
        case 'x':
          return hex(2);
        case 'u':
          return hex(4);
        case 'U':
          return hex(8);
        default:
          error(fmt::format("unknown escape '\\{}'", e));
      }
    }
    size_t len = 0;
    const uint32_t cp = decode_utf8(s_.substr(i_), len);
    if (len == 0) error("invalid UTF-8 in the grammar text");
    i_ += len;
    return cp;
  }

  // character() as a Unicode scalar value: past U+10FFFF is an error, and so is a surrogate
  // (U+D800-U+DFFF, which UTF-8 cannot encode: an escape such as \uD800 would force invalid
  // bytes), except as the end of a class range, which may span them (utf8_sequences leaves
  // them out).
  uint32_t code_point(bool range_end = false) {
    const uint32_t cp = character();
    if (cp > 0x10FFFF) error("a code point past U+10FFFF");
    if (!range_end && cp >= 0xD800 && cp <= 0xDFFF) surrogate(cp);
    return cp;
  }
  [[noreturn]] void surrogate(uint32_t cp) {
    error(fmt::format("U+{:04X} is a surrogate, not a character (UTF-8 cannot encode it)", cp));
  }

  Node primary() {
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      Node literal{Node::Literal};
      while (true) {
        if (i_ >= s_.size()) error("unterminated literal");
        if (s_[i_] == '"') {
          ++i_;
          break;
        }
        const uint32_t cp = code_point();
        for (unsigned char b : encode_utf8(cp)) literal.name += static_cast<char>(b);
      }
      return literal;
    }
    if (c == '[') {
      ++i_;
      bool negated = false;
      if (i_ < s_.size() && s_[i_] == '^') {
        negated = true;
        ++i_;
      }
      std::vector<CodeRange> ranges;
      while (true) {
        if (i_ >= s_.size()) error("unterminated character class");
        if (s_[i_] == ']') {
          ++i_;
          break;
        }
        const uint32_t lo = code_point(/*range_end=*/true);
        uint32_t hi = lo;
        if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
          ++i_;
          hi = code_point(/*range_end=*/true);
        } else if (lo >= 0xD800 && lo <= 0xDFFF) {
          surrogate(lo);
        }
        if (hi < lo) error(fmt::format("character range U+{:04X}-U+{:04X} is backwards", lo, hi));
        ranges.push_back({lo, hi});
      }
      if (negated) ranges = complement(ranges);
      return class_node(ranges);
    }
    if (c == '.') {
      ++i_;
      return class_node({{0, 0x10FFFF}});
    }
    if (c == '(') {
      ++i_;
      if (++group_depth_ > kMaxGroupDepth) error(fmt::format("groups nested deeper than {} levels", kMaxGroupDepth));
      Node inner = alternatives();
      --group_depth_;
      skip_space();
      if (i_ >= s_.size() || s_[i_] != ')') error("expected ')'");
      ++i_;
      return inner;
    }
    if (name_char(c)) {
      Node ref{Node::Ref};
      ref.line = line();
      ref.name = rule_name();
      return ref;
    }
    error(fmt::format("unexpected '{}'", c));
  }

  Node class_node(const std::vector<CodeRange>& ranges) {
    const auto seqs = utf8_sequences(ranges);
    budget_.charge(seqs.size() * 4);
    if (seqs.empty()) error("a character class that matches nothing");
    return from_sequences(seqs);
  }
};

}  // namespace

std::vector<std::pair<std::string, Node>> parse_gbnf(std::string_view text, GrammarBudget& budget) {
  return GbnfParser(text, budget).parse();
}

}  // namespace nanoinfer
