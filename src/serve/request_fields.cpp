#include "serve/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace nanoinfer::serve {

using json = nlohmann::json;

namespace {

enum Where : unsigned { kChat = 1, kCompletion = 2, kBoth = 3 };

struct KnownField {
  std::string_view name;
  unsigned where;
};

// Every field the two endpoints know (OpenAI's reference and nanoinfer's extensions; the table
// in docs/SERVING.md says what each does). Refused ones are listed so the refusal names why.
constexpr KnownField kKnownFields[] = {
    {"model", kBoth},
    {"messages", kChat},
    {"prompt", kCompletion},
    {"stream", kBoth},
    {"stream_options", kBoth},
    {"max_tokens", kBoth},
    {"max_completion_tokens", kChat},
    {"temperature", kBoth},
    {"top_p", kBoth},
    {"n", kBoth},
    {"stop", kBoth},
    {"seed", kBoth},
    {"frequency_penalty", kBoth},
    {"presence_penalty", kBoth},
    {"logit_bias", kBoth},
    {"logprobs", kBoth},
    {"top_logprobs", kChat},
    {"response_format", kBoth},
    {"tools", kBoth},
    {"tool_choice", kBoth},
    {"parallel_tool_calls", kBoth},
    {"functions", kChat},
    {"function_call", kChat},
    {"modalities", kChat},
    {"audio", kChat},
    {"prediction", kChat},
    {"reasoning_effort", kChat},
    {"verbosity", kChat},
    {"web_search_options", kChat},
    {"best_of", kCompletion},
    {"echo", kCompletion},
    {"suffix", kCompletion},
    // Accepted and ignored: identify the caller or steer OpenAI's storage, caching and billing;
    // none changes the tokens generated.
    {"user", kBoth},
    {"safety_identifier", kChat},
    {"prompt_cache_key", kChat},
    {"prompt_cache_retention", kChat},
    {"metadata", kChat},
    {"store", kChat},
    {"service_tier", kChat},
    // Extensions (llama-server's, vLLM's).
    {"top_k", kBoth},
    {"min_p", kBoth},
    {"repetition_penalty", kBoth},
    {"grammar", kBoth},
    {"return_token_ids", kBoth},
    {"chat_template_kwargs", kChat},
};

void check_string(const json& body, const char* name) {
  if (const json* v = field(body, name); v && !v->is_string()) wrong_type(name, "a string", *v);
}

// The ignored fields' shapes: a client that sends a malformed one gets told, as OpenAI would.
void check_ignored(const json& body) {
  for (const char* name : {"user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention", "service_tier"}) {
    check_string(body, name);
  }
  if (const json* s = field(body, "store"); s && !s->is_boolean()) wrong_type("store", "a boolean", *s);
  if (const json* m = field(body, "metadata")) {
    if (!m->is_object()) wrong_type("metadata", "an object of strings", *m);
    if (m->size() > 16) bad_request("invalid_value", fmt::format("'metadata' holds {} keys; at most 16", m->size()));
    for (const auto& [key, value] : m->items()) {
      if (!value.is_string()) wrong_type(fmt::format("metadata.{}", key), "a string", value);
    }
  }
}

}  // namespace

const char* json_type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

void wrong_type(std::string_view name, std::string_view expected, const json& v) {
  bad_request("invalid_type", fmt::format("'{}' must be {}, got {}", name, expected, json_type_name(v)));
}

void unsupported_field(std::string_view name, std::string_view why) {
  bad_request("unsupported_field", fmt::format("'{}' is not supported: {}", name, why));
}

const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

void check_request_fields(const json& body, Endpoint endpoint) {
  const unsigned here = endpoint == Endpoint::Chat ? kChat : kCompletion;
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& name = it.key();
    const auto known = std::find_if(std::begin(kKnownFields), std::end(kKnownFields),
                                    [&](const KnownField& f) { return f.name == name; });
    if (known == std::end(kKnownFields) || (known->where & here) == 0) {
      bad_request("unknown_field", fmt::format("Unrecognized request argument supplied: {}", name));
    }
  }
  for (const char* name : {"functions", "function_call"}) {
    if (field(body, name)) unsupported_field(name, "the deprecated functions API is not implemented; use 'tools'");
  }
  for (const char* name : {"prediction", "audio", "web_search_options"}) {
    if (field(body, name)) unsupported_field(name, "not implemented");
  }
  if (field(body, "reasoning_effort")) {
    unsupported_field("reasoning_effort",
                      "effort levels are not implemented; a reasoning model thinks or not "
                      "(chat_template_kwargs.enable_thinking)");
  }
  // "medium" is OpenAI's default: asking for it changes nothing.
  if (const json* v = field(body, "verbosity"); v && *v != "medium") unsupported_field("verbosity", "only \"medium\"");
  if (endpoint == Endpoint::Completion) {
    for (const char* name : {"tools", "tool_choice", "parallel_tool_calls"}) {
      if (field(body, name)) unsupported_field(name, "tools are a chat completions feature");
    }
  }
  if (const json* m = field(body, "modalities"); m && *m != json::array({"text"})) {
    unsupported_field("modalities", "only [\"text\"]");
  }
  if (endpoint == Endpoint::Completion) {
    if (const json* b = field(body, "best_of"); b && *b != 1) unsupported_field("best_of", "one candidate per request");
    if (const json* e = field(body, "echo"); e && *e != false) unsupported_field("echo", "not implemented");
    if (const json* x = field(body, "suffix"); x && *x != "") unsupported_field("suffix", "not implemented");
  }
  check_ignored(body);
}

void check_message_fields(const json& message, size_t index) {
  for (const auto& [key, value] : message.items()) {
    if (key == "role" || key == "content" || key == "tool_calls" || key == "tool_call_id" ||
        key == "reasoning_content") {
      continue;
    }
    // Rendered by no supported template (Hugging Face's templates do not either): accepted.
    if (key == "name" || key == "refusal") {
      if (!value.is_null() && !value.is_string())
        wrong_type(fmt::format("messages[{}].{}", index, key), "a string", value);
      continue;
    }
    if ((key == "function_call" || key == "audio") && !value.is_null()) {
      unsupported_field(fmt::format("messages[{}].{}", index, key), "not implemented");
    }
    if (key == "function_call" || key == "audio") continue;
    bad_request("unknown_field", fmt::format("Unrecognized request argument supplied: messages[{}].{}", index, key));
  }
}

}  // namespace nanoinfer::serve
