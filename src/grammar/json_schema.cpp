// JSON Schema -> GBNF (nanoinfer/grammar.h, json_schema_to_gbnf). The generated JSON is compact
// (no whitespace), objects list their properties in the schema's order, and every keyword
// either is enforced exactly or is refused with an Error that names it: the grammar may
// generate fewer documents than the schema allows, never one it forbids.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include "grammar/json_pattern.h"
#include "grammar/json_schema_keywords.h"
#include "grammar/utf8_ranges.h"
#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/json_limits.h"

namespace nanoinfer {

namespace {

using namespace json_schema;  // json, and the schema algebra

constexpr int64_t kMaxInteger = 999'999'999'999'999;  // 15 digits: exact in a JS number

const char* const kBasics = R"(value ::= object | array | string | number | "true" | "false" | "null"
object ::= "{" ( member ( "," member )* )? "}"
member ::= string ":" value
array ::= "[" ( value ( "," value )* )? "]"
string ::= "\"" char* "\""
char ::= [^"\\\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" hex4 )
hex4 ::= [0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}
number ::= "-"? int-part ( "." [0-9]{1,15} )? ( [eE] [-+]? [0-9]{1,2} )?
int-part ::= "0" | [1-9] [0-9]{0,14}
integer ::= "-"? int-part
)";

// Every pass here is linear in the schema and the text it writes, and none recurses deeper
// than the schema nests (at most kMaxJsonDepth levels, checked before parsing): a $ref's rule is
// written from a work list, not from inside the schema that refers to it, so a chain of 60,000
// references is a loop, not 60,000 nested calls. The budget is charged per byte written.
class Gen {
 public:
  // `prefix`: the rules are named for a larger grammar (json_schema_to_gbnf_rules).
  Gen(const json& root, GrammarBudget& budget, std::string prefix = "")
      : root_(root), budget_(budget), prefix_(std::move(prefix)) {
    names_.insert(prefix_ + "root");
    names_.insert(key_char());
  }

  std::string run() {
    const std::string body = schema(root_, "#");
    // The rules of references, each written once, in the order they were first met.
    for (size_t i = 0; i < pending_refs_.size(); ++i) {
      const PendingRef ref = pending_refs_[i];  // (a copy: schema() may add more)
      std::string ref_body = schema(*ref.target, ref.key);
      rules_[ref.rule].second = std::move(ref_body);
    }
    std::string out = prefix_ + "root ::= " + body + "\n";
    for (const auto& [name, rule] : rules_) {
      budget_.charge(name.size() + rule.size());
      out += name + " ::= " + rule + "\n";
    }
    if (prefix_.empty()) out += kBasics;
    return out;
  }

 private:
  const json& root_;
  GrammarBudget& budget_;
  const std::string prefix_;
  std::string key_char() const { return prefix_ + "key-char"; }
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_ = {"root", "value", "object", "member",   "array",   "string",
                                  "char", "hex4",  "number", "int-part", "integer", "key-char"};
  std::map<std::string, int> next_suffix_;  // per base name, the next number to try
  std::map<std::string, std::string> refs_;
  struct PendingRef {
    size_t rule;  // in rules_
    const json* target;
    std::string key;
  };
  std::vector<PendingRef> pending_refs_;
  bool key_char_ = false;
  int depth_ = 0;  // schema() calls in progress

