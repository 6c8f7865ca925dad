#include "serve/reply.h"

#include <chrono>

namespace nanoinfer::serve {

ApiError generation_error(const Channel& channel) {
  return channel.outcome() == Outcome::Cancelled
             ? ApiError(503, "server_error", "cancelled", "the generation was cancelled (server shutting down)")
             : ApiError(500, "server_error", "generation_failed", channel.error());
}

std::optional<WholeText> read_whole(Channel& channel, const std::function<bool()>& gone) {
  WholeText whole;
  while (true) {
    std::optional<Channel::Piece> p = channel.next_for(std::chrono::milliseconds(100));
    if (p) {
      whole.text += p->text;
      for (TokenLogprob& lp : p->logprobs) whole.logprobs.push_back(std::move(lp));
    }
    if (p && p->done) return whole;
    if (gone()) return std::nullopt;
  }
}

std::string whole_reply(const CompletionRequest& r, const ReplyOptions& o, std::string_view text,
                        const std::vector<TokenLogprob>& logprobs, const Channel& channel) {
  std::string reasoning, content;
  if (o.split_reasoning) {
    ReasoningSplitter splitter;
    splitter.feed(text, reasoning, content);
    splitter.finish(reasoning, content);
    text = content;
  }
  FinishReason finish = channel.finish_reason();
  std::optional<ParsedOutput> parsed;
  if (r.tools.parse()) {
    parsed = parse_tool_output(text, r.tools);
    if (!parsed->calls.empty() && finish == FinishReason::Stop) finish = FinishReason::ToolCalls;
  }
  const TokenIds ids{o.prompt_ids, channel.completion_ids()};
  return response_json(r.endpoint, o.id, parsed ? parsed->content : text, finish, channel.usage(),
                       r.return_token_ids ? &ids : nullptr, r.top_logprobs >= 0 ? &logprobs : nullptr,
                       parsed ? &parsed->calls : nullptr, reasoning);
}

ReplyStream::ReplyStream(const CompletionRequest& r, ReplyOptions o)
    : endpoint_(r.endpoint), o_(std::move(o)), want_logprobs_(r.top_logprobs >= 0), include_usage_(r.include_usage) {
  if (o_.split_reasoning) reasoning_.emplace();
  if (r.tools.parse()) {
    std::vector<std::string> names;
    for (const ToolDef& t : r.tools.tools) names.push_back(t.name);
    tools_ = std::make_shared<ToolCallParser>(std::move(names), r.tools.max_calls());
  }
}

void ReplyStream::start(std::vector<std::string>& events) {
  if (endpoint_ == Endpoint::Chat) events.push_back(chunk_json(endpoint_, o_.id, {.role = true}));
}

// Content (after the reasoning is split off) through the tool-call parser, when there is one.
// The piece's logprobs ride on the first chunk sent for it.
void ReplyStream::content(std::string_view text, const std::vector<TokenLogprob>*& logprobs,
                          std::vector<std::string>& events) {
  const auto send = [&](ChunkParts parts) {
    parts.logprobs = logprobs;
    logprobs = nullptr;
    events.push_back(chunk_json(endpoint_, o_.id, parts));
  };
  if (!tools_) {
    if (!text.empty()) send({.text = text, .text_offset = offset_});
    return;
  }
  std::vector<ToolCallParser::Event> out;
  const size_t before = tools_->calls();
  tools_->feed(text, out);
  size_t index = before;
  for (const ToolCallParser::Event& e : out) {
    if (e.call) {
      send({.tool_call = &*e.call, .tool_index = index++});
    } else {
      send({.text = e.content});
    }
  }
}

void ReplyStream::piece(const Channel::Piece& p, std::vector<std::string>& events) {
  const std::vector<TokenLogprob>* logprobs = want_logprobs_ && !p.logprobs.empty() ? &p.logprobs : nullptr;
  std::string reasoning, text;
  std::string_view content_text = p.text;
  if (reasoning_) {
    reasoning_->feed(p.text, reasoning, text);
    if (p.done) reasoning_->finish(reasoning, text);
    content_text = text;
    if (!reasoning.empty()) {
      events.push_back(chunk_json(endpoint_, o_.id, {.reasoning = reasoning, .logprobs = logprobs}));
      logprobs = nullptr;
    }
  }
  content(content_text, logprobs, events);
  if (tools_ && p.done) {
    std::vector<ToolCallParser::Event> out;
    const size_t before = tools_->calls();
    tools_->finish(out);
    size_t index = before;
    for (const ToolCallParser::Event& e : out) {
      ChunkParts parts;
      if (e.call) {
        parts.tool_call = &*e.call;
        parts.tool_index = index++;
      } else {
        parts.text = e.content;
      }
      events.push_back(chunk_json(endpoint_, o_.id, parts));
    }
  }
  // Logprobs of tokens whose text is all held back by a parser still go out, in a chunk of their own.
  if (logprobs) events.push_back(chunk_json(endpoint_, o_.id, {.logprobs = logprobs, .text_offset = offset_}));
  for (const TokenLogprob& lp : p.logprobs) offset_ += lp.token.size();
}

void ReplyStream::close(const Channel& channel, std::vector<std::string>& events) {
  if (channel.outcome() == Outcome::Finished) {
    FinishReason finish = channel.finish_reason();
    if (tools_ && tools_->calls() > 0 && finish == FinishReason::Stop) finish = FinishReason::ToolCalls;
    events.push_back(chunk_json(endpoint_, o_.id, {.finish = finish}));
    if (include_usage_) events.push_back(chunk_json(endpoint_, o_.id, {.usage = channel.usage()}));
  } else {
    // Headers are gone: the error travels as an event, as OpenAI's streams do.
    events.push_back(error_json(generation_error(channel)));
  }
  events.push_back("[DONE]");
}

}  // namespace nanoinfer::serve
