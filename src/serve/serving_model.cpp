#include "serve/serving_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/hub_cache.h"

namespace nanoinfer::serve {

ServingModel::ServingModel(LoadedModel model, const ServeOptions& o, bool prefix_cache, Metrics& metrics)
    : loaded(std::move(model)), m(*loaded.model) {
  for (int32_t id = 0; id < m.tokenizer.vocab_size(); ++id) {
    try {
      max_token_bytes = std::max(max_token_bytes, m.tokenizer.token_bytes(id).size());
    } catch (const Error&) {
    }
  }
  text_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/false);
  chat_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/true);
  trie = VocabTrie::of(m.tokenizer);
  try {
    embed_pooling = resolve_pooling(std::nullopt, m.pooling);
  } catch (const Error& e) {
    embed_pooling_error = e.what();
  }
  scheduler = std::make_unique<Scheduler>(m.model, m.tokenizer,
                                          SchedulerOptions{.parallel = o.parallel,
                                                           .queue = o.queue,
                                                           .prefill_chunk = o.prefill_chunk,
                                                           .step_tokens = o.step_tokens,
                                                           .step_latency = o.step_latency,
                                                           .make_drafter = loaded.make_drafter,
                                                           .draft_max = loaded.draft_max,
                                                           .prefix_cache = prefix_cache},
                                          metrics);
}

bool thinks(const CompletionRequest& r, Reasoning reasoning) {
  return r.enable_thinking.value_or(reasoning != Reasoning::Off);
}

Job make_job(const CompletionRequest& r, const ServingModel& engine, size_t cache_scope, bool thinking) {
  const OpenedModel& m = engine.m;
  const size_t max_token_bytes = engine.max_token_bytes;
  Job job;
  try {
    job.sampling = resolve_sampling(m.generation, r.sampling).params();
  } catch (const Error& e) {
    bad_request("invalid_value", e.what());
  }
  // A prompt too long for the context is refused before it is tokenized: a token covers at
  // most max_token_bytes bytes of normalized text, and NFC shrinks text at most 3 times
  // (three Hangul jamo into one syllable).
  size_t bytes = r.prompt.size();
  for (const ChatMessage& msg : r.messages) {
    bytes += msg.content.size();
    for (const ChatToolCall& call : msg.tool_calls) bytes += call.name.size() + call.arguments.size();
  }
  std::vector<std::string> tools;  // each tool as the template renders it
  for (const ToolDef& t : r.tools.tools) {
    tools.push_back(t.rendered);
    bytes += t.rendered.size();
  }
  if (const size_t at_least = bytes / (3 * max_token_bytes); at_least >= m.model.max_context()) {
    bad_request("context_length_exceeded",
                fmt::format("the prompt is {} bytes, at least {} tokens, but the context holds {}", bytes, at_least,
                            m.model.max_context()));
  }
  if (r.endpoint == Endpoint::Chat) {
    // As encode_chat_prompt, with the tools block (rendered for tool_choice none too, as vLLM
    // does: the prompt, and so the cached prefix, does not depend on the choice).
    job.prompt =
        encode_chat(m.tokenizer, r.messages, /*add_generation_prompt=*/true, SpecialTokens::AllAsText, tools, thinking);
    job.eos_ids = engine.chat_eos;
  } else {
    // Token ids are the prompt as they are (as vLLM takes them): no BOS is added.
    job.prompt = r.prompt_ids.empty() ? encode_raw_prompt(m.tokenizer, r.prompt) : r.prompt_ids;
    for (const int32_t id : r.prompt_ids) {
      if (id >= m.tokenizer.vocab_size()) {
        bad_request("invalid_value",
                    fmt::format("'prompt' holds token {}; the vocabulary has {}", id, m.tokenizer.vocab_size()));
      }
    }
    job.eos_ids = engine.text_eos;
  }
  if (job.prompt.empty()) bad_request("invalid_value", "the prompt encodes to no tokens");
  const size_t context = m.model.max_context();
  const size_t n = job.prompt.size();
  if (n >= context) {
    bad_request("context_length_exceeded",
                fmt::format("the prompt is {} tokens but the context holds {} (and at least one "
                            "token must be generated)",
                            n, context));
  }
  if (r.max_tokens && n + static_cast<size_t>(*r.max_tokens) > context) {
    bad_request("context_length_exceeded",
                fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens", n,
                            *r.max_tokens, context));
  }
  job.max_tokens = r.max_tokens ? *r.max_tokens : static_cast<int64_t>(context - n);
  job.stop = r.stop;
  job.grammar = r.grammar;
  job.trie = engine.trie;
  job.frequency_penalty = r.frequency_penalty;
  job.presence_penalty = r.presence_penalty;
  job.logit_bias = r.logit_bias;
  for (const auto& entry : r.logit_bias) {
    if (entry.first >= m.tokenizer.vocab_size()) {
      bad_request("invalid_value", fmt::format("'logit_bias' names token {}; the vocabulary has {}", entry.first,
                                               m.tokenizer.vocab_size()));
    }
  }
  job.top_logprobs = r.top_logprobs;
  job.cache_scope = cache_scope;
  return job;
}

std::string default_model_id(const std::filesystem::path& dir) {
  // A model from the hub cache is named by its repository, not by its snapshot's commit hash.
  if (std::optional<std::string> repo = hub_repo_of_path(dir)) return *repo;
  std::filesystem::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().empty() ? "nanoinfer" : p.filename().string();
}

}  // namespace nanoinfer::serve
