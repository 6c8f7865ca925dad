// The HTTP side of `nanoinfer serve`: routes, API key, Host and Content-Type checks, error
// JSON, streaming, on cpp-httplib behind the connection front of serve/front.h.
// Each request is parsed and tokenized on its handler thread, checked against the context,
// then handed to the scheduler; the handler drains the request's channel into one response or
// into server-sent events.
#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <thread>

#include "chat_page_asset.h"
#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/server.h"
#include "serve/access_log.h"
#include "serve/api.h"
#include "serve/batch_reply.h"
#include "serve/embeddings.h"
#include "serve/fit_context.h"
#include "serve/front.h"
#include "serve/metrics.h"
#include "serve/model_registry.h"
#include "serve/reply.h"
#include "serve/scheduler.h"
#include "serve/secret.h"
#include "serve/serving_model.h"

namespace nanoinfer {

using serve::ApiError;
using serve::Endpoint;

namespace {

// What the access log needs to know about the request a worker thread is answering: httplib
// runs the pre-routing handler, the route, its streaming and the logger on one thread.
struct RequestTrace {
  std::chrono::steady_clock::time_point start{};
  std::shared_ptr<serve::Channel> channel;             // set once the request reached the scheduler
  std::vector<std::shared_ptr<serve::Channel>> batch;  // an array of prompts: every prompt's
  size_t key = 0;                                      // 1 + the index of the API key it authenticated with; 0 without
  // The model it runs on, held loaded until the request is logged (or its stream ends).
  std::shared_ptr<serve::ModelRegistry::Lease> lease;
  std::string model;
  std::optional<double> load_wait_ms;  // set when the model was not ready at once
};
thread_local RequestTrace request_trace;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(serve::error_json(e), "application/json");
}

// A Host header (without its port) that names this machine by address: an IP literal or
// localhost. A DNS-rebinding page reaches a local server under its own domain name instead.
bool address_host(std::string_view host, std::string_view bound) {
  if (host.empty()) return true;  // HTTP/1.0 without Host: not a browser
  std::string_view name = host;
  if (name.front() == '[') {
    const size_t close = name.find(']');
    if (close == std::string_view::npos) return false;
    name = name.substr(1, close - 1);
    in6_addr a6;
    return ::inet_pton(AF_INET6, std::string(name).c_str(), &a6) == 1;
  }
  name = name.substr(0, name.find(':'));
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "localhost" || lower == bound) return true;
  in_addr a4;
  return ::inet_pton(AF_INET, lower.c_str(), &a4) == 1;
}

// application/json, optionally with parameters (charset).
bool json_content_type(std::string_view type) {
  type = type.substr(0, type.find(';'));
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t')) type.remove_suffix(1);
  std::string lower(type);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == "application/json";
}

// The one model of Server(const OpenedModel&, ...), owned by the caller.
std::vector<ServedModel> single_model(const OpenedModel& m, const ServeOptions& o) {
  const LoadedModel loaded{std::shared_ptr<const OpenedModel>(std::shared_ptr<const OpenedModel>(), &m), o.make_drafter,
                           o.draft_max};
  return {ServedModel{.id = o.model_id, .path = m.dir, .load = [loaded] { return loaded; }}};
}

// The request headers a CORS preflight may be granted: those it asks for (the official SDKs
// send their own, such as OpenAI's x-stainless-*), when the list is well formed (header names:
// HTTP tokens, comma-separated), plus Authorization and Content-Type. They grant the page
// nothing: the key is still required and the body must still be JSON.
std::string allowed_headers(std::string_view requested) {
  std::string out = "Authorization, Content-Type";
  const auto token_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  };
  if (requested.size() > 4096) return out;
  while (!requested.empty()) {
    const size_t comma = requested.find(',');
    std::string_view name = requested.substr(0, comma);
    requested = comma == std::string_view::npos ? std::string_view() : requested.substr(comma + 1);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    if (name.empty()) continue;
    if (!std::all_of(name.begin(), name.end(), token_char)) return "Authorization, Content-Type";
    out += ", ";
    out += name;
  }
  return out;
}

}  // namespace

struct Server::Impl {
  ServeOptions options;
  int64_t created = unix_now();
  serve::Metrics metrics;
  PrefixCache prefix_cache;  // ServeOptions::prefix_cache, Auto resolved
  std::unique_ptr<serve::ModelRegistry> registry;
  serve::Front http;
  int port = 0;
  std::atomic<bool> stopping{false};
  bool started = false;  // the default model's load at construction is the caller's to report

