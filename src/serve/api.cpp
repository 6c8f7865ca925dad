#include "serve/api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace nanoinfer::serve {

using json = nlohmann::json;

namespace {

// Text the tokenizer produced is valid UTF-8, but a request may echo anything: replace rather
// than throw when dumping.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void wrong_type(std::string_view field, std::string_view expected, const json& v) {
  bad_request("invalid_type", fmt::format("'{}' must be {}, got {}", field, expected, type_name(v)));
}

// A field that is absent or null is unset.
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

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
    if (!part.is_object() || !part.contains("type") || part.at("type") != "text" ||
        !part.contains("text") || !part.at("text").is_string()) {
      bad_request("invalid_value", fmt::format("{} parts must be {{\"type\": \"text\", \"text\": string}}", where));
    }
    text += part.at("text").get<std::string>();
  }
  return text;
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
    const json* role = field(m, "role");
    if (!role || !role->is_string()) bad_request("invalid_value", fmt::format("messages[{}].role must be a string", i));
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant") {
      bad_request("invalid_value",
                  fmt::format("messages[{}].role must be system, user or assistant, got '{}'", i, r));
    }
    const json* content = field(m, "content");
    if (!content) bad_request("invalid_value", fmt::format("messages[{}].content is required", i));
    messages.push_back({r, message_content(*content, i)});
  }
  return messages;
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

}  // namespace

std::string one_line(std::string_view message) {
  // A request can echo megabytes into a message (a model name, a role): 2 KiB is plenty.
  constexpr size_t kMax = 2048;
  std::string out;
  out.reserve(std::min(message.size(), kMax + 16));
  for (const char c : message) {
    if (out.size() >= kMax) {
      // Cut at a character boundary.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
      out += "... (cut)";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out;
}

void bad_request(std::string_view code, const std::string& message) {
  throw ApiError(400, "invalid_request_error", std::string(code), message);
}

CompletionRequest parse_request(std::string_view body_text, Endpoint endpoint) {
  json body;
  try {
    body = json::parse(body_text);
  } catch (const json::exception& e) {
    bad_request("invalid_json", fmt::format("the body is not valid JSON: {}", e.what()));
  }
  if (!body.is_object()) bad_request("invalid_json", fmt::format("the body must be a JSON object, got {}", type_name(body)));

  CompletionRequest r;
  r.endpoint = endpoint;
  if (endpoint == Endpoint::Chat) {
    r.messages = parse_messages(body);
  } else {
    const json* p = field(body, "prompt");
    if (!p) bad_request("missing_field", "'prompt' is required");
    if (!p->is_string()) wrong_type("prompt", "a string", *p);
    r.prompt = p->get<std::string>();
    if (r.prompt.empty()) bad_request("invalid_value", "'prompt' must not be empty");
  }
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
  SamplingOverrides& s = r.sampling;
  s.temperature = number_field(body, "temperature");
  check_range(s.temperature, "temperature", 0, false, INFINITY);
  s.top_p = number_field(body, "top_p");
  check_range(s.top_p, "top_p", 0, true, 1);
  s.min_p = number_field(body, "min_p");
  check_range(s.min_p, "min_p", 0, false, 1);
  s.repetition_penalty = number_field(body, "repetition_penalty");
  check_range(s.repetition_penalty, "repetition_penalty", 0, true, INFINITY);
  s.top_k = integer_field(body, "top_k");
  if (s.top_k && *s.top_k < 0) bad_request("invalid_value", fmt::format("'top_k' must be >= 0, got {}", *s.top_k));
  if (auto seed = integer_field(body, "seed")) {
    // OpenAI's seed is any integer; negative ones map onto the upper half of the 64-bit range.
    s.seed = static_cast<uint64_t>(*seed);
  }
  r.stop = parse_stop(body);
  if (const json* t = field(body, "return_token_ids")) {
    if (!t->is_boolean()) wrong_type("return_token_ids", "a boolean", *t);
    r.return_token_ids = t->get<bool>();
    if (r.return_token_ids && r.stream) {
      bad_request("unsupported_value", "'return_token_ids' is supported only without 'stream'");
    }
  }
  return r;
}

std::string error_json(const ApiError& error) {
  return dump({{"error", {{"message", error.what()}, {"type", error.type}, {"code", error.code}}}});
}

std::string_view finish_reason_name(FinishReason reason) {
  return reason == FinishReason::Stop ? "stop" : "length";
}

namespace {

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json head(Endpoint endpoint, const ResponseId& id, bool chunk) {
  const char* object = endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                                  : "text_completion";
  return {{"id", id.id}, {"object", object}, {"created", id.created}, {"model", id.model}};
}

}  // namespace

std::string response_json(Endpoint endpoint, const ResponseId& id, std::string_view text,
                          FinishReason finish, const Usage& usage, const TokenIds* ids) {
  json j = head(endpoint, id, false);
  json choice = {{"index", 0}, {"finish_reason", finish_reason_name(finish)}};
  if (endpoint == Endpoint::Chat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  if (ids) {
    choice["prompt_token_ids"] = ids->prompt;
    choice["token_ids"] = ids->completion;
  }
  j["choices"] = json::array({choice});
  j["usage"] = usage_json(usage);
  return dump(j);
}

std::string chunk_json(Endpoint endpoint, const ResponseId& id, const ChunkParts& parts) {
  json j = head(endpoint, id, true);
  if (parts.usage) {
    j["choices"] = json::array();
    j["usage"] = usage_json(*parts.usage);
    return dump(j);
  }
  json choice = {{"index", 0}};
  choice["finish_reason"] = parts.finish ? json(finish_reason_name(*parts.finish)) : json(nullptr);
  if (endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (parts.role) delta["role"] = "assistant";
    if (!parts.text.empty() || parts.role) delta["content"] = parts.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = parts.text;
    choice["logprobs"] = nullptr;
  }
  j["choices"] = json::array({choice});
  return dump(j);
}

std::string models_json(std::string_view model_id, int64_t created) {
  return dump({{"object", "list"},
               {"data", json::array({{{"id", model_id}, {"object", "model"}, {"created", created},
                                      {"owned_by", "nanoinfer"}}})}});
}

}  // namespace nanoinfer::serve
