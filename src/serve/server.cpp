// The HTTP side of `nanoinfer serve` (cpp-httplib): routes, API key, error JSON, streaming.
// Each request is parsed and tokenized on its handler thread, checked against the context,
// then handed to the scheduler; the handler drains the request's channel into one response or
// into server-sent events.
#include <httplib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/serve.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/scheduler.h"

namespace nanoinfer {

using serve::ApiError;
using serve::Endpoint;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(serve::error_json(e), "application/json");
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
  httplib::Server http;
  std::thread listener;
  int port = 0;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  std::vector<int32_t> text_eos, chat_eos;
  std::shared_ptr<const VocabTrie> trie;  // the vocabulary's byte trie, for grammars

  Impl(const OpenedModel& model, const ServeOptions& opts) : m(model), options(opts) {
    model_id = options.model_id.empty() ? default_model_id(m.dir) : options.model_id;
    text_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/false);
    chat_eos = stop_token_ids(m.generation, m.tokenizer, /*chat=*/true);
    trie = VocabTrie::of(m.tokenizer);
    scheduler = std::make_unique<serve::Scheduler>(
        m.model, m.tokenizer, serve::SchedulerOptions{options.parallel, options.queue}, metrics);
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
    if (r.endpoint == Endpoint::Chat) {
      job.prompt = encode_chat_prompt(m.tokenizer, r.messages);
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
                                     "token must be generated)", n, context));
    }
    if (r.max_tokens && n + static_cast<size_t>(*r.max_tokens) > context) {
      serve::bad_request("context_length_exceeded",
                         fmt::format("the prompt ({} tokens) plus max_tokens ({}) exceeds the context of {} tokens",
                                     n, *r.max_tokens, context));
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
        serve::bad_request("invalid_value", fmt::format("'logit_bias' names token {}; the vocabulary has {}", entry.first,
                                                        m.tokenizer.vocab_size()));
      }
    }
    job.top_logprobs = r.top_logprobs;
    return job;
  }

  void completion(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
    serve::CompletionRequest r;
    serve::Job job;
    try {
      r = serve::parse_request(req.body, endpoint);
      job = make_job(r);
    } catch (const ApiError& e) {
      send_error(res, e);
      return;
    }
    std::vector<int32_t> job_prompt;
    if (r.return_token_ids) job_prompt = job.prompt;
    std::shared_ptr<serve::Channel> channel = scheduler->submit(std::move(job));
    if (!channel) {
      res.set_header("Retry-After", "1");
      send_error(res, stopping ? ApiError(503, "server_error", "shutting_down", "the server is shutting down")
                               : ApiError(503, "server_error", "queue_full",
                                          "the request queue is full; retry later"));
      return;
    }
    const serve::ResponseId id{fmt::format("{}-{}", endpoint == Endpoint::Chat ? "chatcmpl" : "cmpl", next_id++),
                               unix_now(), model_id};
    const bool want_logprobs = r.top_logprobs >= 0;
    if (!r.stream) {
      std::string text;
      std::vector<serve::TokenLogprob> logprobs;
      for (serve::Channel::Piece p = channel->next();; p = channel->next()) {
        text += p.text;
        for (auto& lp : p.logprobs) logprobs.push_back(std::move(lp));
        if (p.done) break;
      }
      if (channel->outcome() == serve::Outcome::Finished) {
        const serve::TokenIds ids{job_prompt, channel->completion_ids()};
        res.set_content(serve::response_json(endpoint, id, text, channel->finish_reason(), channel->usage(),
                                             r.return_token_ids ? &ids : nullptr, want_logprobs ? &logprobs : nullptr),
                        "application/json");
      } else if (channel->outcome() == serve::Outcome::Cancelled) {
        send_error(res, ApiError(503, "server_error", "cancelled", "the generation was cancelled (server shutting down)"));
      } else {
        send_error(res, ApiError(500, "server_error", "generation_failed", channel->error()));
      }
      return;
    }
    res.set_header("Cache-Control", "no-cache");
    const bool include_usage = r.include_usage;
    bool first = true;
    size_t offset = 0;
    res.set_chunked_content_provider(
        "text/event-stream",
        [channel, id, endpoint, include_usage, first, want_logprobs, offset](size_t, httplib::DataSink& sink) mutable {
          const auto event = [&](const std::string& payload) {
            const std::string line = "data: " + payload + "\n\n";
            return sink.write(line.data(), line.size());
          };
          if (first && endpoint == Endpoint::Chat) {
            first = false;
            return event(serve::chunk_json(endpoint, id, {.role = true}));
          }
          const serve::Channel::Piece p = channel->next();
          if (!p.text.empty() || (want_logprobs && !p.logprobs.empty())) {
            serve::ChunkParts parts{.text = p.text};
            if (want_logprobs) parts.logprobs = &p.logprobs;
            parts.text_offset = offset;
            for (const auto& lp : p.logprobs) offset += lp.token.size();
            if (!event(serve::chunk_json(endpoint, id, parts))) return false;
          }
          if (!p.done) return true;
          bool ok = true;
          if (channel->outcome() == serve::Outcome::Finished) {
            ok = event(serve::chunk_json(endpoint, id, {.finish = channel->finish_reason()}));
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

  void routes() {
    http.set_payload_max_length(options.max_body_bytes);
    // Waiting requests each hold a handler thread while they drain their channel.
    const size_t threads = std::min<size_t>(options.parallel + options.queue + 8, 1024);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_keep_alive_timeout(2);

    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (options.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
      if (req.get_header_value("Authorization") == "Bearer " + options.api_key) {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      send_error(res, ApiError(401, "authentication_error", "invalid_api_key",
                               "missing or wrong API key (send 'Authorization: Bearer <key>')"));
      return httplib::Server::HandlerResponse::Handled;
    });
    // Statuses set by the library itself (unknown route, body too large, unparsable request)
    // get the same JSON as ours.
    http.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
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
    http.set_logger([this](const httplib::Request&, const httplib::Response& res) { metrics.count_request(res.status); });

    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completion(req, res, Endpoint::Chat);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      completion(req, res, Endpoint::Completion);
    });
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

Server::Server(const OpenedModel& model, const ServeOptions& options)
    : impl_(std::make_unique<Impl>(model, options)) {}

Server::~Server() { stop(); }

void Server::start() {
  Impl& s = *impl_;
  if (s.options.port < 0 || s.options.port > 65535) fail("--port must be in 0..65535, got {}", s.options.port);
  if (s.options.port == 0) {
    s.port = s.http.bind_to_any_port(s.options.host);
    if (s.port <= 0) fail("cannot listen on {} (any port): {}", s.options.host, std::strerror(errno));
  } else {
    if (!s.http.bind_to_port(s.options.host, s.options.port)) {
      fail("cannot listen on {}:{}: {}", s.options.host, s.options.port, std::strerror(errno));
    }
    s.port = s.options.port;
  }
  s.listener = std::thread([&s] { s.http.listen_after_bind(); });
}

int Server::port() const { return impl_->port; }
const std::string& Server::model_id() const { return impl_->model_id; }

void Server::stop() {
  Impl& s = *impl_;
  if (s.stopping.exchange(true)) return;
  s.scheduler->shutdown();  // releases every handler waiting on a channel
  s.http.stop();
  if (s.listener.joinable()) s.listener.join();
}

}  // namespace nanoinfer
