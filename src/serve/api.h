// The OpenAI-style wire format of `nanoinfer serve`: request bodies parsed and validated into
// a CompletionRequest, and the JSON of responses, stream chunks and errors. No HTTP here: the
// functions take and return text, so every rule is tested without a socket.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/generation_config.h"
#include "nanoinfer/grammar.h"
#include "serve/tools.h"

namespace nanoinfer::serve {

// A request the server refuses: the HTTP status and OpenAI's error object
// {"error": {"message", "type", "code"}}.
// The message is kept to one line of at most ~2 KiB: control characters a request echoed into
// it are written as escapes (\n, \x01), and a longer message is cut.
std::string one_line(std::string_view message);

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, std::string code, const std::string& message)
      : std::runtime_error(one_line(message)), status(status), type(std::move(type)), code(std::move(code)) {}
  int status;
  std::string type;  // "invalid_request_error", "authentication_error", ...
  std::string code;  // "invalid_json", "invalid_value", "model_not_found", ...
};

// 400 invalid_request_error with the given code.
[[noreturn]] void bad_request(std::string_view code, const std::string& message);

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::vector<ChatMessage> messages;  // chat: system/user/assistant/tool turns, in order
  ToolRequest tools;                  // chat: tools, tool_choice, parallel_tool_calls
  std::string prompt;                 // completions: the text, or
  std::vector<int32_t> prompt_ids;    // completions: the token ids, when the prompt was given as ids
  // completions: OpenAI's array of several prompts, each generated as its own choice (index i);
  // empty for one prompt (`prompt` or `prompt_ids`).
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
  };
  std::vector<Prompt> batch;
  // chat_template_kwargs.enable_thinking (a reasoning model's template); unset: the server's default.
  std::optional<bool> enable_thinking;
  std::string model;  // "" when the request names none
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens; >= 0
  SamplingOverrides sampling;         // unset fields fall back to generation_config.json
  std::vector<std::string> stop;      // non-empty strings
  // vLLM's extension: the response's choice carries "prompt_token_ids" and "token_ids" (the
  // generated tokens, an end-of-sequence id not included). Not with stream (400).
  bool return_token_ids = false;
  // Constrained decoding: response_format json_object / json_schema, llama-server's "grammar"
  // (GBNF), or the calls of tool_choice required / a named function, compiled (a schema or
  // grammar the engine cannot enforce is a 400).
  std::shared_ptr<const Grammar> grammar;
  // logprobs: -1 off; else how many top alternatives each token lists (chat: logprobs=true and
  // top_logprobs 0..20; completions: logprobs 0..20).
  int top_logprobs = -1;
  double frequency_penalty = 0;  // [-2, 2], OpenAI's definitions
  double presence_penalty = 0;
  std::map<int32_t, double> logit_bias;  // token id -> [-100, 100]
};

// Parses a request body. Throws ApiError (400) naming the first problem: malformed JSON, a
// non-object body, a field of the wrong type, a value out of range, bad messages, n != 1.
// A grammar is compiled here, under a GrammarBudget of `grammar_steps` (a 400 past it) that
// asks `cancelled` (the client left, the server stops) as it goes, and probed for ambiguity
// (Grammar::probe): what a grammar can fail on is decided before the response starts.
CompletionRequest parse_request(std::string_view body, Endpoint endpoint, const std::function<bool()>& cancelled = {},
                                uint64_t grammar_steps = GrammarBudget::kDefaultSteps);

std::string error_json(const ApiError& error);

enum class FinishReason { Stop, Length, ToolCalls };
std::string_view finish_reason_name(FinishReason reason);  // "stop" / "length" / "tool_calls"

struct Usage {
  size_t prompt_tokens = 0;
  size_t completion_tokens = 0;
};

// Identity shared by every object of one response, and the choice its objects carry.
struct ResponseId {
  std::string id;       // "chatcmpl-..." / "cmpl-..."
  int64_t created = 0;  // unix seconds
  std::string model;
  size_t choice = 0;  // the choice's index: 0, or its prompt's in an array of prompts
};

// The token ids of return_token_ids.
struct TokenIds {
  std::vector<int32_t> prompt;
  std::vector<int32_t> completion;
};

// One generated token's log-probability (the model's log-softmax over the raw logits, before
// any logit processor or temperature) and its top alternatives.
struct TokenLogprob {
  std::string token;  // the token's bytes (may be part of a UTF-8 character)
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;
};

// The whole non-streaming response; `ids` adds the choice's "prompt_token_ids"/"token_ids";
// `logprobs` (when the request asked) the choice's "logprobs". `tool_calls` (chat, when the
// output was parsed for them): `text` is the content outside the calls, null when empty and
// there are calls; the message lists "tool_calls" when there are. `reasoning` (chat): the
// message's "reasoning_content", when not empty.
std::string response_json(Endpoint endpoint, const ResponseId& id, std::string_view text, FinishReason finish,
                          const Usage& usage, const TokenIds* ids = nullptr,
                          const std::vector<TokenLogprob>* logprobs = nullptr,
                          const std::vector<ToolCall>* tool_calls = nullptr, std::string_view reasoning = {});
// One server-sent event payload (without "data: "). Chat: a delta with the role (first chunk),
// content, or neither with a finish reason; completions: text and finish reason.
struct ChunkParts {
  bool role = false;
  std::string_view text;
  std::string_view reasoning;  // chat: delta.reasoning_content, when not empty
  std::optional<FinishReason> finish;
  std::optional<Usage> usage;                           // the extra usage chunk of stream_options.include_usage
  const std::vector<TokenLogprob>* logprobs = nullptr;  // tokens of this chunk, when asked
  size_t text_offset = 0;                               // completions: bytes of text streamed before this chunk
  // Chat: a whole tool call, as delta.tool_calls[{index, id, type, function: {name, arguments}}].
  const ToolCall* tool_call = nullptr;
  size_t tool_index = 0;
};
std::string chunk_json(Endpoint endpoint, const ResponseId& id, const ChunkParts& parts);

std::string models_json(std::string_view model_id, int64_t created);
// Every served model, in order, with whether it is loaded now ("loaded", beside OpenAI's fields).
struct ModelListing {
  std::string id;
  bool loaded = false;
};
std::string models_json(std::span<const ModelListing> models, int64_t created);

// One model object, as GET /v1/models/{id} answers.
std::string model_json(const ModelListing& model, int64_t created);

// `prefix` and 24 random letters and digits: the ids of responses ("chatcmpl-", "cmpl-") and
// tool calls ("call_"), unique and not guessable from one another.
std::string random_id(std::string_view prefix);

}  // namespace nanoinfer::serve
