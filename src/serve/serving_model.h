// A model loaded for `nanoinfer serve`: the model, what requests need of its vocabulary, and
// the scheduler that runs its requests (one per model, see serve/model_registry.h); and the
// turning of a parsed request into that scheduler's Job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "nanoinfer/grammar.h"
#include "nanoinfer/server.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/model_registry.h"
#include "serve/scheduler.h"

namespace nanoinfer::serve {

// Destroying it stops the scheduler, then frees the model (when the LoadedModel owned it).
struct ServingModel final : ModelInstance {
  LoadedModel loaded;
  const OpenedModel& m;
  size_t max_token_bytes = 1;  // the longest token's text: a bound on the bytes one token covers
  std::vector<int32_t> text_eos, chat_eos;
  std::shared_ptr<const VocabTrie> trie;  // the vocabulary's byte trie, for grammars
  std::unique_ptr<Scheduler> scheduler;
  Pooling embed_pooling = Pooling::Last;  // /v1/embeddings: the model's pooling (OpenedModel::pooling)
  std::string embed_pooling_error;        // or why it has none this engine computes

  ServingModel(LoadedModel model, const ServeOptions& o, bool prefix_cache, Metrics& metrics);
  void stop() override { scheduler->shutdown(); }
};

// The job of a parsed request on this model: sampling resolved against its generation config,
// the prompt encoded (chat: through its template, with the tools) and checked against its
// context, logit_bias against its vocabulary (each a 400 naming the problem). `cache_scope`:
// Job::cache_scope (per-key isolation of the prefix cache; 0 = shared).
// `thinking`: a reasoning model's template thinks (thinks() below).
Job make_job(const CompletionRequest& r, const ServingModel& engine, size_t cache_scope, bool thinking);

// Whether a reasoning model thinks for this request: its chat_template_kwargs.enable_thinking,
// else the server's default (--reasoning).
bool thinks(const CompletionRequest& r, Reasoning reasoning);

// A model's id from its path: the directory's (or file's) name; "nanoinfer" when it has none.
std::string default_model_id(const std::filesystem::path& dir);

}  // namespace nanoinfer::serve
