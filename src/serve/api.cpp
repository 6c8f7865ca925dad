// The request side of the OpenAI API (serve/api.h): parsing and validating a completion
// request into CompletionRequest. The response JSON is api_response.cpp.
#include "serve/api.h"

#include <fmt/format.h>
#include <malloc.h>

#include <chrono>
#include <optional>
#include <semaphore>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "nanoinfer/error.h"
#include "nanoinfer/json_limits.h"
#include "serve/request_fields.h"

namespace nanoinfer::serve {

using json = nlohmann::json;

namespace {

// The sampling values a request may ask for (see parse_request).
constexpr double kMinTemperature = 1e-5;  // besides 0, greedy
constexpr double kMinRepetitionPenalty = 0.01, kMaxRepetitionPenalty = 100;

std::optional<double> number_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double d = v->get<double>();
  if (!std::isfinite(d)) bad_request("invalid_value", fmt::format("'{}' must be finite", name));
  return d;
}

std::optional<int64_t> integer_field(const json& body, const char* name) {
  const json* v = field(body, name);
  if (!v) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad_request("invalid_value", fmt::format("'{}' is too large", name));
    }
    return v->get<int64_t>();
  }
  // 16.0 is an integer written as a float; 16.5 is not.
  if (v->is_number_float() && std::nearbyint(v->get<double>()) == v->get<double>() &&
      std::fabs(v->get<double>()) < 9e15) {
    return static_cast<int64_t>(v->get<double>());
  }
  wrong_type(name, "an integer", *v);
}

void check_range(std::optional<double> v, const char* name, double lo, bool lo_open, double hi) {
  if (!v) return;
  if (*v < lo || (lo_open && *v == lo) || *v > hi) {
    const std::string range = std::isinf(hi) ? fmt::format("{} {}", lo_open ? ">" : ">=", lo)
                                             : fmt::format("in {}{}, {}]", lo_open ? "(" : "[", lo, hi);
    bad_request("invalid_value", fmt::format("'{}' must be {}, got {}", name, range, *v));
  }
}

// OpenAI content: a string, or an array of {"type": "text", "text": ...} parts.
std::string message_content(const json& content, size_t index) {
  const std::string where = fmt::format("messages[{}].content", index);
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(where, "a string or an array of text parts", content);
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || !part.contains("type") || part.at("type") != "text" || !part.contains("text") ||
        !part.at("text").is_string()) {
      bad_request("invalid_value", fmt::format("{} parts must be {{\"type\": \"text\", \"text\": string}}", where));
    }
    text += part.at("text").get<std::string>();
  }
  return text;
}

// An assistant turn's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}],
// arguments a string of JSON (OpenAI's shape), rendered as the template's tojson writes it.
std::vector<ChatToolCall> parse_tool_calls(const json& calls, size_t index) {
  const std::string where = fmt::format("messages[{}].tool_calls", index);
  if (!calls.is_array()) wrong_type(where, "an array", calls);
  std::vector<ChatToolCall> out;
  for (size_t k = 0; k < calls.size(); ++k) {
    const std::string at = fmt::format("{}[{}]", where, k);
    const json& c = calls[k];
    if (!c.is_object()) wrong_type(at, "an object", c);
    if (const json* t = field(c, "type"); t && *t != "function") {
      bad_request("invalid_value", fmt::format("{}.type must be \"function\"", at));
    }
    if (const json* id = field(c, "id"); id && !id->is_string()) wrong_type(at + ".id", "a string", *id);
    const json* f = field(c, "function");
    if (!f || !f->is_object()) bad_request("invalid_value", fmt::format("{}.function must be an object", at));
    const json* name = field(*f, "name");
    if (!name || !name->is_string() || name->get<std::string>().empty()) {
      bad_request("invalid_value", fmt::format("{}.function.name must be a non-empty string", at));
    }
    const json* args = field(*f, "arguments");
    if (!args || !args->is_string()) {
      bad_request("invalid_value", fmt::format("{}.function.arguments must be a string of JSON", at));
    }
    try {
      check_json_depth(args->get<std::string>(), at + ".function.arguments");
    } catch (const Error& e) {
      bad_request("invalid_value", e.what());
    }
    const auto parsed = nlohmann::ordered_json::parse(args->get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) {
      bad_request("invalid_value", fmt::format("{}.function.arguments is not valid JSON", at));
    }
    out.push_back({name->get<std::string>(), template_json(parsed)});
  }
  return out;
}

