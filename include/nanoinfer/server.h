// `nanoinfer serve`: an OpenAI-compatible HTTP server over one model, or several.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (both optionally streamed as
// server-sent events), POST /v1/embeddings, GET /v1/models, GET /v1/models/{id}, GET /health,
// GET /metrics (Prometheus text). Requests
// share the model: a scheduler thread prefills each new request and decodes all running ones
// together, one batched step at a time (src/serve/scheduler.h). Errors are OpenAI-style JSON.
//
// Usage:
//   OpenedModel m = open_model("");
//   Server server(m, {.port = 0});
//   server.start();                 // binds (throws Error if it cannot), serves in the background
//   ... server.port() ...
//   server.stop();                  // cancels in-flight requests, stops accepting, joins
//
// Several models: Server(std::vector<ServedModel>, options). A request's "model" picks one
// (none: the first, the default); each loads on first use (the default at construction) and
// the least recently used idle one is unloaded when ServeOptions::max_loaded would be exceeded
// (src/serve/model_registry.h). Each loaded model has its own scheduler.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nanoinfer/open_model.h"
#include "nanoinfer/speculative.h"

namespace nanoinfer {

// Whose prompts a request may reuse from the prefix cache (the K/V rows of earlier prompts
// that start the same way; see src/serve/scheduler.h). Reuse is observable: a request whose
// prefix is cached answers its first token sooner, so a client can tell whether a prompt was
// sent before. Shared: any request reuses any cached prompt (one client can confirm another's
// prompt). PerKey: only prompts sent with the same API key (clients of one key still see each
// other's). Off: nothing is reused, not even a conversation's own earlier turns (every prompt
// is prefilled in full). Auto: PerKey with two keys or more, else Shared.
enum class PrefixCache { Auto, Shared, PerKey, Off };

// A reasoning model's thinking (Qwen3's <think> block, chat only). On: it thinks unless a
// request sets chat_template_kwargs.enable_thinking false, and the think block is returned as
// the message's reasoning_content. Off: the template's empty think block is in the prompt (the
// model answers without thinking) unless a request sets enable_thinking true (then as On). Raw:
// as On, but the think block stays in the content as text.
enum class Reasoning { On, Off, Raw };

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0 = any free port (see Server::port)
  size_t parallel = 4;         // sequences decoded together
  size_t queue = 64;           // requests waiting beyond those; more get 503
  size_t prefill_chunk = 512;  // prompt tokens per step while no sequence decodes
  size_t step_tokens = 8;      // rows per step (decode rows + prompt rows) while sequences decode
  // > 0: while a prompt prefills beside decoding sequences, its rows per step are adapted to
  // measured times so a step takes about this many times a decode-only step (the running
  // streams' inter-token time); step_tokens then only sets the first such step. 0: fixed rows.
  double step_latency = 1.8;
  // Non-empty: /v1/* needs "Authorization: Bearer <key>" with one of these (none empty).
  std::vector<std::string> api_keys;
  PrefixCache prefix_cache = PrefixCache::Auto;
  size_t max_body_bytes = 4 << 20;  // larger bodies get 413
  size_t max_connections = 512;     // open at once; more are answered 503 and closed
  // The work one request's grammar (response_format, grammar, tools) may cost to compile, in
  // GrammarBudget steps (nanoinfer/grammar.h; ~46 ns each); past it the request gets a 400.
  uint64_t grammar_steps = 64'000'000;
  std::string model_id;    // the name /v1/models reports; "" = the model directory's name
  bool web_page = true;    // the chat page at GET /
  bool access_log = true;  // one line per request on stderr (method, path, status, tokens, time)
  // Origins allowed to call the API from a browser (CORS): "*" or exact origins such as
  // "http://localhost:3000". Empty: no CORS headers, preflights get 404.
  std::vector<std::string> cors_origins;
  Reasoning reasoning = Reasoning::On;
  // Speculative decoding (nanoinfer/speculative.h), per sequence inside the batched steps:
  // makes the drafter of each of the `parallel` sequences, once (null: plain decoding), and
  // the tokens drafted per pass (unset: adaptive).
  std::function<std::unique_ptr<Drafter>()> make_drafter;
  std::optional<size_t> draft_max;
  // Several models: how many may be loaded at once (0 = all of them), and how long a request
  // for an unloaded model waits for a loaded one to finish its requests so that it can be
  // unloaded; past it the request gets 503 model_busy.
  size_t max_loaded = 0;
  double slot_wait_seconds = 120;
};

// A model opened for serving: the model (shared, so the loader decides what owns it) and its
// speculative decoding (as ServeOptions' make_drafter and draft_max, which it replaces).
struct LoadedModel {
  std::shared_ptr<const OpenedModel> model;
  std::function<std::unique_ptr<Drafter>()> make_drafter;
  std::optional<size_t> draft_max;
};

// One of the models behind a server.
struct ServedModel {
  std::string id;              // what requests name in "model"; "" = the last component of `path`
  std::filesystem::path path;  // the model's file or directory, for the id and messages
  // Opens the model: on first use (from a request's thread), and again after an unload.
  std::function<LoadedModel()> load;
};

class Server {
 public:
  // `model` must outlive the server.
  Server(const OpenedModel& model, const ServeOptions& options);
  // Several models, the first the default. It is loaded here: `preloaded` when given (a model
  // the caller opened already), else through its loader. Throws Error on duplicate ids.
  Server(std::vector<ServedModel> models, const ServeOptions& options, std::optional<LoadedModel> preloaded = {});
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds host:port and starts serving on background threads. Throws Error if the address
  // cannot be bound.
  void start();
  int port() const;                            // the bound port
  const std::string& model_id() const;         // the default model's
  std::vector<std::string> model_ids() const;  // every model's, the default first
  PrefixCache prefix_cache() const;            // the isolation in effect (Auto resolved)
  // Stops accepting connections, cancels queued and running generations (their clients get
  // what was generated so far, or 503), and waits for the server threads. Idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanoinfer
