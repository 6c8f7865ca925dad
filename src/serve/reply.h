// A request's generated text as OpenAI's response: the whole reply, or its stream of
// server-sent event payloads. Between the channel's text and the JSON sit the two parsers of
// the output, in this order: a reasoning model's think block is split off into
// `reasoning_content` (nanoinfer/reasoning.h), and the rest is parsed for tool calls
// (serve/tools.h). The whole reply and the stream run the same parsers over the same text, so
// they split it the same way.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanoinfer/reasoning.h"
#include "serve/api.h"
#include "serve/scheduler.h"

namespace nanoinfer::serve {

struct ReplyOptions {
  ResponseId id;
  bool split_reasoning = false;     // a reasoning model's output, thinking separated
  std::vector<int32_t> prompt_ids;  // return_token_ids: the prompt
};

// The error a generation that did not finish answers with (503 cancelled, 500 failed).
ApiError generation_error(const Channel& channel);

// What a non-streaming request's channel gave, all of it.
struct WholeText {
  std::string text;
  std::vector<TokenLogprob> logprobs;
};
// Reads the channel to its end; nullopt when `gone` says the client left first (checked between
// steps, at most every 100 ms).
std::optional<WholeText> read_whole(Channel& channel, const std::function<bool()>& gone);

// The response of a finished non-streaming request: `text` and `logprobs` are everything the
// channel gave.
std::string whole_reply(const CompletionRequest& r, const ReplyOptions& o, std::string_view text,
                        const std::vector<TokenLogprob>& logprobs, const Channel& channel);

class ReplyStream {
 public:
  ReplyStream(const CompletionRequest& r, ReplyOptions o);
  // The payloads for the stream's start (chat: the role chunk).
  void start(std::vector<std::string>& events);
  // The payloads for one piece of the channel.
  void piece(const Channel::Piece& p, std::vector<std::string>& events);
  // After the last piece: the finish reason and usage, or the error; then "[DONE]".
  void close(const Channel& channel, std::vector<std::string>& events);

 private:
  void content(std::string_view text, const std::vector<TokenLogprob>*& logprobs, std::vector<std::string>& events);

  Endpoint endpoint_;
  ReplyOptions o_;
  bool want_logprobs_, include_usage_;
  size_t offset_ = 0;  // completions: bytes streamed before the next chunk
  std::optional<ReasoningSplitter> reasoning_;
  std::shared_ptr<ToolCallParser> tools_;
};

}  // namespace nanoinfer::serve
