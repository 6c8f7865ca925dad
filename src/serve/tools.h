// Tool calls (OpenAI `tools`, `tool_choice`, `parallel_tool_calls`) for Qwen2.5: the template's
// JSON rendering, the grammar that `required` and a named function decode under, and the
// parser that turns the model's <tool_call> blocks into OpenAI tool calls, incrementally so a
// stream and a whole response split the same text the same way. See docs/SERVING.md, "Tool
// calls".
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/grammar.h"

namespace nanoinfer::serve {

// What Qwen's chat template writes for `x | tojson` as Hugging Face transformers renders it:
// Python's json.dumps(x, ensure_ascii=False): separators ", " and ": ", keys in the order
// given, non-ASCII characters as they are.
std::string template_json(const nlohmann::ordered_json& value);

// Throws nanoinfer::Error naming `where` when `value` nests arrays/objects deeper than
// kMaxJsonDepth (64): template_json, dump() and the schema compiler recurse once per level.
// Iterative itself.
void check_depth(const nlohmann::json& value, std::string_view where);

enum class ToolChoice { None, Auto, Required, Named };

struct ToolDef {
  std::string name;        // [A-Za-z0-9_-]{1,64}
  std::string rendered;    // the whole tool object, template_json: a line of the <tools> block
  std::string parameters;  // its parameters schema (JSON text, document order); "" when absent
};

struct ToolRequest {
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::Auto;  // without tools: None
  std::string named;                     // ToolChoice::Named: the function's name
  bool parallel = true;                  // parallel_tool_calls
  // Whether the output is parsed for <tool_call> blocks (tools given and choice is not none).
  bool parse() const { return !tools.empty() && choice != ToolChoice::None; }
  size_t max_calls() const { return parallel ? kMaxParallelCalls : 1; }
  static constexpr size_t kMaxParallelCalls = 8;  // what `required` may generate in one turn
};

// GBNF of the output `required` (or a named function) allows: one or more blocks (up to
// max_calls(), one for a named function)
//   <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
// separated by "\n", NAME one of the tools (the named one), ARGS valid against its parameters
// schema (compact JSON; any object when the tool has no parameters). Throws nanoinfer::Error
// naming the tool when its schema uses what the JSON Schema compiler cannot enforce.
std::string tool_call_gbnf(const ToolRequest& request, GrammarBudget* budget = nullptr);

struct ToolCall {
  std::string id;  // "call_" + 24 random letters and digits
  std::string name;
  std::string arguments;  // JSON text (an object as the model wrote it, compact)
};

// "call_" + 24 random characters of [A-Za-z0-9].
std::string new_tool_call_id();

// The model's output split into content and tool calls, fed as it is generated.
//   - A block is "<tool_call>" ... "</tool_call>" whose inside (whitespace trimmed) is a JSON
//     object {"name": one of the tools, "arguments": a JSON object (or a string holding
//     one)}. Anything else, an unterminated block included, stays text (content).
//   - Whitespace right before and right after a valid block is dropped, and, once a call was
//     found, whitespace at the end; text without a valid block is content byte for byte.
//   - After max_calls calls the rest of the output is dropped.
// Content is released as soon as it cannot be the start of a block; a block when it is complete.
class ToolCallParser {
 public:
  struct Event {
    std::string content;           // text to add to the message's content, or
    std::optional<ToolCall> call;  // a complete call
  };
  ToolCallParser(std::vector<std::string> names, size_t max_calls);
  void feed(std::string_view text, std::vector<Event>& out);
  void finish(std::vector<Event>& out);  // the end of the output: releases what was held
  size_t calls() const { return calls_; }

 private:
  void content(std::string_view text, std::vector<Event>& out);
  void raw(std::string_view text, std::vector<Event>& out);
  std::optional<ToolCall> parse_block(std::string_view inner) const;

  std::vector<std::string> names_;
  size_t max_calls_;
  size_t calls_ = 0;
  std::string buf_;           // text not yet judged
  bool in_block_ = false;     // buf_ is inside a block (its "<tool_call>" consumed)
  std::string held_ws_;       // trailing whitespace of the content so far: may precede a block
  bool after_block_ = false;  // whitespace right after a block is dropped
};

// Whole output -> content (empty when none) and calls, as the stream would release them.
struct ParsedOutput {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedOutput parse_tool_output(std::string_view text, const ToolRequest& request);

}  // namespace nanoinfer::serve
