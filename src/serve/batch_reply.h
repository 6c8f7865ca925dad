// OpenAI's array of prompts in /v1/completions: each prompt is its own job and its own choice
// (index i, in the order of the array), answered together as one response or one stream.
// The single replies (serve/reply.h) are made as for one prompt with the prompt's choice index
// (ResponseId::choice), then merged here: choices gathered, usage summed, one "[DONE]".
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "serve/reply.h"
#include "serve/serving_model.h"

namespace nanoinfer::serve {

// Each prompt of r.batch as a request of its own (`prompts`) and its job, in order; an error
// names the prompt ("prompt 2: ...").
std::vector<Job> batch_jobs(const CompletionRequest& r, const ServingModel& engine, size_t cache_scope,
                            std::vector<CompletionRequest>& prompts);

// The whole response from each prompt's whole_reply, in order.
std::string merge_whole_replies(const std::vector<std::string>& replies);

// Waits for every prompt's channel and answers with the merged response; nullopt when `gone`
// says the client left first. Throws the ApiError of a prompt whose generation failed.
// `prompt_ids`: each prompt's tokens (return_token_ids), or empty.
std::optional<std::string> whole_batch_reply(const std::vector<CompletionRequest>& prompts,
                                             const std::vector<std::shared_ptr<Channel>>& channels,
                                             const ReplyOptions& reply, std::vector<std::vector<int32_t>> prompt_ids,
                                             const std::function<bool()>& gone);

class BatchStream {
 public:
  // One ReplyStream per prompt; all share the response id.
  BatchStream(const std::vector<CompletionRequest>& prompts, const ReplyOptions& o, bool include_usage);
  size_t size() const { return streams_.size(); }
  bool closed(size_t i) const { return closed_[i]; }
  bool all_closed() const;
  // Prompt i's payloads for one piece of its channel (its choice: index i).
  void piece(size_t i, const Channel::Piece& p, std::vector<std::string>& events);
  // After prompt i's last piece: its finish (or error). Once every prompt is closed: the summed
  // usage (stream_options.include_usage), then "[DONE]".
  void close(size_t i, const Channel& channel, std::vector<std::string>& events);
  // What every open prompt's channel has now (a short wait on the first open one when none has
  // anything), as payloads.
  void pump(const std::vector<std::shared_ptr<Channel>>& channels, std::vector<std::string>& events);

 private:
  void relay(std::vector<std::string>& from, std::vector<std::string>& events);

  std::vector<std::unique_ptr<ReplyStream>> streams_;
  std::vector<bool> closed_;
  ResponseId id_;
  bool include_usage_;
  Usage usage_;
};

}  // namespace nanoinfer::serve
