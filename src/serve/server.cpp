// The HTTP side of `nanoinfer serve`: routes, API key, Host and Content-Type checks, error
// JSON, streaming, on cpp-httplib behind the connection front of serve/front.h.
// Each request is parsed and tokenized on its handler thread, checked against the context,
// then handed to the scheduler; the handler drains the request's channel into one response or
// into server-sent events.
#include <arpa/inet.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
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
#include "serve/fit_context.h"
#include "serve/front.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"
#include "serve/secret.h"

namespace nanoinfer {

using serve::ApiError;
using serve::Endpoint;

namespace {

// What the access log needs to know about the request a worker thread is answering: httplib
// runs the pre-routing handler, the route, its streaming and the logger on one thread.
struct RequestTrace {
  std::chrono::steady_clock::time_point start{};
  std::shared_ptr<serve::Channel> channel;  // set once the request reached the scheduler
  size_t key = 0;                           // 1 + the index of the API key it authenticated with; 0 without
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

std::string default_model_id(const std::filesystem::path& dir) {
  std::filesystem::path p = dir.lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.filename().empty() ? "nanoinfer" : p.filename().string();
}

}  // namespace

struct Server::Impl {
  const OpenedModel& m;
  ServeOptions options;
  std::string model_id;
  int64_t created = unix_now();
  serve::Metrics metrics;
  std::unique_ptr<serve::Scheduler> scheduler;
  serve::Front http;
  int port = 0;
  size_t max_token_bytes = 1;  // the longest token's text: a bound on the bytes one token covers
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  std::vector<int32_t> text_eos, chat_eos;
  std::shared_ptr<const VocabTrie> trie;  // the vocabulary's byte trie, for grammars
  PrefixCache prefix_cache;               // ServeOptions::prefix_cache, Auto resolved

  static PrefixCache resolve(const ServeOptions& o) {
    if (o.prefix_cache != PrefixCache::Auto) return o.prefix_cache;
    return o.api_keys.size() > 1 ? PrefixCache::PerKey : PrefixCache::Shared;
  }

  static serve::FrontOptions front_options(const ServeOptions& o) {
    serve::FrontOptions f;
    // Each request waiting for its generation holds a worker; a few more answer the rest.
    f.workers = std::min<size_t>(o.parallel + o.queue + 4, 1024);
    f.max_body_bytes = o.max_body_bytes;
    f.max_connections = o.max_connections;
    return f;
  }

  Impl(const OpenedModel& model, const ServeOptions& opts)
      : m(model), options(opts), http(front_options(opts)), prefix_cache(resolve(opts)) {
    for (int32_t id = 0; id < m.tokenizer.vocab_size(); ++id) {
      try {
        max_token_bytes = std::max(max_token_bytes, m.tokenizer.token_bytes(id).size());
      } catch (const Error&) {
      }
    }
    model_id = options.model_id.empty() ? default_model_id(m.dir) : options.model_id;
    text_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/false);
    chat_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/true);
    trie = VocabTrie::of(m.tokenizer);
    scheduler =
        std::make_unique<serve::Scheduler>(m.model, m.tokenizer,
                                           serve::SchedulerOptions{.parallel = options.parallel,
                                                                   .queue = options.queue,
                                                                   .prefill_chunk = options.prefill_chunk,
                                                                   .step_tokens = options.step_tokens,
                                                                   .step_latency = options.step_latency,
                                                                   .make_drafter = options.make_drafter,
                                                                   .draft_max = options.draft_max,
                                                                   .prefix_cache = prefix_cache != PrefixCache::Off},
                                           metrics);
    routes();
  }

