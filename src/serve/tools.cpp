#include "serve/tools.h"

#include <fmt/format.h>

#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/json_limits.h"
#include "serve/api.h"

namespace nanoinfer::serve {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string dump_scalar(const ojson& v) {
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

void write_template_json(const ojson& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += dump_scalar(ojson(key));
      out += ": ";
      write_template_json(value, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      write_template_json(v[i], out);
    }
    out += ']';
  } else {
    out += dump_scalar(v);
  }
}

// The longest suffix of `s` that is a proper prefix of `token` (could become it).
size_t partial_suffix(std::string_view s, std::string_view token) {
  for (size_t n = std::min(s.size(), token.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == token.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

void check_depth(const nlohmann::json& value, std::string_view where) {
  std::vector<std::pair<const nlohmann::json*, size_t>> todo = {{&value, 1}};
  while (!todo.empty()) {
    const auto [v, depth] = todo.back();
    todo.pop_back();
    if (!v->is_structured()) continue;
    if (depth > kMaxJsonDepth) fail("{} nests deeper than {} levels", where, kMaxJsonDepth);
    for (const auto& child : *v) todo.emplace_back(&child, depth + 1);
  }
}

std::string template_json(const ojson& value) {
  std::string out;
  write_template_json(value, out);
  return out;
}

std::string tool_call_gbnf(const ToolRequest& request, GrammarBudget* budget) {
  // Names are [A-Za-z0-9_-]: literal without escapes. The wrapper is the template's own
  // spelling of a call (its instructions and its rendering of assistant tool_calls).
  std::string calls;
  std::string rules;
  size_t k = 0;
  for (const ToolDef& t : request.tools) {
    if (request.choice == ToolChoice::Named && t.name != request.named) continue;
    const std::string prefix = fmt::format("tool{}-", k++);
    std::string args = "object";
    if (!t.parameters.empty()) {
      try {
        rules += json_schema_to_gbnf_rules(t.parameters, prefix, budget);
      } catch (const Error& e) {
        fail("tools: function '{}': parameters: {}", t.name, e.what());
      }
      args = prefix + "root";
    }
    calls += fmt::format("{}\"{}\\\", \\\"arguments\\\": \" {}", calls.empty() ? "" : " | ", t.name, args);
  }
  if (calls.empty()) fail("tools: no function named '{}'", request.named);
  std::string out = "root ::= call";
  const size_t max = request.choice == ToolChoice::Named ? 1 : request.max_calls();
  if (max > 1) out += fmt::format(" ( \"\\n\" call ){{0,{}}}", max - 1);
  out += "\n";
  out += "call ::= \"<tool_call>\\n{\\\"name\\\": \\\"\" ( " + calls + " ) \"}\\n</tool_call>\"\n";
  out += rules;
  out += json_basics_gbnf();
  return out;
}

std::string new_tool_call_id() {
  return random_id("call_");
}

ToolCallParser::ToolCallParser(std::vector<std::string> names, size_t max_calls)
    : names_(std::move(names)), max_calls_(max_calls) {}

std::optional<ToolCall> ToolCallParser::parse_block(std::string_view inner) const {
  try {
    check_json_depth(inner, "a tool call");  // dump() below recurses per level
  } catch (const Error&) {
    return std::nullopt;
  }
  const ojson j = ojson::parse(trim(inner), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return std::nullopt;
  ToolCall call;
  call.name = name->get<std::string>();
  if (std::find(names_.begin(), names_.end(), call.name) == names_.end()) return std::nullopt;
  const auto args = j.find("arguments");
  if (args == j.end()) {
    call.arguments = "{}";
  } else if (args->is_object()) {
    call.arguments = dump_scalar(*args);
  } else if (args->is_string()) {
    const ojson inner_args = ojson::parse(args->get<std::string>(), nullptr, false);
    if (inner_args.is_discarded() || !inner_args.is_object()) return std::nullopt;
    call.arguments = args->get<std::string>();
  } else {
    return std::nullopt;
  }
  for (const auto& item : j.items()) {
    if (item.key() != "name" && item.key() != "arguments") return std::nullopt;
  }
  call.id = new_tool_call_id();
  return call;
}

// Content: whitespace after a block is dropped; trailing whitespace is held (a block may follow).
void ToolCallParser::content(std::string_view text, std::vector<Event>& out) {
  if (after_block_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_block_ = false;
  }
  size_t end = text.size();
  while (end > 0 && is_space(text[end - 1])) --end;
  if (end > 0) {
    std::string s = std::move(held_ws_);
    held_ws_.clear();
    s += text.substr(0, end);
    out.push_back({std::move(s), std::nullopt});
  }
  held_ws_ += text.substr(end);
}

// Text that is content as it is (a malformed block), held whitespace first.
void ToolCallParser::raw(std::string_view text, std::vector<Event>& out) {
  if (text.empty()) return;
  std::string s = std::move(held_ws_);
  held_ws_.clear();
  after_block_ = false;
  s += text;
  out.push_back({std::move(s), std::nullopt});
}

void ToolCallParser::feed(std::string_view text, std::vector<Event>& out) {
  if (calls_ >= max_calls_) return;
  buf_ += text;
  while (true) {
    if (!in_block_) {
      const size_t open = buf_.find(kOpen);
      if (open == std::string::npos) {
        const size_t keep = partial_suffix(buf_, kOpen);
        content(std::string_view(buf_).substr(0, buf_.size() - keep), out);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      content(std::string_view(buf_).substr(0, open), out);
      buf_.erase(0, open + kOpen.size());
      in_block_ = true;
    } else {
      const size_t close = buf_.find(kClose);
      if (close == std::string::npos) return;
      std::optional<ToolCall> call = parse_block(std::string_view(buf_).substr(0, close));
      if (call) {
        held_ws_.clear();
        out.push_back({{}, std::move(call)});
        after_block_ = true;
        if (++calls_ >= max_calls_) {
          buf_.clear();
          in_block_ = false;
          return;
        }
      } else {
        raw(std::string(kOpen) + buf_.substr(0, close + kClose.size()), out);
      }
      buf_.erase(0, close + kClose.size());
      in_block_ = false;
    }
  }
}

void ToolCallParser::finish(std::vector<Event>& out) {
  if (calls_ < max_calls_) {
    if (in_block_) {
      raw(std::string(kOpen) + buf_, out);
    } else {
      content(buf_, out);
    }
  }
  buf_.clear();
  in_block_ = false;
  if (calls_ == 0 && !held_ws_.empty()) out.push_back({std::move(held_ws_), std::nullopt});
  held_ws_.clear();
}

ParsedOutput parse_tool_output(std::string_view text, const ToolRequest& request) {
  std::vector<std::string> names;
  for (const ToolDef& t : request.tools) names.push_back(t.name);
  ToolCallParser parser(std::move(names), request.max_calls());
  std::vector<ToolCallParser::Event> events;
  parser.feed(text, events);
  parser.finish(events);
  ParsedOutput out;
  for (auto& e : events) {
    if (e.call) {
      out.calls.push_back(std::move(*e.call));
    } else {
      out.content += e.content;
    }
  }
  return out;
}

}  // namespace nanoinfer::serve