  std::string new_name(std::string_view hint) {
    std::string base;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    if (base.empty() || base.size() > 40) base = base.substr(0, 40) + "r";
    std::string name = prefix_ + base;
    if (names_.count(name)) {
      // Numbered from where the last one with this base stopped: trying 2, 3, .. afresh for
      // each of n rules of one base ("key", "items", ...) was quadratic.
      int& k = next_suffix_.try_emplace(base, 2).first->second;
      do {
        name = fmt::format("{}{}-{}", prefix_, base, k++);
      } while (names_.count(name));
    }
    names_.insert(name);
    budget_.charge(name.size());
    return name;
  }
  std::string rule(std::string_view hint, std::string body) {
    std::string name = new_name(hint);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  const json& resolve(const json& ref, const std::string& where) const {
    if (!ref.is_string()) fail("JSON Schema: '$ref' at {} must be a string", where);
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') unsupported(fmt::format("'$ref' to '{}' (only local '#...' references)", r), where);
    json::json_pointer pointer;
    try {
      pointer = json::json_pointer(r.substr(1));
    } catch (const json::exception&) {
      fail("JSON Schema: '$ref' '{}' at {} does not resolve", r, where);
    }
    // Step by step, objects through an index of their members (built once per object): an
    // ordered_json object is searched linearly, and 60,000 references into one $defs of
    // 60,000 schemas made that quadratic.
    std::vector<std::string> tokens;
    for (json::json_pointer p = pointer; !p.empty(); p = p.parent_pointer()) tokens.push_back(p.back());
    const json* at = &root_;
    for (size_t k = tokens.size(); k-- > 0;) {
      const std::string& token = tokens[k];
      if (at->is_object()) {
        auto [index, added] = members_.try_emplace(at);
        if (added) {
          for (const auto& [name, value] : at->items()) index->second.emplace(name, &value);
          budget_.charge(at->size());
        }
        auto it = index->second.find(token);
        if (it == index->second.end()) fail("JSON Schema: '$ref' '{}' at {} does not resolve", r, where);
        at = it->second;
      } else if (at->is_array() && !token.empty() && token.size() < 10 &&
                 token.find_first_not_of("0123456789") == std::string::npos && (token == "0" || token[0] != '0') &&
                 std::stoul(token) < at->size()) {
        at = &(*at)[std::stoul(token)];
      } else {
        fail("JSON Schema: '$ref' '{}' at {} does not resolve", r, where);
      }
    }
    return *at;
  }
  mutable std::unordered_map<const json*, std::unordered_map<std::string, const json*>> members_;

  // The schema with a top-level $ref replaced by what it points to (siblings merged in).
  json deref(const json& s, const std::string& where, int depth = 0) const {
    if (!s.is_object() || !s.contains("$ref")) return s;
    if (depth > 32) fail("JSON Schema: '$ref' at {} refers to itself without a schema in between", where);
    json rest = s;
    rest.erase("$ref");
    return merge(deref(resolve(s.at("$ref"), where), where, depth + 1), rest, where);
  }

  std::string ref_rule(const json& ref, const std::string& where) {
    const std::string key = ref.is_string() ? ref.get<std::string>() : "";
    auto it = refs_.find(key);
    if (it != refs_.end()) return it->second;
    const json& target = resolve(ref, where);  // checks the reference first
    const size_t slash = key.rfind('/');
    const std::string name = new_name("ref-" + key.substr(slash == std::string::npos ? 1 : slash + 1));
    refs_[key] = name;
    pending_refs_.push_back({rules_.size(), &target, key});  // its body: written by run()
    rules_.emplace_back(name, "");
    return name;
  }

  // A schema's GBNF expression. Every 8 levels of schema the expression becomes a rule of its
  // own, so the groups of the text never nest past the GBNF parser's limit however the schema
  // nests (within kMaxJsonDepth).
  std::string schema(const json& s, const std::string& where) {
    ++depth_;
    std::string body;
    try {
      body = schema_body(s, where);
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    budget_.charge(body.size());
    if (depth_ % 8 == 7 && body.size() > 1 && body.front() == '(') return rule("nested", std::move(body));
    return body;
  }

  std::string schema_body(const json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return "value";
      fail("JSON Schema: the schema at {} is false (no value can match it)", where);
    }
    if (!s.is_object()) fail("JSON Schema: the schema at {} must be an object or a boolean", where);
    check_keywords(s, where);
    if (s.contains("$ref")) {
      const json rest = without(s, {"$ref", "$defs", "definitions"});
      if (rest.empty()) return ref_rule(s.at("$ref"), where);
      return schema(deref(without(s, {"$defs", "definitions"}), where), where);
    }
    if (s.contains("allOf")) {
      const json& all = s.at("allOf");
      if (!all.is_array() || all.empty()) fail("JSON Schema: 'allOf' at {} must be a non-empty array", where);
      json m = without(s, {"allOf", "$defs", "definitions"});
      for (size_t i = 0; i < all.size(); ++i) {
        const std::string w = fmt::format("{}/allOf/{}", where, i);
        m = merge(m, deref(all[i], w), w);
      }
      return schema(m, where);
    }
    if (s.contains("anyOf") && s.contains("oneOf")) unsupported("'anyOf' together with 'oneOf'", where);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& branches = s.at(key);
      if (!branches.is_array() || branches.empty())
        fail("JSON Schema: '{}' at {} must be a non-empty array", key, where);
      const json rest = without(s, {"anyOf", "oneOf", "$defs", "definitions"});
      std::vector<json> merged;
      std::string out = "(";
      for (size_t i = 0; i < branches.size(); ++i) {
        const std::string w = fmt::format("{}/{}/{}", where, key, i);
        if (rest.empty()) {
          // A branch that is only a $ref keeps its rule (recursive schemas).
          merged.push_back(deref(branches[i], w));
          out += (i ? " | " : "") + schema(branches[i], w);
        } else {
          merged.push_back(merge(rest, deref(branches[i], w), w));
          out += (i ? " | " : "") + schema(merged.back(), w);
        }
      }
      if (std::string(key) == "oneOf") check_exclusive(merged, where);
      return out + ")";
    }
    std::vector<std::string> types;
    if (s.contains("type")) types = types_of(s, where);
    if (s.contains("const")) {
      const json& c = s.at("const");
      if (!types.empty() &&
          std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_matches(c, t); })) {
        fail("JSON Schema: 'const' at {} does not have the schema's type", where);
      }
      if (s.contains("enum") && std::find(s.at("enum").begin(), s.at("enum").end(), c) == s.at("enum").end()) {
        fail("JSON Schema: 'const' at {} is not in its 'enum'", where);
      }
      return gbnf_literal(c.dump());
    }
    if (s.contains("enum")) {
      const json& e = s.at("enum");
      if (!e.is_array() || e.empty()) fail("JSON Schema: 'enum' at {} must be a non-empty array", where);
      std::string out;
      for (const json& v : e) {
        if (!types.empty() &&
            std::none_of(types.begin(), types.end(), [&](const std::string& t) { return type_matches(v, t); }))
          continue;
        out += (out.empty() ? "(" : " | ") + gbnf_literal(v.dump());
      }
      if (out.empty()) fail("JSON Schema: no value of 'enum' at {} has the schema's type", where);
      return out + ")";
    }
    if (types.empty()) {
      const auto has = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (has({"properties", "required", "additionalProperties"}))
        types = {"object"};
      else if (has({"items", "prefixItems", "minItems", "maxItems"}))
        types = {"array"};
      else if (has({"minLength", "maxLength", "pattern"}))
        types = {"string"};
      else if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
        types = {"integer"};
      else
        return "value";
    }
    std::string out;
    for (const std::string& t : types) out += (out.empty() ? "(" : " | ") + type_body(t, s, where);
    return out + ")";
  }
  std::string type_body(const std::string& t, const json& s, const std::string& where) {
    if (t == "null") return gbnf_literal("null");
    if (t == "boolean") return "(" + gbnf_literal("true") + " | " + gbnf_literal("false") + ")";
    if (t == "string") return string_body(s, where);
    if (t == "integer") return integer_body(s, where);
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (s.contains(k)) unsupported(fmt::format("'{}' on a number (bounds are supported on integers)", k), where);
      }
      return "number";
    }
    if (t == "object") return object_body(s, where);
    return array_body(s, where);
  }

  std::string string_body(const json& s, const std::string& where) {
    const std::string quote = gbnf_literal("\"");
    if (s.contains("pattern")) {
      if (s.contains("minLength") || s.contains("maxLength"))
        unsupported("'pattern' together with minLength/maxLength", where);
      if (!s.at("pattern").is_string()) fail("JSON Schema: 'pattern' at {} must be a string", where);
      return "(" + quote + " " + pattern_to_gbnf(s.at("pattern").get<std::string>(), where) + " " + quote + ")";
    }
    const int64_t lo = count_keyword(s, "minLength", where).value_or(0);
    const std::optional<int64_t> hi = count_keyword(s, "maxLength", where);
    if (hi && *hi < lo) fail("JSON Schema: at {} maxLength < minLength: no string matches", where);
    if (lo == 0 && !hi) return "string";
    return "(" + quote + " char{" + std::to_string(lo) + "," + (hi ? std::to_string(*hi) : "") + "} " + quote + ")";
  }

  // ---- integers in a range ----

  std::string integer_body(const json& s, const std::string& where) {
    int64_t lo = -kMaxInteger, hi = kMaxInteger;
    bool bounded = false;
    const auto bound = [&](const char* key, bool lower, bool exclusive) {
      if (!s.contains(key)) return;
      const json& v = s.at(key);
      if (!v.is_number()) fail("JSON Schema: '{}' at {} must be a number", key, where);
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > 1e15) unsupported(fmt::format("'{}' beyond 15 digits", key), where);
      bounded = true;
      if (lower) {
        const int64_t b = exclusive ? static_cast<int64_t>(std::floor(d)) + 1 : static_cast<int64_t>(std::ceil(d));
        lo = std::max(lo, b);
      } else {
        const int64_t b = exclusive ? static_cast<int64_t>(std::ceil(d)) - 1 : static_cast<int64_t>(std::floor(d));
        hi = std::min(hi, b);
      }
    };
    bound("minimum", true, false);
    bound("exclusiveMinimum", true, true);
    bound("maximum", false, false);
    bound("exclusiveMaximum", false, true);
    if (!bounded) return "integer";
    if (lo > hi) fail("JSON Schema: no integer at {} is within its bounds", where);
    std::vector<std::string> parts;
    if (lo < 0) parts.push_back(gbnf_literal("-") + " " + non_negative(std::max<int64_t>(1, -hi), -lo));
    if (hi >= 0) parts.push_back(non_negative(std::max<int64_t>(0, lo), hi));
    std::string out = "(";
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : "") + parts[i];
    return out + ")";
  }

  // ---- objects ----

  // A JSON string (with quotes) that is none of `names` (ASCII, no escapes in the key).
  static constexpr size_t kMaxKeyBytes = 256;  // key_rest recurses once per byte of a name
  std::string key_not_in(const std::vector<std::string>& names, const std::string& where) {
    for (const std::string& n : names) {
      if (n.size() > kMaxKeyBytes) {
        unsupported(fmt::format("extra properties next to a property name over {} bytes", kMaxKeyBytes), where);
      }
      for (char c : n) {
        const unsigned char u = static_cast<unsigned char>(c);
        if (u >= 0x80 || u < 0x20 || c == '"' || c == '\\') {
          unsupported("extra properties next to a property name that is not plain ASCII", where);
        }
      }
    }
    if (!key_char_) {
      rules_.emplace_back(key_char(), R"([^"\\\x00-\x1F])");
      key_char_ = true;
    }
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    return gbnf_literal("\"") + " " + key_rest(sorted, 0, sorted.size(), 0);
  }
  // The rest of a key after its first `len` bytes, which names[lo, hi) share (sorted, unique):
  // one rule per node of the names' trie, each name's bytes visited once per level.
  std::string key_rest(const std::vector<std::string>& names, size_t lo, size_t hi, size_t len) {
    const bool is_name = lo < hi && names[lo].size() == len;  // sorted: the shortest first
    std::vector<std::string> alts;
    if (!is_name) alts.push_back(gbnf_literal("\""));
    std::vector<CodeRange> other = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    for (size_t i = is_name ? lo + 1 : lo; i < hi;) {
      const unsigned char c = static_cast<unsigned char>(names[i][len]);
      size_t j = i;
      while (j < hi && static_cast<unsigned char>(names[j][len]) == c) ++j;
      budget_.charge(j - i);
      alts.push_back(gbnf_literal(std::string(1, static_cast<char>(c))) + " " + key_rest(names, i, j, len + 1));
      other.push_back({c, c});
      i = j;
    }
    alts.push_back(gbnf_class(complement(other)) + " " + key_char() + "* " + gbnf_literal("\""));
    std::string body;
    for (size_t i = 0; i < alts.size(); ++i) body += (i ? " | " : "") + alts[i];
    return rule("key", body);
  }

  std::string object_body(const json& s, const std::string& where) {
    json props = json::object();
    if (s.contains("properties")) {
      if (!s.at("properties").is_object()) fail("JSON Schema: 'properties' at {} must be an object", where);
      props = s.at("properties");
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s.at("required").is_array()) fail("JSON Schema: 'required' at {} must be an array", where);
      for (const json& r : s.at("required")) {
        if (!r.is_string()) fail("JSON Schema: 'required' at {} must hold strings", where);
        required.insert(r.get<std::string>());
      }
    }
    // Extra properties: none when the schema lists properties and says nothing (a subset of
    // what it allows), any when it lists none, else as additionalProperties says.
    std::optional<json> extra;
    if (s.contains("additionalProperties")) {
      const json& a = s.at("additionalProperties");
      if (!(a.is_boolean() && !a.get<bool>())) extra = a;
    } else if (props.empty()) {
      extra = json(true);
    }
    std::vector<std::tuple<std::string, json, bool>> order;  // name, schema, required
    std::set<std::string> listed;                            // (an ordered_json object is searched linearly)
    for (const auto& [name, ps] : props.items()) {
      order.emplace_back(name, ps, required.count(name) > 0);
      listed.insert(name);
    }
    for (const std::string& r : required) {
      if (listed.count(r)) continue;
      if (!s.contains("additionalProperties")) {
        order.emplace_back(r, json(true), true);
      } else if (extra) {
        order.emplace_back(r, *extra, true);
      } else {
        fail("JSON Schema: at {} the required property '{}' is forbidden by additionalProperties", where, r);
      }
    }
    std::vector<std::string> names;
    for (const auto& entry : order) names.push_back(std::get<0>(entry));
    std::string a_next, b_next;  // rules after the last listed property, nothing / something emitted
    if (extra) {
      const std::string key = names.empty() ? "string" : key_not_in(names, where);
      const std::string kv =
          rule("extra-kv", key + " " + gbnf_literal(":") + " " + schema(*extra, where + "/additionalProperties"));
      a_next = rule("extra-a", "( " + kv + " ( " + gbnf_literal(",") + " " + kv + " )* )?");
      b_next = rule("extra-b", "( " + gbnf_literal(",") + " " + kv + " )*");
    }
    for (size_t i = order.size(); i-- > 0;) {
      const auto& [name, ps, req] = order[i];
      const std::string value = schema(ps, where + "/properties/" + name);
      const std::string kv = gbnf_literal(json(name).dump()) + " " + gbnf_literal(":") + " " + value;
      const std::string then = b_next.empty() ? "" : " " + b_next;
      std::string a_body = kv + then, b_body = gbnf_literal(",") + " " + kv + then;
      if (!req) {
        a_body += " | " + a_next;
        b_body += " | " + b_next;
      }
      const std::string hint = "obj-" + name;
      a_next = rule(hint + "-a", a_body);
      b_next = rule(hint + "-b", b_body);
    }
    return "(" + gbnf_literal("{") + " " + a_next + " " + gbnf_literal("}") + ")";
  }

  // ---- arrays ----

  std::string array_body(const json& s, const std::string& where) {
    std::vector<json> prefix;
    if (s.contains("prefixItems")) {
      if (!s.at("prefixItems").is_array()) fail("JSON Schema: 'prefixItems' at {} must be an array", where);
      for (const json& p : s.at("prefixItems")) prefix.push_back(p);
    }
    std::optional<json> rest = json(true);
    if (s.contains("items")) {
      const json& it = s.at("items");
      if (it.is_array()) unsupported("'items' as an array (use prefixItems)", where);
      if (it.is_boolean() && !it.get<bool>())
        rest.reset();
      else
        rest = it;
    }
    const int64_t k = static_cast<int64_t>(prefix.size());
    const int64_t lo = count_keyword(s, "minItems", where).value_or(0);
    std::optional<int64_t> hi = count_keyword(s, "maxItems", where);
    if (!rest) hi = std::min(hi.value_or(k), k);
    if (hi && *hi < lo) fail("JSON Schema: at {} no array has between minItems and maxItems items", where);
    std::string rest_expr;
    if (rest && (!hi || *hi > k)) rest_expr = schema(*rest, where + "/items");
    const auto elem = [&](int64_t i) {
      return i < k ? schema(prefix[static_cast<size_t>(i)], fmt::format("{}/prefixItems/{}", where, i)) : rest_expr;
    };
    const int64_t explicit_n = std::min(std::max(k, lo), hi.value_or(std::max(k, lo)));
    // After the explicit positions: more items of `rest`, up to maxItems.
    std::string tail;
    if (!rest_expr.empty() && (!hi || *hi > explicit_n)) {
      const std::string more = "( " + gbnf_literal(",") + " " + rest_expr + " )";
      tail = hi ? fmt::format("{}{{0,{}}}", more, *hi - explicit_n) : more + "*";
    }
    std::string body;
    if (explicit_n == 0) {
      if (!rest_expr.empty() && (!hi || *hi > 0)) {
        const std::string more = "( " + gbnf_literal(",") + " " + rest_expr + " )";
        body = "( " + rest_expr + " " + (hi ? fmt::format("{}{{0,{}}}", more, *hi - 1) : more + "*") + " )?";
      }
    } else {
      std::string chain = tail;  // after position explicit_n - 1
      for (int64_t i = explicit_n - 1; i >= 1; --i) {
        const std::string item = gbnf_literal(",") + " " + elem(i) + (chain.empty() ? "" : " " + chain);
        chain = i < lo ? item : "( " + item + " )?";
        chain = rule("items", chain);
      }
      body = elem(0) + (chain.empty() ? "" : " " + chain);
      if (lo == 0) body = "( " + body + " )?";
    }
    return "(" + gbnf_literal("[") + (body.empty() ? "" : " " + body) + " " + gbnf_literal("]") + ")";
  }
};

