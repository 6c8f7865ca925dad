#include "serve/batch_reply.h"

#include <fmt/format.h>

#include <chrono>
#include <nlohmann/json.hpp>

namespace nanoinfer::serve {

namespace {

using json = nlohmann::json;

void add_usage(json& total, const json& usage) {
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"})
    total[key] = total.value(key, size_t{0}) + usage.value(key, size_t{0});
}

}  // namespace

std::vector<Job> batch_jobs(const CompletionRequest& r, const ServingModel& engine, size_t cache_scope,
                            std::vector<CompletionRequest>& prompts) {
  std::vector<Job> jobs;
  for (const CompletionRequest::Prompt& p : r.batch) {
    CompletionRequest& one = prompts.emplace_back(r);
    one.batch.clear();
    one.prompt = p.text;
    one.prompt_ids = p.ids;
    try {
      jobs.push_back(make_job(one, engine, cache_scope, /*thinking=*/false));
    } catch (const ApiError& e) {
      throw ApiError(e.status, e.type, e.code, fmt::format("prompt {}: {}", prompts.size() - 1, e.what()));
    }
  }
  return jobs;
}

std::optional<std::string> whole_batch_reply(const std::vector<CompletionRequest>& prompts,
                                             const std::vector<std::shared_ptr<Channel>>& channels,
                                             const ReplyOptions& reply, std::vector<std::vector<int32_t>> prompt_ids,
                                             const std::function<bool()>& gone) {
  std::vector<std::string> replies;
  for (size_t i = 0; i < channels.size(); ++i) {
    std::optional<WholeText> whole = read_whole(*channels[i], gone);
    if (!whole) return std::nullopt;
    if (channels[i]->outcome() != Outcome::Finished) throw generation_error(*channels[i]);
    ReplyOptions one = reply;
    one.id.choice = i;
    if (i < prompt_ids.size()) one.prompt_ids = std::move(prompt_ids[i]);
    replies.push_back(whole_reply(prompts[i], one, whole->text, whole->logprobs, *channels[i]));
  }
  return merge_whole_replies(replies);
}

std::string merge_whole_replies(const std::vector<std::string>& replies) {
  json merged;
  json choices = json::array(), usage = json::object();
  for (size_t i = 0; i < replies.size(); ++i) {
    json one = json::parse(replies[i]);
    choices.push_back(std::move(one["choices"].at(0)));
    add_usage(usage, one["usage"]);
    if (i == 0) merged = std::move(one);
  }
  merged["choices"] = std::move(choices);
  merged["usage"] = std::move(usage);
  return merged.dump(-1, ' ', false, json::error_handler_t::replace);
}

BatchStream::BatchStream(const std::vector<CompletionRequest>& prompts, const ReplyOptions& o, bool include_usage)
    : closed_(prompts.size(), false), id_(o.id), include_usage_(include_usage) {
  for (const CompletionRequest& r : prompts) {
    ReplyOptions one = o;
    one.id.choice = streams_.size();
    CompletionRequest quiet = r;
    quiet.include_usage = false;  // the usage is summed here, once
    streams_.push_back(std::make_unique<ReplyStream>(quiet, std::move(one)));
  }
}

bool BatchStream::all_closed() const {
  for (const bool c : closed_)
    if (!c) return false;
  return true;
}

// A prompt's payloads but its "[DONE]": the stream ends once, after every prompt.
void BatchStream::relay(std::vector<std::string>& from, std::vector<std::string>& events) {
  for (std::string& e : from)
    if (e != "[DONE]") events.push_back(std::move(e));
}

void BatchStream::piece(size_t i, const Channel::Piece& p, std::vector<std::string>& events) {
  std::vector<std::string> own;
  streams_[i]->piece(p, own);
  relay(own, events);
}

void BatchStream::close(size_t i, const Channel& channel, std::vector<std::string>& events) {
  std::vector<std::string> own;
  streams_[i]->close(channel, own);
  relay(own, events);
  closed_[i] = true;
  usage_.prompt_tokens += channel.usage().prompt_tokens;
  usage_.completion_tokens += channel.usage().completion_tokens;
  if (!all_closed()) return;
  if (include_usage_) events.push_back(chunk_json(Endpoint::Completion, id_, {.usage = usage_}));
  events.push_back("[DONE]");
}

void BatchStream::pump(const std::vector<std::shared_ptr<Channel>>& channels, std::vector<std::string>& events) {
  bool waited = false;
  for (size_t i = 0; i < channels.size(); ++i) {
    while (!closed_[i]) {
      const bool wait = events.empty() && !waited;
      waited = waited || wait;
      const std::optional<Channel::Piece> next = channels[i]->next_for(std::chrono::milliseconds(wait ? 20 : 0));
      if (!next) break;
      piece(i, *next, events);
      if (next->done) close(i, *channels[i], events);
    }
  }
}

}  // namespace nanoinfer::serve
