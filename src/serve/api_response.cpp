// The response side of the OpenAI API (serve/api.h): error, completion, chunk and model-list
// JSON, usage, logprobs and tool calls as OpenAI shapes them. The request side is api.cpp.
#include <nlohmann/json.hpp>

#include <random>
#include <string>

#include "serve/api.h"

namespace nanoinfer::serve {

using json = nlohmann::json;

namespace {

// Text the tokenizer produced is valid UTF-8, but a request may echo anything: replace rather
// than throw when dumping.
std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string error_json(const ApiError& error) {
  return dump({{"error", {{"message", error.what()}, {"type", error.type}, {"code", error.code}}}});
}

std::string_view finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop:
      return "stop";
    case FinishReason::Length:
      return "length";
    case FinishReason::ToolCalls:
      return "tool_calls";
  }
  return "stop";
}

namespace {

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

json bytes_of(std::string_view token) {
  json b = json::array();
  for (char c : token) b.push_back(static_cast<unsigned char>(c));
  return b;
}

// OpenAI's chat shape: {"content": [{token, logprob, bytes, top_logprobs: [...]}], "refusal": null}.
json chat_logprobs(const std::vector<TokenLogprob>& lps) {
  json content = json::array();
  for (const TokenLogprob& t : lps) {
    json top = json::array();
    for (const auto& [tok, lp] : t.top) top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", bytes_of(tok)}});
    content.push_back(
        {{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_of(t.token)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

// The legacy completions shape: parallel lists, text_offset in bytes of the text.
json completion_logprobs(const std::vector<TokenLogprob>& lps, size_t offset) {
  json tokens = json::array(), logprobs = json::array(), top = json::array(), offsets = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    logprobs.push_back(t.logprob);
    json alts = json::object();
    for (const auto& [tok, lp] : t.top) alts[tok] = lp;
    top.push_back(alts);
    offsets.push_back(offset);
    offset += t.token.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json tool_call_json(const ToolCall& c) {
  return {{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
}

json head(Endpoint endpoint, const ResponseId& id, bool chunk) {
  const char* object =
      endpoint == Endpoint::Chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", id.id}, {"object", object}, {"created", id.created}, {"model", id.model}};
}

}  // namespace

std::string response_json(Endpoint endpoint, const ResponseId& id, std::string_view text, FinishReason finish,
                          const Usage& usage, const TokenIds* ids, const std::vector<TokenLogprob>* logprobs,
                          const std::vector<ToolCall>* tool_calls, std::string_view reasoning) {
  json j = head(endpoint, id, false);
  json choice = {{"index", id.choice}, {"finish_reason", finish_reason_name(finish)}};
  if (endpoint == Endpoint::Chat) {
    const bool calls = tool_calls && !tool_calls->empty();
    choice["message"] = {{"role", "assistant"}, {"content", calls && text.empty() ? json(nullptr) : json(text)}};
    if (!reasoning.empty()) choice["message"]["reasoning_content"] = reasoning;
    if (calls) {
      json list = json::array();
      for (const ToolCall& c : *tool_calls) list.push_back(tool_call_json(c));
      choice["message"]["tool_calls"] = list;
    }
    choice["logprobs"] = logprobs ? chat_logprobs(*logprobs) : json(nullptr);
  } else {
    choice["text"] = text;
    choice["logprobs"] = logprobs ? completion_logprobs(*logprobs, 0) : json(nullptr);
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
  json choice = {{"index", id.choice}};
  choice["finish_reason"] = parts.finish ? json(finish_reason_name(*parts.finish)) : json(nullptr);
  if (endpoint == Endpoint::Chat) {
    json delta = json::object();
    if (parts.role) delta["role"] = "assistant";
    if (!parts.text.empty() || parts.role) delta["content"] = parts.text;
    if (!parts.reasoning.empty()) delta["reasoning_content"] = parts.reasoning;
    if (parts.tool_call) {
      json call = tool_call_json(*parts.tool_call);
      call["index"] = parts.tool_index;
      delta["tool_calls"] = json::array({call});
    }
    choice["delta"] = delta;
    choice["logprobs"] = parts.logprobs ? chat_logprobs(*parts.logprobs) : json(nullptr);
  } else {
    choice["text"] = parts.text;
    choice["logprobs"] = parts.logprobs ? completion_logprobs(*parts.logprobs, parts.text_offset) : json(nullptr);
  }
  j["choices"] = json::array({choice});
  return dump(j);
}

namespace {

json model_object(std::string_view model_id, int64_t created) {
  return {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "nanoinfer"}};
}

}  // namespace

std::string models_json(std::string_view model_id, int64_t created) {
  return dump({{"object", "list"}, {"data", json::array({model_object(model_id, created)})}});
}

// OpenAI's model object and whether the model is loaded now.
json listed_model(const ModelListing& m, int64_t created) {
  json o = model_object(m.id, created);
  o["loaded"] = m.loaded;
  return o;
}

std::string model_json(const ModelListing& model, int64_t created) {
  return dump(listed_model(model, created));
}

std::string random_id(std::string_view prefix) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id(prefix);
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

std::string models_json(std::span<const ModelListing> models, int64_t created) {
  json data = json::array();
  for (const ModelListing& m : models) data.push_back(listed_model(m, created));
  return dump({{"object", "list"}, {"data", data}});
}

}  // namespace nanoinfer::serve