std::vector<ChatMessage> parse_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v) bad_request("missing_field", "'messages' is required");
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  if (v->empty()) bad_request("invalid_value", "'messages' must not be empty");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    if (!m.is_object()) wrong_type(fmt::format("messages[{}]", i), "an object", m);
    check_message_fields(m, i);
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad_request("invalid_value", fmt::format("messages[{}].role must be a string", i));
    std::string r = role->get<std::string>();
    // OpenAI's newer name for the system role ("developer" messages give the instructions);
    // Qwen2.5's template knows only system.
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      bad_request("invalid_value",
                  fmt::format("messages[{}].role must be system, developer, user, assistant or tool, got '{}'", i, r));
    }
    ChatMessage message{r, {}, {}};
    if (const json* calls = field(m, "tool_calls")) {
      if (r != "assistant")
        bad_request("invalid_value", fmt::format("messages[{}].tool_calls: only assistant messages make calls", i));
      message.tool_calls = parse_tool_calls(*calls, i);
    }
    if (r == "tool") {
      // Not rendered (the template matches results to calls by order), but OpenAI requires it.
      const json* id = field(m, "tool_call_id");
      if (!id || !id->is_string())
        bad_request("invalid_value", fmt::format("messages[{}].tool_call_id is required (a string)", i));
    }
    const json* content = field(m, "content");
    const json* reasoning = field(m, "reasoning_content");
    if (content) {
      message.content = message_content(*content, i);
    } else if (message.tool_calls.empty() && !(reasoning && r == "assistant")) {
      bad_request("invalid_value", fmt::format("messages[{}].content is required{}", i,
                                               r == "assistant" ? " (it may be null only with tool_calls)" : ""));
    }
    if (reasoning) {
      // What a reply's reasoning_content came back as: the template's own think block, which
      // it keeps for the turns after the last user query (and drops before).
      if (r != "assistant")
        bad_request("invalid_value", fmt::format("messages[{}].reasoning_content: only assistant messages reason", i));
      if (!reasoning->is_string()) wrong_type(fmt::format("messages[{}].reasoning_content", i), "a string", *reasoning);
      message.content = "<think>\n" + reasoning->get<std::string>() + "\n</think>\n\n" + message.content;
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

// tools, tool_choice, parallel_tool_calls. `ordered`: the body in document order (a tool is
// rendered with its keys as the client wrote them, as the template's tojson does).
ToolRequest parse_tools(const json& body, std::string_view body_text) {
  ToolRequest t;
  const json* tools = field(body, "tools");
  if (tools) {
    if (!tools->is_array()) wrong_type("tools", "an array", *tools);
    if (tools->size() > 128)
      bad_request("invalid_value", fmt::format("'tools' holds {} functions; at most 128", tools->size()));
  }
  if (tools && !tools->empty()) {
    try {
      check_depth(*tools, "'tools'");
    } catch (const Error& e) {
      bad_request("invalid_value", e.what());
    }
    const auto ordered = nlohmann::ordered_json::parse(body_text).at("tools");
    if (!ordered.is_array() || ordered.size() != tools->size()) bad_request("invalid_value", "'tools' is given twice");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string at = fmt::format("tools[{}]", i);
      const json& tool = (*tools)[i];
      if (!tool.is_object()) wrong_type(at, "an object", tool);
      const json* type = field(tool, "type");
      if (!type || *type != "function") bad_request("invalid_value", fmt::format("{}.type must be \"function\"", at));
      const json* f = field(tool, "function");
      if (!f || !f->is_object()) bad_request("invalid_value", fmt::format("{}.function must be an object", at));
      const json* name = field(*f, "name");
      if (!name || !name->is_string())
        bad_request("invalid_value", fmt::format("{}.function.name is required (a string)", at));
      const std::string n = name->get<std::string>();
      const bool valid = !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
      if (!valid)
        bad_request("invalid_value",
                    fmt::format("{}.function.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -, got '{}'", at, n));
      for (const ToolDef& d : t.tools) {
        if (d.name == n) bad_request("invalid_value", fmt::format("'tools' defines the function '{}' twice", n));
      }
      if (const json* d = field(*f, "description"); d && !d->is_string())
        wrong_type(at + ".function.description", "a string", *d);
      const json* params = field(*f, "parameters");
      if (params && !params->is_object()) wrong_type(at + ".function.parameters", "an object (a JSON Schema)", *params);
      if (const json* st = field(*f, "strict"); st && !st->is_boolean())
        wrong_type(at + ".function.strict", "a boolean", *st);
      ToolDef def{n, template_json(ordered.at(i)), {}};
      if (params) def.parameters = ordered.at(i).at("function").at("parameters").dump();
      t.tools.push_back(std::move(def));
    }
  }
  t.choice = t.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  if (const json* c = field(body, "tool_choice")) {
    if (c->is_string()) {
      const std::string s = c->get<std::string>();
      if (s == "none") {
        t.choice = ToolChoice::None;
      } else if (s == "auto" || s == "required") {
        if (t.tools.empty()) {
          if (s == "required") bad_request("invalid_value", "'tool_choice' \"required\" needs 'tools'");
        } else {
          t.choice = s == "auto" ? ToolChoice::Auto : ToolChoice::Required;
        }
      } else {
        bad_request("invalid_value",
                    fmt::format("'tool_choice' must be none, auto, required or {{\"type\": \"function\", "
                                "\"function\": {{\"name\": ...}}}}, got '{}'",
                                s));
      }
    } else if (c->is_object()) {
      const json* f = field(*c, "function");
      const json* name = f && f->is_object() ? field(*f, "name") : nullptr;
      if (field(*c, "type") == nullptr || *field(*c, "type") != "function" || !name || !name->is_string()) {
        bad_request("invalid_value",
                    "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
      }
      t.named = name->get<std::string>();
      if (std::none_of(t.tools.begin(), t.tools.end(), [&](const ToolDef& d) { return d.name == t.named; })) {
        bad_request("invalid_value",
                    fmt::format("'tool_choice' names the function '{}', which 'tools' does not define", t.named));
      }
      t.choice = ToolChoice::Named;
    } else {
      wrong_type("tool_choice", "a string or an object", *c);
    }
  }
  if (const json* p = field(body, "parallel_tool_calls")) {
    if (!p->is_boolean()) wrong_type("parallel_tool_calls", "a boolean", *p);
    t.parallel = p->get<bool>();
  }
  // strict: the arguments are guaranteed to match the schema; only the grammar of required /
  // a named function guarantees it, never free output.
  if (t.choice == ToolChoice::Auto) {
    for (size_t i = 0; i < tools->size(); ++i) {
      if (const json* st = field((*tools)[i].at("function"), "strict"); st && *st == true) {
        unsupported_field(fmt::format("tools[{}].function.strict", i),
                          "true is enforced only with tool_choice \"required\" or a named function");
      }
    }
  }
  return t;
}

std::vector<std::string> parse_stop(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  std::vector<std::string> stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const json& s : *v) {
      if (!s.is_string()) wrong_type("stop", "a string or an array of strings", *v);
      stops.push_back(s.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", *v);
  }
  if (stops.size() > 16) bad_request("invalid_value", fmt::format("'stop' holds {} strings; at most 16", stops.size()));
  for (const std::string& s : stops) {
    if (s.empty()) bad_request("invalid_value", "'stop' strings must not be empty");
  }
  return stops;
}

// Grammars compile two at a time, whatever the number of handler threads, and a large one
// hands its freed memory back to the system when it is done: each handler thread allocates
// from its own malloc arena, which kept a large compile's transient memory (~110 MB for a
// 100,000-string enum) after it was freed, on every thread that had compiled one
// (docs/SERVING.md, "Facing the internet", states the bound). Waiting for a slot asks
// `cancelled` too.
class CompileSlot {
 public:
  explicit CompileSlot(const std::function<bool()>& cancelled) {
    while (!slots().try_acquire_for(std::chrono::milliseconds(50))) {
      if (cancelled && cancelled())
        bad_request("cancelled", "the request was cancelled while waiting to compile its grammar");
    }
    held_ = true;
  }
  ~CompileSlot() { release(0); }
  CompileSlot(const CompileSlot&) = delete;
  CompileSlot& operator=(const CompileSlot&) = delete;
  void release(uint64_t steps) {
    if (!held_) return;
    held_ = false;
    if (steps > kTrimAfterSteps) ::malloc_trim(0);
    slots().release();
  }

 private:
  static constexpr uint64_t kTrimAfterSteps = 1u << 22;
  static std::counting_semaphore<>& slots() {
    static std::counting_semaphore<> s(2);
    return s;
  }
  bool held_ = false;
};

// The grammar compiled and probed (Grammar::probe), or a 400 `code` whose message starts with `what`.
std::shared_ptr<const Grammar> compile_grammar(const std::string& gbnf, GrammarBudget& budget, const char* code,
                                               std::string_view what = "") {
  try {
    auto grammar = std::make_shared<const Grammar>(Grammar::from_gbnf(gbnf, "root", &budget));
    grammar->probe(budget);
    return grammar;
  } catch (const Error& e) {
    bad_request(code, fmt::format("{}{}", what, e.what()));
  }
}

std::shared_ptr<const Grammar> parse_grammar(const json& body, std::string_view body_text, GrammarBudget& budget) {
  std::string gbnf;
  bool from_schema = false;
  const json* rf = field(body, "response_format");
  if (rf) {
    if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
    const json* type = field(*rf, "type");
    if (!type || !type->is_string()) bad_request("invalid_value", "'response_format.type' must be a string");
    const std::string t = type->get<std::string>();
    if (t == "json_object") {
      gbnf = json_object_gbnf();
    } else if (t == "json_schema") {
      const json* js = field(*rf, "json_schema");
      if (!js || !js->is_object()) bad_request("invalid_value", "'response_format.json_schema' must be an object");
      if (const json* n = field(*js, "name"); n && !n->is_string())
        wrong_type("response_format.json_schema.name", "a string", *n);
      if (const json* st = field(*js, "strict"); st && !st->is_boolean()) {
        wrong_type("response_format.json_schema.strict", "a boolean", *st);
      }
      const json* schema = field(*js, "schema");
      if (!schema) bad_request("missing_field", "'response_format.json_schema.schema' is required");
      try {
        check_depth(*schema, "'response_format.json_schema.schema'");  // dump() and the compiler recurse
      } catch (const Error& e) {
        bad_request("invalid_schema", e.what());
      }
      try {
        // Re-read in document order: properties are generated in the order the schema lists them.
        const auto ordered = nlohmann::ordered_json::parse(body_text);
        gbnf = json_schema_to_gbnf(ordered.at("response_format").at("json_schema").at("schema").dump(), &budget);
      } catch (const Error& e) {
        bad_request("invalid_schema", fmt::format("response_format.json_schema.schema: {}", e.what()));
      }
      from_schema = true;
    } else if (t != "text") {
      bad_request("invalid_value",
                  fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'", t));
    }
  }
  if (const json* g = field(body, "grammar")) {
    if (!g->is_string()) wrong_type("grammar", "a string (GBNF)", *g);
    if (!gbnf.empty()) bad_request("invalid_value", "'grammar' and a JSON 'response_format' cannot be combined");
    gbnf = g->get<std::string>();
    // An empty grammar is not "no grammar": that is leaving the field out (or null).
    if (gbnf.find_first_not_of(" \t\r\n") == std::string::npos) {
      bad_request("invalid_grammar", "'grammar' is empty: give GBNF rules, or leave the field out");
    }
  }
  if (gbnf.empty()) return nullptr;
  return compile_grammar(gbnf, budget, from_schema ? "invalid_schema" : "invalid_grammar",
                         from_schema ? "response_format.json_schema.schema: " : "");
}

// chat_template_kwargs (vLLM's and llama-server's): the template's variables. Qwen3's
// enable_thinking is the one the templates here read; any other would be silently unused.
std::optional<bool> parse_template_kwargs(const json& body) {
  const json* kw = field(body, "chat_template_kwargs");
  if (!kw) return std::nullopt;
  if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
  std::optional<bool> thinking;
  for (const auto& [key, value] : kw->items()) {
    if (key != "enable_thinking") {
      unsupported_field(fmt::format("chat_template_kwargs.{}", key), "the chat templates read only enable_thinking");
    }
    if (!value.is_boolean()) wrong_type("chat_template_kwargs.enable_thinking", "a boolean", value);
    thinking = value.get<bool>();
  }
  return thinking;
}

// One prompt of a completion: a string or an array of token ids, into `text` or `ids`.
void parse_one_prompt(const json& one, std::string& text, std::vector<int32_t>& ids) {
  if (one.is_string()) {
    text = one.get<std::string>();
    if (text.empty()) bad_request("invalid_value", "'prompt' must not be empty");
    return;
  }
  const bool token_ids = one.is_array() && !one.empty() &&
                         std::all_of(one.begin(), one.end(), [](const json& x) { return x.is_number_integer(); });
  if (!token_ids) wrong_type("prompt", "a string, an array of token ids, or an array of either", one);
  for (const json& id : one) {
    const bool valid = id.is_number_unsigned() ? id.get<uint64_t>() <= INT32_MAX
                                               : id.get<int64_t>() >= 0 && id.get<int64_t>() <= INT32_MAX;
    if (!valid) bad_request("invalid_value", fmt::format("'prompt' holds {}, not a token id", id.dump()));
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
}

// A completion's prompt: a string, an array of token ids, or an array of several of either
// (OpenAI's batch: one choice per prompt, in order).
constexpr size_t kMaxBatchPrompts = 64;
void parse_prompt(const json& body, CompletionRequest& r) {
  const json* p = field(body, "prompt");
  if (!p) bad_request("missing_field", "'prompt' is required");
  const bool ids = p->is_array() && !p->empty() && (*p)[0].is_number_integer();
  if (!p->is_array() || ids) return parse_one_prompt(*p, r.prompt, r.prompt_ids);
  if (p->empty()) bad_request("invalid_value", "'prompt' must not be empty");
  if (p->size() == 1) return parse_one_prompt((*p)[0], r.prompt, r.prompt_ids);
  if (p->size() > kMaxBatchPrompts) {
    bad_request("invalid_value",
                fmt::format("'prompt' holds {} prompts; at most {} in one request", p->size(), kMaxBatchPrompts));
  }
  for (const json& one : *p) {
    CompletionRequest::Prompt& prompt = r.batch.emplace_back();
    parse_one_prompt(one, prompt.text, prompt.ids);
  }
}

}  // namespace

std::string one_line(std::string_view message) {
  // A request can echo megabytes into a message (a model name, a role): 2 KiB is plenty. The
  // message is cut before it is escaped (an escape is at most 4 bytes a byte), then again after.
  constexpr size_t kMax = 2048;
  std::string out = escape_control(message.substr(0, kMax + 1));
  if (message.size() > kMax || out.size() > kMax) {
    out.resize(std::min(out.size(), kMax));
    // Cut at a character boundary.
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
    if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
    out += "... (cut)";
  }
  return out;
}

void bad_request(std::string_view code, const std::string& message) {
  throw ApiError(400, "invalid_request_error", std::string(code), message);
}

CompletionRequest parse_request(std::string_view body_text, Endpoint endpoint, const std::function<bool()>& cancelled,
                                uint64_t grammar_steps) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    bad_request("invalid_json", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!body.is_object())
    bad_request("invalid_json", fmt::format("the body must be a JSON object, got {}", json_type_name(body)));
  // A schema or tools are read again in document order (ordered_json), whose parse is
  // quadratic in an object's members: charged to the grammar's budget before it runs.
  GrammarBudget budget(grammar_steps, cancelled);
  if (field(body, "response_format") || field(body, "tools")) {
    try {
      budget.charge(ordered_parse_cost(body_text) / 32);  // a comparison: ~1/32 of a step (json_schema.cpp)
    } catch (const Error& e) {
      bad_request("invalid_value", fmt::format("the schemas of the request are too large to read: {}", e.what()));
    }
  }

  CompletionRequest r;
  r.endpoint = endpoint;
  if (endpoint == Endpoint::Chat) {
    r.messages = parse_messages(body);
  } else {
    parse_prompt(body, r);
  }
  check_request_fields(body, endpoint);
  if (endpoint == Endpoint::Chat) r.enable_thinking = parse_template_kwargs(body);
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  if (const json* s = field(body, "stream")) {
    if (!s->is_boolean()) wrong_type("stream", "a boolean", *s);
    r.stream = s->get<bool>();
  }
  if (const json* so = field(body, "stream_options")) {
    if (!so->is_object()) wrong_type("stream_options", "an object", *so);
    for (const auto& [key, value] : so->items()) {
      if (key != "include_usage" && key != "include_obfuscation") {
        bad_request("unknown_field", fmt::format("Unrecognized request argument supplied: stream_options.{}", key));
      }
    }
    if (const json* iu = field(*so, "include_usage")) {
      if (!iu->is_boolean()) wrong_type("stream_options.include_usage", "a boolean", *iu);
      r.include_usage = iu->get<bool>();
    }
  }
  if (auto n = integer_field(body, "n"); n && *n != 1) {
    bad_request("invalid_value", fmt::format("'n' must be 1 (one choice per request), got {}", *n));
  }
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (auto v = integer_field(body, name)) {
      if (*v < 0) bad_request("invalid_value", fmt::format("'{}' must be >= 0, got {}", name, *v));
      r.max_tokens = r.max_tokens ? std::min(*r.max_tokens, *v) : *v;
    }
  }
  // Sampling works in doubles on float logits (finite, so |logit| <= FLT_MAX ~ 3.4e38): the
  // repetition penalty multiplies or divides a logit by at most 100, the OpenAI penalties and
  // logit_bias add at most 2 per occurrence and 100, and the temperature divides the result by
  // at least 1e-5, so every score stays below ~1e46, far inside a double: no value accepted
  // here can overflow at some later token. (Unbounded, a penalty of 1e308 or a temperature of
  // 1e-320 failed at the first generated token, a 500 after the request was accepted.)
  SamplingOverrides& s = r.sampling;
  s.temperature = number_field(body, "temperature");
  check_range(s.temperature, "temperature", 0, false, 2);  // OpenAI's range
  if (s.temperature && *s.temperature > 0 && *s.temperature < kMinTemperature) {
    bad_request("invalid_value", fmt::format("'temperature' must be 0 (greedy) or at least {}, got {}", kMinTemperature,
                                             *s.temperature));
  }
  s.top_p = number_field(body, "top_p");
  check_range(s.top_p, "top_p", 0, true, 1);
  s.min_p = number_field(body, "min_p");
  check_range(s.min_p, "min_p", 0, false, 1);
  s.repetition_penalty = number_field(body, "repetition_penalty");
  check_range(s.repetition_penalty, "repetition_penalty", kMinRepetitionPenalty, false, kMaxRepetitionPenalty);
  s.top_k = integer_field(body, "top_k");
  if (s.top_k && *s.top_k < 0) bad_request("invalid_value", fmt::format("'top_k' must be >= 0, got {}", *s.top_k));
  if (auto seed = integer_field(body, "seed")) {
    // OpenAI's seed is any integer; negative ones map onto the upper half of the 64-bit range.
    s.seed = static_cast<uint64_t>(*seed);
  }
  r.stop = parse_stop(body);
  std::optional<CompileSlot> compiling;
  if (field(body, "response_format") || field(body, "grammar") || field(body, "tools")) compiling.emplace(cancelled);
  r.grammar = parse_grammar(body, body_text, budget);
  if (endpoint == Endpoint::Chat) {
    r.tools = parse_tools(body, body_text);
    if (r.tools.choice == ToolChoice::Required || r.tools.choice == ToolChoice::Named) {
      if (r.grammar) {
        bad_request("invalid_value",
                    "tool_choice \"required\" or a named function constrains the output to tool calls: "
                    "it cannot be combined with a JSON 'response_format' or a 'grammar'");
      }
      std::string gbnf;
      try {
        gbnf = tool_call_gbnf(r.tools, &budget);
      } catch (const Error& e) {
        bad_request("invalid_schema", e.what());
      }
      r.grammar = compile_grammar(gbnf, budget, "invalid_schema");
    }
  }
  if (compiling) compiling->release(budget.used());
  if (endpoint == Endpoint::Chat) {
    bool want = false;
    if (const json* lp = field(body, "logprobs")) {
      if (!lp->is_boolean()) wrong_type("logprobs", "a boolean", *lp);
      want = lp->get<bool>();
    }
    const std::optional<int64_t> top = integer_field(body, "top_logprobs");
    if (top && (*top < 0 || *top > 20))
      bad_request("invalid_value", fmt::format("'top_logprobs' must be in [0, 20], got {}", *top));
    if (top && !want) bad_request("invalid_value", "'top_logprobs' needs 'logprobs': true");
    if (want) r.top_logprobs = static_cast<int>(top.value_or(0));
  } else {
    if (const std::optional<int64_t> lp = integer_field(body, "logprobs")) {
      if (*lp < 0 || *lp > 20) bad_request("invalid_value", fmt::format("'logprobs' must be in [0, 20], got {}", *lp));
      r.top_logprobs = static_cast<int>(*lp);
    }
  }
  for (auto [name, slot] :
       {std::pair{"frequency_penalty", &r.frequency_penalty}, std::pair{"presence_penalty", &r.presence_penalty}}) {
    const std::optional<double> v = number_field(body, name);
    check_range(v, name, -2, false, 2);
    if (v) *slot = *v;
  }
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) wrong_type("logit_bias", "an object of token id -> bias", *lb);
    for (const auto& [key, value] : lb->items()) {
      size_t used = 0;
      long long id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || key.empty() || id < 0 || id > std::numeric_limits<int32_t>::max()) {
        bad_request("invalid_value", fmt::format("'logit_bias' keys must be token ids, got '{}'", key));
      }
      if (!value.is_number()) wrong_type(fmt::format("logit_bias[\"{}\"]", key), "a number", value);
      const double b = value.get<double>();
      if (!(b >= -100 && b <= 100))
        bad_request("invalid_value", fmt::format("'logit_bias' values must be in [-100, 100], got {}", b));
      r.logit_bias[static_cast<int32_t>(id)] = b;
    }
  }
  if (const json* t = field(body, "return_token_ids")) {
    if (!t->is_boolean()) wrong_type("return_token_ids", "a boolean", *t);
    r.return_token_ids = t->get<bool>();
    if (r.return_token_ids && r.stream) {
      bad_request("unsupported_value", "'return_token_ids' is supported only without 'stream'");
    }
  }
  return r;
}

}  // namespace nanoinfer::serve