  serve::Job make_job(const serve::CompletionRequest& r) const {
    if (!r.model.empty() && r.model != model_id) {
      throw ApiError(404, "invalid_request_error", "model_not_found",
                     fmt::format("the model '{}' does not exist; this server has '{}'", r.model, model_id));
    }
    serve::Job job;
    try {
      job.sampling = resolve_sampling(m.generation, r.sampling).params();
    } catch (const Error& e) {
      serve::bad_request("invalid_value", e.what());
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
    for (const serve::ToolDef& t : r.tools.tools) {
      tools.push_back(t.rendered);
      bytes += t.rendered.size();
    }
    if (const size_t at_least = bytes / (3 * max_token_bytes); at_least >= m.model.max_context()) {
      serve::bad_request("context_length_exceeded",
                         fmt::format("the prompt is {} bytes, at least {} tokens, but the context holds {}", bytes,
                                     at_least, m.model.max_context()));
    }
    if (r.endpoint == Endpoint::Chat) {
      // As encode_chat_prompt, with the tools block (rendered for tool_choice none too, as vLLM
      // does: the prompt, and so the cached prefix, does not depend on the choice).
      job.prompt =
          encode_chat(m.tokenizer, r.messages, /*add_generation_prompt=*/true, SpecialTokens::AllAsText, tools);
      job.eos_ids = chat_eos;
    } else {
      job.prompt = encode_raw_prompt(m.tokenizer, r.prompt);
      job.eos_ids = text_eos;
    }
    if (job.prompt.empty()) serve::bad_request("invalid_value", "the prompt encodes to no tokens");
    const size_t context = m.model.max_context();
    const size_t n = job.prompt.size();
    if (n >= context) {
      serve::bad_request("context_length_exceeded",
                         fmt::format("the prompt is {} tokens but the context holds {} (and at least one "
                                     "token must be generated)",
                                     n, context));
    }
    if (r.max_tokens && n + static_cast<size_t>(*r.max_tokens) > context) {
      serve::bad_request("context_length_exceeded",
                         fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens", n,
                                     *r.max_tokens, context));
    }
    job.max_tokens = r.max_tokens ? *r.max_tokens : static_cast<int64_t>(context - n);
    job.stop = r.stop;
    job.grammar = r.grammar;
    job.trie = trie;
    job.frequency_penalty = r.frequency_penalty;
    job.presence_penalty = r.presence_penalty;
    job.logit_bias = r.logit_bias;
    for (const auto& entry : r.logit_bias) {
      if (entry.first >= m.tokenizer.vocab_size()) {
        serve::bad_request("invalid_value", fmt::format("'logit_bias' names token {}; the vocabulary has {}",
                                                        entry.first, m.tokenizer.vocab_size()));
      }
    }
    job.top_logprobs = r.top_logprobs;
    // Per-key isolation: a prompt reuses cached rows only of prompts sent with the same key.
    if (prefix_cache == PrefixCache::PerKey) job.cache_scope = request_trace.key;
    return job;
  }