// A grammar step costs ~46 ns, a comparison of member names in an ordered parse ~1.5 ns.
constexpr uint64_t kComparisonsPerStep = 32;

json parse_schema(std::string_view schema_json, GrammarBudget& budget) {
  budget.charge(schema_json.size());
  check_json_depth(schema_json, "JSON Schema");
  budget.charge(ordered_parse_cost(schema_json) / kComparisonsPerStep);
  try {
    return json::parse(schema_json);
  } catch (const json::exception& e) {
    fail("JSON Schema: not valid JSON: {}", e.what());
  }
}

}  // namespace

std::string json_object_gbnf() {
  // Appended rather than `std::string(...) + kBasics`, which GCC 12's -Warray-bounds misreads
  // when the temporary's copy is inlined (it depends on the unity batch around this file).
  std::string out = "root ::= object\n";
  out += kBasics;
  return out;
}

std::string json_schema_to_gbnf(std::string_view schema_json, GrammarBudget* budget) {
  GrammarBudget fallback;
  GrammarBudget& b = budget ? *budget : fallback;
  const json schema = parse_schema(schema_json, b);
  return Gen(schema, b).run();
}

std::string json_schema_to_gbnf_rules(std::string_view schema_json, std::string_view prefix, GrammarBudget* budget) {
  if (prefix.empty()) fail("json_schema_to_gbnf_rules: the prefix must not be empty");
  GrammarBudget fallback;
  GrammarBudget& b = budget ? *budget : fallback;
  const json schema = parse_schema(schema_json, b);
  return Gen(schema, b, std::string(prefix)).run();
}

std::string json_basics_gbnf() {
  return kBasics;
}

}  // namespace nanoinfer