  static PrefixCache resolve(const ServeOptions& o) {
    if (o.prefix_cache != PrefixCache::Auto) return o.prefix_cache;
    return o.api_keys.size() > 1 ? PrefixCache::PerKey : PrefixCache::Shared;
  }

  static serve::FrontOptions front_options(const ServeOptions& o, size_t models) {
    serve::FrontOptions f;
    // Each request waiting for its generation (or its model) holds a worker; a few more answer
    // the rest.
    f.workers = std::min<size_t>((o.parallel + o.queue) * models + 4, 1024);
    f.max_body_bytes = o.max_body_bytes;
    f.max_connections = o.max_connections;
    return f;
  }

  Impl(std::vector<ServedModel> models, const ServeOptions& opts, std::optional<LoadedModel> preloaded)
      : options(opts), prefix_cache(resolve(opts)), http(front_options(opts, models.size())) {
    if (!(options.slot_wait_seconds >= 0 && options.slot_wait_seconds <= 86400)) {
      fail("the wait for a model slot must be in 0..86400 s, got {}", options.slot_wait_seconds);
    }
    if (models.empty()) fail("a server needs at least one model");
    const std::function<LoadedModel()> first_load = models.front().load;
    std::vector<serve::RegistryModel> entries;
    for (ServedModel& served : models) {
      std::string id = served.id.empty() ? serve::default_model_id(served.path) : served.id;
      entries.push_back({id, [this, id, load = std::move(served.load)] { return open_engine(id, load()); }});
    }
    serve::RegistryOptions registry_options{
        .max_loaded = options.max_loaded,
        .slot_wait = std::chrono::milliseconds(static_cast<int64_t>(options.slot_wait_seconds * 1000)),
        .on_evict = [this](const std::string& evicted, const std::string& for_model) {
          if (options.access_log) {
            fmt::print(stderr, "nanoinfer: unloading '{}' to load '{}' (--max-loaded {})\n", serve::log_field(evicted),
                       serve::log_field(for_model), options.max_loaded);
          }
        }};
    registry = std::make_unique<serve::ModelRegistry>(std::move(entries), std::move(registry_options));
    if (!preloaded) preloaded = first_load();
    registry->preload(0, std::make_unique<serve::ServingModel>(std::move(*preloaded), options,
                                                               prefix_cache != PrefixCache::Off, metrics));
    started = true;
    routes();
  }

  std::unique_ptr<serve::ModelInstance> open_engine(const std::string& id, LoadedModel loaded) {
    auto engine =
        std::make_unique<serve::ServingModel>(std::move(loaded), options, prefix_cache != PrefixCache::Off, metrics);
    if (options.access_log && started) {
      fmt::print(stderr, "nanoinfer: loaded '{}' ({}; {:.2f} s)\n", serve::log_field(id), engine->m.dir.string(),
                 engine->m.load_seconds);
    }
    return engine;
  }

  ApiError unknown_model(std::string_view name) const {
    return ApiError(404, "invalid_request_error", "model_not_found",
                    fmt::format("the model '{}' does not exist; this server has {}", name, registry->id_list()));
  }

  // The request's model, loaded and held for it (the access log says how long it waited).
  serve::ServingModel& acquire_model(const std::string& model) {
    const std::optional<size_t> index = registry->find(model);
    if (!index) throw unknown_model(model);
    request_trace.model = registry->id(*index);
    request_trace.lease = std::make_shared<serve::ModelRegistry::Lease>(
        registry->acquire(*index, [] { return serve::Front::client_gone(); }));
    if (request_trace.lease->waited()) request_trace.load_wait_ms = request_trace.lease->wait_ms();
    return static_cast<serve::ServingModel&>(request_trace.lease->instance());
  }