  // The chat page's opt-in (serve/fit_context.h): the oldest turns go until the prompt leaves
  // room for the reply, max_tokens if given, else half the context (as the CLI chat reserves).
  size_t fit_to_context(serve::CompletionRequest& r) const {
    std::vector<std::string> tools;
    for (const serve::ToolDef& t : r.tools.tools) tools.push_back(t.rendered);
    const size_t context = m.model.max_context();
    const size_t reserve = r.max_tokens ? static_cast<size_t>(*r.max_tokens) : context / 2;
    const auto count = [&](std::span<const ChatMessage> messages) -> size_t {
      size_t bytes = 0;
      for (const ChatMessage& msg : messages) bytes += msg.content.size();
      if (bytes / (3 * max_token_bytes) >= context) return SIZE_MAX;  // as make_job's bound
      return encode_chat(m.tokenizer, messages, /*add_generation_prompt=*/true, SpecialTokens::AllAsText, tools).size();
    };
    return serve::drop_oldest_turns(r.messages, context, reserve, r.max_tokens ? reserve : 1, count);
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    serve::CompletionRequest r;
    serve::Job job;
    try {
      // A grammar's compilation stops when the client leaves or the server stops.
      r = serve::parse_request(
          req.body, endpoint, [this] { return stopping.load() || serve::Front::client_gone(); }, options.grammar_steps);
      if (req.has_header(serve::kFitContextHeader)) {
        if (req.get_header_value(serve::kFitContextHeader) != serve::kFitContextValue || endpoint != Endpoint::Chat) {
          serve::bad_request("invalid_value", fmt::format("the header {} takes '{}' on /v1/chat/completions only",
                                                          serve::kFitContextHeader, serve::kFitContextValue));
        }
        res.set_header(serve::kDroppedTurnsHeader, std::to_string(fit_to_context(r)));
      }
      job = make_job(r);
    } catch (const ApiError& e) {
      if (serve::Front::client_gone()) {  // left while its grammar compiled (which stopped)
        res.status = 499;
        return;
      }
      send_error(res, e);
      return;
    }
    if (serve::Front::client_gone()) {  // left while its prompt was tokenized
      res.status = 499;
      return;
    }
    std::vector<int32_t> job_prompt;
    if (r.return_token_ids) job_prompt = job.prompt;
    std::shared_ptr<serve::Channel> channel = scheduler->submit(std::move(job));
    request_trace.channel = channel;
    if (!channel) {
      res.set_header("Retry-After", "1");
      send_error(res, stopping ? ApiError(503, "server_error", "shutting_down", "the server is shutting down")
                               : ApiError(503, "server_error", "queue_full", "the request queue is full; retry later"));
      return;
    }
    const serve::ResponseId id{fmt::format("{}-{}", endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl", next_id++),
                               unix_now(), model_id};
    const bool want_logprobs = r.top_logprobs >= 0;
    if (!r.stream) {
      std::string text;
      std::vector<serve::TokenLogprob> logprobs;
      while (true) {
        std::optional<serve::Channel::Piece> p = channel->next_for(std::chrono::milliseconds(100));
        if (p) {
          text += p->text;
          for (auto& lp : p->logprobs) logprobs.push_back(std::move(lp));
        }
        if (p && p->done) break;
        // Between steps: a client that left frees its place (queued) or its slot (running).
        if (serve::Front::client_gone()) {
          channel->cancel();
          res.status = 499;  // nginx's "client closed request": counted, never seen
          return;
        }
      }
      if (channel->outcome() == serve::Outcome::Finished) {
        const serve::TokenIds ids{job_prompt, channel->completion_ids()};
        serve::FinishReason finish = channel->finish_reason();
        std::optional<serve::ParsedOutput> parsed;
        if (r.tools.parse()) {
          parsed = serve::parse_tool_output(text, r.tools);
          if (!parsed->calls.empty() && finish == serve::FinishReason::Stop) finish = serve::FinishReason::ToolCalls;
        }
        res.set_content(serve::response_json(endpoint, id, parsed ? parsed->content : text, finish, channel->usage(),
                                             r.return_token_ids ? &ids : nullptr, want_logprobs ? &logprobs : nullptr,
                                             parsed ? &parsed->calls : nullptr),
                        "application/json");
      } else if (channel->outcome() == serve::Outcome::Cancelled) {
        send_error(res,
                   ApiError(503, "server_error", "cancelled", "the generation was cancelled (server shutting down)"));
      } else {
        send_error(res, ApiError(500, "server_error", "generation_failed", channel->error()));
      }
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    const bool include_usage = r.include_usage;
    bool first = true;
    size_t offset = 0;
    // Tool calls: content is streamed as soon as it cannot start a <tool_call> block, each call
    // in one delta once its block is complete.
    std::shared_ptr<serve::ToolCallParser> tool_parser;
    if (r.tools.parse()) {
      std::vector<std::string> names;
      for (const serve::ToolDef& t : r.tools.tools) names.push_back(t.name);
      tool_parser = std::make_shared<serve::ToolCallParser>(std::move(names), r.tools.max_calls());
    }
    res.set_chunked_content_provider(
        "text/event-stream",
        [channel, id, endpoint, include_usage, first, want_logprobs, offset, tool_parser](
            size_t, httplib::DataSink& sink) mutable {
          const auto event = [&](const std::string& payload) {
            const std::string line = "data: " + payload + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (first && endpoint == Endpoint::Chat) {
            first = false;
            return event(serve::chunk_json(endpoint, id, {.role = true}));
          }
          const std::optional<serve::Channel::Piece> next = channel->next_for(std::chrono::milliseconds(100));
          if (!next) return !serve::Front::client_gone();  // false: cancelled by the releaser
          const serve::Channel::Piece& p = *next;
          if (tool_parser) {
            std::vector<serve::ToolCallParser::Event> events;
            tool_parser->feed(p.text, events);
            if (p.done) tool_parser->finish(events);
            const size_t calls_before =
                tool_parser->calls() - static_cast<size_t>(std::count_if(
                                           events.begin(), events.end(),
                                           [](const serve::ToolCallParser::Event& e) { return e.call.has_value(); }));
            size_t index = calls_before;
            bool logprobs_sent = !want_logprobs || p.logprobs.empty();
            for (const serve::ToolCallParser::Event& e : events) {
              serve::ChunkParts parts;
              if (e.call) {
                parts.tool_call = &*e.call;
                parts.tool_index = index++;
              } else {
                parts.text = e.content;
              }
              if (!logprobs_sent) parts.logprobs = &p.logprobs;
              logprobs_sent = true;
              if (!event(serve::chunk_json(endpoint, id, parts))) return false;
            }
            if (!logprobs_sent && !event(serve::chunk_json(endpoint, id, {.logprobs = &p.logprobs}))) return false;
          } else if (!p.text.empty() || (want_logprobs && !p.logprobs.empty())) {
            serve::ChunkParts parts{.text = p.text};
            if (want_logprobs) parts.logprobs = &p.logprobs;
            parts.text_offset = offset;
            for (const auto& lp : p.logprobs) offset += lp.token.size();
            if (!event(serve::chunk_json(endpoint, id, parts))) return false;
          }
          if (!p.done) return true;
          bool ok = true;
          if (channel->outcome() == serve::Outcome::Finished) {
            serve::FinishReason finish = channel->finish_reason();
            if (tool_parser && tool_parser->calls() > 0 && finish == serve::FinishReason::Stop) {
              finish = serve::FinishReason::ToolCalls;
            }
            ok = event(serve::chunk_json(endpoint, id, {.finish = finish}));
            if (ok && include_usage) ok = event(serve::chunk_json(endpoint, id, {.usage = channel->usage()}));
          } else {
            // Headers are gone: the error travels as an event, as OpenAI's streams do.
            ok = event(serve::error_json(
                channel->outcome() == serve::Outcome::Cancelled
                    ? ApiError(503, "server_error", "cancelled", "the generation was cancelled (server shutting down)")
                    : ApiError(500, "server_error", "generation_failed", channel->error())));
          }
          if (ok) ok = event("[DONE]");
          if (ok) sink.done();
          return ok;
        },
        // A client that went away (or a finished stream: then it is a no-op) cancels.
        [channel](bool) { channel->cancel(); });
  }

  // The status the log and /metrics count, once the request's generation (if any) has ended.
  // The logger runs after the answer's last byte, or after the client left: a generation still
  // running then has lost its client and is cancelled (httplib's releaser would do it right
  // after), and its counts are read once the scheduler has closed it, at its next step. A
  // stream whose client left before its end went out with status 200 in its headers; it is
  // counted 499, as a non-streaming request whose client left is.
  int settle(const httplib::Response& res) const {
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
          res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
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
      res.set_content(serve::models_json(model_id, created), "application/json");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      if (stopping) {
        send_error(res, ApiError(503, "server_error", "shutting_down", "the server is shutting down"));
        return;
      }
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.render(scheduler->queue_depth(), scheduler->active()), "text/plain; version=0.0.4");
    });
  }
};

Server::Server(const OpenedModel& model, const ServeOptions& options) : impl_(std::make_unique<Impl>(model, options)) {}

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
  return impl_->model_id;
}
PrefixCache Server::prefix_cache() const {
  return impl_->prefix_cache;
}

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  s.scheduler->shutdown();  // releases every handler waiting on a channel
  s.http.shutdown();
}

}  // namespace nanoinfer