  // The chat page's opt-in (serve/fit_context.h): the oldest turns go until the prompt leaves
  // room for the reply, max_tokens if given, else half the context (as the CLI chat reserves).
  size_t fit_to_context(serve::CompletionRequest& r, const serve::ServingModel& engine) const {
    const OpenedModel& m = engine.m;
    const size_t max_token_bytes = engine.max_token_bytes;
    const bool thinking = serve::thinks(r, options.reasoning);
    std::vector<std::string> tools;
    for (const serve::ToolDef& t : r.tools.tools) tools.push_back(t.rendered);
    const size_t context = m.model.max_context();
    const size_t reserve = r.max_tokens ? static_cast<size_t>(*r.max_tokens) : context / 2;
    const auto count = [&](std::span<const ChatMessage> messages) -> size_t {
      size_t bytes = 0;
      for (const ChatMessage& msg : messages) bytes += msg.content.size();
      if (bytes / (3 * max_token_bytes) >= context) return SIZE_MAX;  // as make_job's bound
      return encode_chat(m.tokenizer, messages, /*add_generation_prompt=*/true, SpecialTokens::AllAsText, tools,
                         thinking)
          .size();
    };
    return serve::drop_oldest_turns(r.messages, context, reserve, r.max_tokens ? reserve : 1, count);
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    serve::CompletionRequest r;
    serve::Job job;
    serve::ServingModel* engine = nullptr;
    try {
      // A grammar's compilation stops when the client leaves or the server stops.
      r = serve::parse_request(
          req.body, endpoint, [this] { return stopping.load() || serve::Front::client_gone(); }, options.grammar_steps);
      engine = &acquire_model(r.model);
      if (req.has_header(serve::kFitContextHeader)) {
        if (req.get_header_value(serve::kFitContextHeader) != serve::kFitContextValue || endpoint != Endpoint::Chat) {
          serve::bad_request("invalid_value", fmt::format("the header {} takes '{}' on /v1/chat/completions only",
                                                          serve::kFitContextHeader, serve::kFitContextValue));
        }
        res.set_header(serve::kDroppedTurnsHeader, std::to_string(fit_to_context(r, *engine)));
      }
      // Per-key isolation: a prompt reuses cached rows only of prompts sent with the same key.
      if (r.batch.empty()) job = serve::make_job(r, *engine, cache_scope(), serve::thinks(r, options.reasoning));
    } catch (const ApiError& e) {
      if (serve::Front::client_gone()) {  // left while its grammar compiled or its model loaded
        res.status = 499;
        return;
      }
      if (e.code == "model_busy") res.set_header("Retry-After", "1");
      send_error(res, e);
      return;
    }
    if (serve::Front::client_gone()) {  // left while its prompt was tokenized
      res.status = 499;
      return;
    }
    if (!r.batch.empty()) return completion_batch(res, r, *engine);
    serve::ReplyOptions reply{
        .id = {serve::random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-"), unix_now(), request_trace.model},
        .split_reasoning = splits_reasoning(r, *engine)};
    if (r.return_token_ids) reply.prompt_ids = job.prompt;
    std::shared_ptr<serve::Channel> channel = engine->scheduler->submit(std::move(job));
    request_trace.channel = channel;
    if (!channel) {
      res.set_header("Retry-After", "1");
      send_error(res, stopping ? ApiError(503, "server_error", "shutting_down", "the server is shutting down")
                               : ApiError(503, "server_error", "queue_full", "the request queue is full; retry later"));
      return;
    }
    if (!r.stream) {
      // Between steps: a client that left frees its place (queued) or its slot (running).
      const std::optional<serve::WholeText> whole =
          serve::read_whole(*channel, [] { return serve::Front::client_gone(); });
      if (!whole) {
        channel->cancel();
        res.status = 499;  // nginx's "client closed request": counted, never seen
        return;
      }
      if (channel->outcome() == serve::Outcome::Finished) {
        res.set_content(serve::whole_reply(r, reply, whole->text, whole->logprobs, *channel), "application/json");
      } else {
        send_error(res, serve::generation_error(*channel));
      }
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    auto stream = std::make_shared<serve::ReplyStream>(r, std::move(reply));
    res.set_chunked_content_provider(
        "text/event-stream",
        [channel, stream, started = false, lease = request_trace.lease](size_t, httplib::DataSink& sink) mutable {
          std::vector<std::string> events;
          if (!started) {
            started = true;
            stream->start(events);
          } else {
            const std::optional<serve::Channel::Piece> next = channel->next_for(std::chrono::milliseconds(100));
            if (!next) return !serve::Front::client_gone();  // false: cancelled by the releaser
            stream->piece(*next, events);
            if (next->done) stream->close(*channel, events);
          }
          std::string out;
          for (const std::string& e : events) out += "data: " + e + "\n\n";
          if (!out.empty() && !sink.write(out.data(), out.size())) return false;
          if (!events.empty() && events.back() == "[DONE]") sink.done();
          return true;
        },
        // A client that went away (or a finished stream: then it is a no-op) cancels.
        [channel](bool) { channel->cancel(); });
  }

  size_t cache_scope() const { return prefix_cache == PrefixCache::PerKey ? request_trace.key : 0; }

  // OpenAI's array of prompts (serve/batch_reply.h): every prompt a job of its own, all
  // submitted at once (so they share the scheduler's steps), answered as one response.
  void completion_batch(httplib::Response& res, const serve::CompletionRequest& r, serve::ServingModel& engine) {
    std::vector<serve::CompletionRequest> prompts;
    std::vector<serve::Job> jobs;
    try {
      jobs = serve::batch_jobs(r, engine, cache_scope(), prompts);
    } catch (const ApiError& e) {
      return send_error(res, e);
    }
    std::vector<std::vector<int32_t>> prompt_ids;  // return_token_ids: each prompt's
    for (const serve::Job& job : jobs) prompt_ids.push_back(r.return_token_ids ? job.prompt : std::vector<int32_t>{});
    for (serve::Job& job : jobs) {
      std::shared_ptr<serve::Channel> c = engine.scheduler->submit(std::move(job));
      if (!c) {  // settle() cancels the prompts already queued
        res.set_header("Retry-After", "1");
        return send_error(res, ApiError(503, "server_error", "queue_full",
                                        "the request queue has no room for every prompt; retry later"));
      }
      request_trace.batch.push_back(std::move(c));
    }
    request_trace.channel = request_trace.batch.front();
    const serve::ReplyOptions reply{.id = {serve::random_id("cmpl-"), unix_now(), request_trace.model}};
    if (!r.stream) {
      try {
        const std::optional<std::string> body = serve::whole_batch_reply(
            prompts, request_trace.batch, reply, std::move(prompt_ids), [] { return serve::Front::client_gone(); });
        if (!body) return void(res.status = 499);  // settle() cancels every prompt
        res.set_content(*body, "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      }
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    auto stream = std::make_shared<serve::BatchStream>(prompts, reply, r.include_usage);
    res.set_chunked_content_provider(
        "text/event-stream",
        [channels = request_trace.batch, stream, lease = request_trace.lease](size_t, httplib::DataSink& sink) {
          std::vector<std::string> events;
          stream->pump(channels, events);
          if (events.empty()) return !serve::Front::client_gone();
          std::string out;
          for (const std::string& e : events) out += "data: " + e + "\n\n";
          if (!sink.write(out.data(), out.size())) return false;
          if (stream->all_closed()) sink.done();
          return true;
        },
        [channels = request_trace.batch](bool) {
          for (const std::shared_ptr<serve::Channel>& c : channels) c->cancel();
        });
  }

  // A reasoning model's chat reply, thinking on and not asked raw: its think block is returned
  // as reasoning_content.
  bool splits_reasoning(const serve::CompletionRequest& r, const serve::ServingModel& engine) const {
    return r.endpoint == Endpoint::Chat && engine.m.tokenizer.chat_format() == ChatFormat::Qwen3 &&
           options.reasoning != Reasoning::Raw && serve::thinks(r, options.reasoning);
  }

  // The status the log and /metrics count, once the request's generation (if any) has ended.
  // The logger runs after the answer's last byte, or after the client left: a generation still
  // running then has lost its client and is cancelled (httplib's releaser would do it right
  // after), and its counts are read once the scheduler has closed it, at its next step. A
  // stream whose client left before its end went out with status 200 in its headers; it is
  // counted 499, as a non-streaming request whose client left is.
  int settle(const httplib::Response& res) const {
    for (const std::shared_ptr<serve::Channel>& c : request_trace.batch) {
      c->cancel();  // a no-op for a generation that ended
      c->wait_closed(std::chrono::seconds(60));
    }
    const std::shared_ptr<serve::Channel>& channel = request_trace.channel;
    if (!channel) return res.status;
    channel->cancel();  // a no-op for a generation that ended
    if (!channel->wait_closed(std::chrono::seconds(60))) return res.status;
    if (res.status == 200 && channel->outcome() == serve::Outcome::Cancelled && !stopping) return 499;
    return res.status;
  }

  // "nanoinfer: 127.0.0.1 POST /v1/chat/completions 200 tokens 31+16 0.42 s" (serve/access_log.h):
  // one write, so lines of concurrent requests never interleave. Tokens are prompt+completion,
  // for requests that reached the scheduler (one cut short counts what was generated); the time
  // runs from routing to the last byte written.
  void log_access(const httplib::Request& req, int status) const {
    serve::AccessEntry e{.client = req.remote_addr, .method = req.method, .path = req.path, .status = status};
    if (request_trace.channel && request_trace.channel->wait_closed(std::chrono::milliseconds(0))) {
      e.tokens = request_trace.channel->usage();
      e.cached = request_trace.channel->cached_prompt_tokens();
    }
    for (size_t i = 1; i < request_trace.batch.size(); ++i) {  // the first is `channel`
      if (!e.tokens || !request_trace.batch[i]->wait_closed(std::chrono::milliseconds(0))) continue;
      e.tokens->prompt_tokens += request_trace.batch[i]->usage().prompt_tokens;
      e.tokens->completion_tokens += request_trace.batch[i]->usage().completion_tokens;
      e.cached += request_trace.batch[i]->cached_prompt_tokens();
    }
    if (registry->size() > 1) {  // a single model's line stays as it always was
      e.model = request_trace.model;
      e.load_wait_ms = request_trace.load_wait_ms;
    }
    if (request_trace.start != std::chrono::steady_clock::time_point{}) {
      e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - request_trace.start).count();
    }
    const std::string line = serve::access_line(e);
    std::fwrite(line.data(), 1, line.size(), stderr);
  }

  void routes() {
    http.set_keep_alive_timeout(5);
    http.on_refused = [this](int status) {
      metrics.count_request(status);
      if (options.access_log) fmt::print(stderr, "nanoinfer: - - {} (refused by the connection front)\n", status);
    };

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      using R = httplib::Server::HandlerResponse;
      request_trace = {};
      request_trace.start = std::chrono::steady_clock::now();
      // Without a key, only requests addressed to this machine by address are answered: a web
      // page that rebinds its own domain name to 127.0.0.1 sends that name as Host.
      if (options.api_keys.empty() && !address_host(req.get_header_value("Host"), options.host)) {
        send_error(res, ApiError(403, "invalid_request_error", "forbidden_host",
                                 "the Host header must be an IP address or localhost when the server has no "
                                 "--api-key (protection against DNS rebinding)"));
        return R::Handled;
      }
      // Bodies are JSON: a browser sends text/plain or a form cross-origin without asking
      // (no CORS preflight); application/json it may not.
      if (req.method == "POST" && !json_content_type(req.get_header_value("Content-Type"))) {
        send_error(res, ApiError(415, "invalid_request_error", "unsupported_media_type",
                                 "the body must be sent with 'Content-Type: application/json'"));
        return R::Handled;
      }
      // A CORS preflight carries no credentials: it is answered by the OPTIONS route.
      if (req.method == "OPTIONS" && !options.cors_origins.empty()) return R::Unhandled;
      if (options.api_keys.empty() || req.path.rfind("/v1/", 0) != 0) return R::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      if (auth.rfind("Bearer ", 0) == 0) {
        // Every key is compared in full, whichever matches.
        const std::string_view given = std::string_view(auth).substr(7);
        size_t matched = 0;
        for (size_t i = 0; i < options.api_keys.size(); ++i) {
          if (same_secret(given, std::string_view(options.api_keys[i]))) matched = i + 1;
        }
        if (matched > 0) {
          request_trace.key = matched;
          return R::Unhandled;
        }
      }
      send_error(res, ApiError(401, "authentication_error", "invalid_api_key",
                               "missing or wrong API key (send 'Authorization: Bearer <key>')"));
      return R::Handled;
    });
    // Statuses set by the library itself (unknown route, body too large, unparsable request)
    // get the same JSON as ours.
    http.set_error_handler(
        httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 404) {
            send_error(res, ApiError(404, "invalid_request_error", "not_found",
                                     fmt::format("no route {} {}", req.method, req.path)));
          } else if (res.status == 413) {
            send_error(res, ApiError(413, "invalid_request_error", "request_too_large",
                                     fmt::format("the body is over the limit of {} bytes", options.max_body_bytes)));
          } else {
            send_error(res, ApiError(res.status, "invalid_request_error", "bad_request",
                                     fmt::format("HTTP status {}", res.status)));
          }
          return httplib::Server::HandlerResponse::Handled;
        }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, "server_error", "internal_error", what));
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      const int status = settle(res);
      metrics.count_request(status);
      if (options.access_log) log_access(req, status);
      request_trace = {};
    });
    // Every answer (errors included) carries the CORS headers when the request's Origin is allowed.
    if (!options.cors_origins.empty()) {
      http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
        const std::string origin = req.get_header_value("Origin");
        if (origin.empty()) return;
        const bool any =
            std::find(options.cors_origins.begin(), options.cors_origins.end(), "*") != options.cors_origins.end();
        if (!any &&
            std::find(options.cors_origins.begin(), options.cors_origins.end(), origin) == options.cors_origins.end()) {
          return;
        }
        res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
        if (!any) res.set_header("Vary", "Origin");
        if (req.method == "OPTIONS") {
          res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
          res.set_header("Access-Control-Allow-Headers",
                         allowed_headers(req.get_header_value("Access-Control-Request-Headers")));
          res.set_header("Access-Control-Max-Age", "600");
        }
      });
      http.Options(R"(/.*)", [](const httplib::Request&, httplib::Response& res) { res.status = 204; });
    }

    http.Post("/v1/chat/completions",
              [this](const httplib::Request& req, httplib::Response& res) { completion(req, res, Endpoint::Chat); });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completion(req, res, Endpoint::Completion);
    });
    // Embeddings run on the handler's thread: the model serializes them with the scheduler's steps.
    http.Post("/v1/embeddings", [this](const httplib::Request& req, httplib::Response& res) {
      try {
        const serve::ServingModel& engine = acquire_model(serve::embeddings_model(req.body));
        res.set_content(serve::embeddings_response(req.body, engine.m, engine.embed_pooling, engine.embed_pooling_error,
                                                   request_trace.model),
                        "application/json");
      } catch (const ApiError& e) {
        if (e.code == "model_busy") res.set_header("Retry-After", "1");
        send_error(res, e);
      }
    });
    // The chat page (web/chat/chat.html): it calls /v1/* like any client, so the key, if any,
    // is typed into the page. Its script and style are inline; it may fetch from here only.
    if (options.web_page) {
      http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_header("Content-Security-Policy",
                       "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
        res.set_header("X-Content-Type-Options", "nosniff");
        res.set_header("Cache-Control", "no-cache");
        res.set_content(std::string(serve::chat_page::html), "text/html; charset=utf-8");
      });
    }
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      std::vector<serve::ModelListing> listing;
      for (const serve::ModelRegistry::Status& st : registry->status()) listing.push_back({st.id, st.loaded});
      res.set_content(serve::models_json(listing, created), "application/json");
    });
    http.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
      for (const serve::ModelRegistry::Status& st : registry->status()) {
        if (st.id == req.matches[1])
          return res.set_content(serve::model_json({st.id, st.loaded}, created), "application/json");
      }
      send_error(res, unknown_model(req.matches[1].str()));
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (stopping) {
        send_error(res, ApiError(503, "server_error", "shutting_down", "the server is shutting down"));
        return;
      }
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      size_t queued = 0, active = 0;
      registry->for_each_loaded([&](size_t, serve::ModelInstance& instance) {
        queued += static_cast<serve::ServingModel&>(instance).scheduler->queue_depth();
        active += static_cast<serve::ServingModel&>(instance).scheduler->active();
      });
      res.set_content(metrics.render(queued, active) + serve::render_model_metrics(registry->status()),
                      "text/plain; version=0.0.4");
    });
  }
};

Server::Server(const OpenedModel& model, const ServeOptions& options)
    : impl_(std::make_unique<Impl>(single_model(model, options), options, std::nullopt)) {}

Server::Server(std::vector<ServedModel> models, const ServeOptions& options, std::optional<LoadedModel> preloaded)
    : impl_(std::make_unique<Impl>(std::move(models), options, std::move(preloaded))) {}

Server::~Server() {
  stop();
}

void Server::start() {
  Impl& s = *impl_;
  if (s.options.port < 0 || s.options.port > 65535) fail("--port must be in 0..65535, got {}", s.options.port);
  s.port = s.http.open(s.options.host, s.options.port);
  s.http.start();
}

int Server::port() const {
  return impl_->port;
}
const std::string& Server::model_id() const {
  return impl_->registry->id(0);
}
std::vector<std::string> Server::model_ids() const {
  std::vector<std::string> ids;
  for (size_t i = 0; i < impl_->registry->size(); ++i) ids.push_back(impl_->registry->id(i));
  return ids;
}
PrefixCache Server::prefix_cache() const {
  return impl_->prefix_cache;
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  s.registry->shutdown();  // stops every scheduler, releasing each handler waiting on a channel or a model
  s.http.shutdown();
}

}  // namespace nanoinfer
