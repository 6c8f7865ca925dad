// `nanoinfer serve`: the OpenAI-compatible HTTP server (nanoinfer/server.h). Prints its URL on
// stdout once it listens; SIGINT or SIGTERM stops it (in-flight requests are cancelled) and
// the process exits 0.
#include <fmt/format.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/hub_cache.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/server.h"
#include "speculation_options.h"

namespace nanoinfer::cli {
namespace {

struct ServeFlags {
  ModelFlags model;                 // the options every model is opened with (-m aside)
  std::vector<std::string> models;  // -m, repeated; none: the embedded model (or --models-dir's)
  std::string models_dir;
  std::vector<std::string> model_ids;  // --model-id, one per model in order
  int64_t max_loaded = 0;
  double load_wait = 120;
  std::string host = "127.0.0.1";
  int port = 8080;
  int64_t parallel = 4;
  int64_t queue = 64;
  int64_t prefill_chunk = 512;
  int64_t step_tokens = 8;
  double step_latency = 1.8;
  std::vector<std::string> api_keys;
  std::string prefix_cache;  // "" = the default (per-key with two keys or more, else shared)
  int64_t max_connections = 512;
  int64_t grammar_steps = 64'000'000;
  bool quiet = false;
  bool no_web_page = false;
  std::vector<std::string> cors;
  std::string pooling;  // --pooling: /v1/embeddings' pooling over the model's own
  SpeculationFlags speculation;
  std::string reasoning = "on";
};

// 127.0.0.0/8 and ::1 (also as an IPv4-mapped address).
bool loopback(const std::string& host) {
  in_addr a4;
  if (::inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  in6_addr a6;
  if (::inet_pton(AF_INET6, host.c_str(), &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
  }
  return false;
}

// A model and what it drafts with: one allocation that the served model's pointer and its
// drafter factory keep alive, freed when the server unloads the model.
struct ModelWithSpeculation {
  OpenedModel m;
  Speculation speculation;
};

LoadedModel open_served(const ModelFlags& flags, const SpeculationFlags& speculation, std::optional<Pooling> pooling) {
  auto both = std::make_shared<ModelWithSpeculation>(ModelWithSpeculation{load_model(flags), Speculation(speculation)});
  if (pooling) both->m.pooling = {.pooling = pooling, .origin = "--pooling"};
  both->speculation.load(flags, both->m);
  LoadedModel loaded{.model = std::shared_ptr<const OpenedModel>(both, &both->m)};
  if (both->speculation.enabled()) {
    // Each sequence's drafter; its sampling follows each request (Drafter::set_sampling).
    loaded.make_drafter = [both] { return both->speculation.make_drafter(both->m, {.temperature = 0.0}); };
    loaded.draft_max = both->speculation.draft_max();
  }
  return loaded;
}

// The -m paths in order, then --models-dir's models (subdirectories holding config.json, and
// .gguf files, by name). None: the embedded model ("").
std::vector<std::string> model_paths(const ServeFlags& f) {
  std::vector<std::string> paths = f.models;
  for (std::string& p : paths) {
    if (p.empty()) continue;
    p = resolve_model_path(p).string();  // ORG/NAME: the hub cache's snapshot
    if (!std::filesystem::exists(p)) fail("-m {}: no such file or directory", escape_control(p));
  }
  if (!f.models_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(f.models_dir, ec)) {
      const std::filesystem::path& p = entry.path();
      if ((entry.is_directory() && std::filesystem::exists(p / "config.json")) ||
          (entry.is_regular_file() && p.extension() == ".gguf")) {
        found.push_back(p.string());
      }
    }
    if (ec) fail("--models-dir {}: {}", escape_control(f.models_dir), ec.message());
    if (found.empty()) {
      fail("--models-dir {}: no model in it (a model is a subdirectory holding config.json, or a .gguf file)",
           escape_control(f.models_dir));
    }
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  if (paths.empty()) paths.push_back("");
  if (f.model_ids.size() > paths.size()) {
    fail("{} --model-id values for {} model(s): give at most one per model, in the order of -m", f.model_ids.size(),
         paths.size());
  }
  return paths;
}

void run(const ServeFlags& f) {
  if (f.parallel < 1) fail("--parallel must be >= 1, got {}", f.parallel);
  require_non_negative(f.queue, "--queue");
  if (f.prefill_chunk < 1 || f.prefill_chunk > 1 << 20) {
    fail("--prefill-chunk must be in 1..1048576, got {}", f.prefill_chunk);
  }
  if (f.step_tokens < 1 || f.step_tokens > 1 << 20) fail("--step-tokens must be in 1..1048576, got {}", f.step_tokens);
  if (!(f.step_latency == 0 || (f.step_latency >= 1 && f.step_latency <= 1000)))
    fail("--step-latency must be 0 (off) or in 1..1000, got {}", f.step_latency);
  // cpp-httplib answers 500 on a descriptor >= FD_SETSIZE (1024): stay well below it.
  if (f.max_connections < 1 || f.max_connections > 900) {
    fail("--max-connections must be in 1..900, got {}", f.max_connections);
  }
  for (const std::string& key : f.api_keys) {
    if (key.empty()) fail("--api-key is empty: give a key, or leave the option out to serve without authentication");
  }
  PrefixCache prefix_cache = PrefixCache::Auto;
  if (f.prefix_cache == "shared") {
    prefix_cache = PrefixCache::Shared;
  } else if (f.prefix_cache == "per-key") {
    prefix_cache = PrefixCache::PerKey;
  } else if (f.prefix_cache == "off") {
    prefix_cache = PrefixCache::Off;
  } else if (!f.prefix_cache.empty()) {
    fail("--prefix-cache must be shared, per-key or off, got '{}'", escape_control(f.prefix_cache));
  }
  if (f.port < 0 || f.port > 65535) fail("--port must be in 0..65535 (0 = any free port), got {}", f.port);
  // Signals are taken by sigwait on this thread only: every thread started from here on
  // inherits the mask, so none of them is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (f.max_loaded < 0) fail("--max-loaded must be >= 0 (0 = no limit), got {}", f.max_loaded);
  if (!(f.load_wait >= 0 && f.load_wait <= 86400)) fail("--load-wait must be in 0..86400 seconds, got {}", f.load_wait);
  const Speculation speculation(f.speculation);  // validates the flags before anything loads
  std::optional<Pooling> pooling;
  if (!f.pooling.empty()) pooling = parse_pooling(f.pooling);
  const std::vector<std::string> paths = model_paths(f);
  std::vector<ServedModel> models;
  for (size_t i = 0; i < paths.size(); ++i) {
    ModelFlags flags = f.model;
    flags.model_dir = paths[i];
    models.push_back({.id = i < f.model_ids.size() ? f.model_ids[i] : "",
                      .path = paths[i].empty() ? embedded_model_label() : std::filesystem::path(paths[i]),
                      .load = [flags, s = f.speculation, pooling] { return open_served(flags, s, pooling); }});
  }
  LoadedModel first = models.front().load();
  // What the start-up line says of the default model, which may be unloaded once serving.
  const std::filesystem::path first_dir = first.model->dir;
  const size_t first_context = first.model->model.max_context();
  const double first_load_seconds = first.model->load_seconds;
  models.front().path = first_dir;
  ServeOptions options;
  options.max_loaded = static_cast<size_t>(f.max_loaded);
  options.slot_wait_seconds = f.load_wait;
  options.host = f.host;
  options.port = f.port;
  options.parallel = static_cast<size_t>(f.parallel);
  options.queue = static_cast<size_t>(f.queue);
  options.prefill_chunk = static_cast<size_t>(f.prefill_chunk);
  options.step_tokens = static_cast<size_t>(f.step_tokens);
  options.step_latency = f.step_latency;
  options.api_keys = f.api_keys;
  options.prefix_cache = prefix_cache;
  options.max_connections = static_cast<size_t>(f.max_connections);
  if (f.grammar_steps < 1'000'000 || f.grammar_steps > 1'000'000'000'000) {
    fail("--grammar-steps must be in 1000000..1000000000000, got {}", f.grammar_steps);
  }
  options.grammar_steps = static_cast<uint64_t>(f.grammar_steps);
  options.access_log = !f.quiet;
  options.web_page = !f.no_web_page;
  for (const std::string& origin : f.cors) {
    // It is written into a response header: CR LF there would start a header of its own.
    if (std::any_of(origin.begin(), origin.end(), [](char c) { return c < 0x21 || c > 0x7E; })) {
      fail(
          "--cors: the origin '{}' holds a space, a control character or a non-ASCII byte; an origin is "
          "printable ASCII such as http://localhost:3000",
          escape_control(origin));
    }
    // An origin is scheme://host[:port], nothing after: what a browser sends in Origin.
    const size_t scheme = origin.find("://");
    if (origin != "*" && (scheme == std::string::npos || origin.find('/', scheme + 3) != std::string::npos ||
                          scheme + 3 == origin.size())) {
      fail("--cors takes '*' or an origin such as http://localhost:3000 (scheme, host and port only), got '{}'",
           origin);
    }
    options.cors_origins.push_back(origin);
  }
  options.reasoning = f.reasoning == "off" ? Reasoning::Off : f.reasoning == "raw" ? Reasoning::Raw : Reasoning::On;
  Server server(std::move(models), options, std::move(first));
  server.start();
  if (f.api_keys.empty() && !loopback(f.host)) {
    fmt::print(stderr,
               "nanoinfer: warning: listening on {} without --api-key: anyone who can reach this "
               "address can use the model (see docs/SERVING.md)\n",
               f.host);
  }
  fmt::print(stderr, "nanoinfer: serving '{}' ({}, context {}, {} parallel, queue {}; load {:.2f} s)\n",
             server.model_id(), first_dir.string(), first_context, options.parallel, options.queue, first_load_seconds);
  for (size_t i = 1; i < paths.size(); ++i) {
    fmt::print(stderr, "nanoinfer: serving '{}' too ({}; loaded on first use)\n", server.model_ids()[i],
               escape_control(paths[i].empty() ? embedded_model_label().string() : paths[i]));
  }
  if (paths.size() > 1 && options.max_loaded > 0 && options.max_loaded < paths.size()) {
    fmt::print(stderr,
               "nanoinfer: at most {} model(s) loaded at once: the least recently used idle one is unloaded to "
               "load another\n",
               options.max_loaded);
  }
  if (!f.api_keys.empty()) {
    fmt::print(stderr, "nanoinfer: /v1/* requires an API key ('Authorization: Bearer KEY', {})\n",
               f.api_keys.size() == 1 ? "the --api-key value"
                                      : fmt::format("one of the {} --api-key values", f.api_keys.size()));
  }
  switch (server.prefix_cache()) {
    case PrefixCache::PerKey:
      fmt::print(stderr,
                 "nanoinfer: prefix cache per key: a prompt reuses only cached prompts sent with its own key\n");
      break;
    case PrefixCache::Off:
      fmt::print(stderr, "nanoinfer: prefix cache off: every prompt is prefilled in full\n");
      break;
    default:
      fmt::print(stderr, "nanoinfer: prefix cache shared: any request reuses any cached prompt (--prefix-cache)\n");
  }
  if (speculation.enabled())
    fmt::print(stderr, "nanoinfer: speculative decoding: {}\n", speculation.describe(/*timed=*/false));
  const bool ipv6 = f.host.find(':') != std::string::npos;
  fmt::print("http://{}{}{}:{}/v1\n", ipv6 ? "[" : "", f.host, ipv6 ? "]" : "", server.port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "nanoinfer: {} received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  // Stopping cancels generations and grammar compilations and waits for their threads, which
  // notice within a step. Whatever still runs after kStopSeconds, or a second signal, does not
  // keep the process alive: it ends here, saying so.
  static constexpr int kStopSeconds = 5;
  std::thread([signals] {
    // sigtimedwait returns early with EINTR when another signal (one the sanitizers use, say)
    // interrupts it: wait again for what is left of the time.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kStopSeconds);
    int again = -1;
    for (auto left = deadline - std::chrono::steady_clock::now(); left > left.zero();
         left = deadline - std::chrono::steady_clock::now()) {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      const timespec wait{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      again = sigtimedwait(&signals, nullptr, &wait);
      if (again > 0 || errno != EINTR) break;
    }
    fmt::print(stderr, "nanoinfer: {}; exiting now\n",
               again > 0 ? "a second signal received" : fmt::format("still stopping after {} s", kStopSeconds));
    std::fflush(stderr);
    std::_Exit(1);
  }).detach();
  server.stop();
}

void setup_serve(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  add_model_flags(app, f->model);
  // serve takes -m once per model.
  app.remove_option(app.get_option("-m"));
  app.add_option("-m,--model", f->models,
                 "Model directory (config.json, model.safetensors, tokenizer.json), a .gguf file, or "
                 "ORG/NAME[@REVISION][:QUANT] of the Hugging Face cache (see `nanoinfer pull`); repeat to "
                 "serve several: a request's \"model\" picks one by id (the directory or file name, or "
                 "--model-id), the first is the default and loads at start, the others on first use "
                 "(default: the model built into this binary). The other model flags apply to every model")
      ->type_name("PATH");
  app.add_option("--models-dir", f->models_dir,
                 "Serve every model in DIR too (each subdirectory holding config.json, and each .gguf file, by "
                 "name), after the -m models")
      ->type_name("DIR");
  app.add_option("--max-loaded", f->max_loaded,
                 "Models loaded at once (default 0 = no limit): loading another unloads the least recently "
                 "used model that runs no request; when all run requests, the request waits (--load-wait)");
  app.add_option("--load-wait", f->load_wait,
                 "Seconds a request for an unloaded model waits for a loaded one to finish its requests so "
                 "it can be unloaded (--max-loaded); then 503 (default 120)")
      ->type_name("SECONDS");
  CLI::Option* ctx = app.get_option("--ctx-size");
  ctx->description(ctx->get_description() + "; per sequence: each of the --parallel sequences has a cache this long");
  app.add_option("--host", f->host,
                 "Numeric address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 or :: = all)");
  app.add_option("--port", f->port, "Port (default 8080; 0 = any free port, printed)");
  app.add_option("--parallel", f->parallel, "Sequences generated together (default 4)");
  app.add_option("--queue", f->queue, "Requests that may wait for a free sequence; more get 503 (default 64)");
  app.add_option("--prefill-chunk", f->prefill_chunk,
                 "Prompt tokens prefilled per scheduler step while no sequence decodes (default 512)");
  app.add_option("--step-tokens", f->step_tokens,
                 "Rows per scheduler step while sequences decode (default 8): each step is one forward pass "
                 "holding every decoding sequence's token and, up to this count, the next chunk of a prompt "
                 "being prefilled; smaller keeps the running streams' token rate steadier while a long prompt "
                 "arrives, larger prefills it sooner. With --step-latency (on by default) it sets only the "
                 "first such step's rows");
  app.add_option("--step-latency", f->step_latency,
                 "While a prompt prefills beside running streams, give it as many rows per step as keep a "
                 "step near this many times a decode-only step's measured time, i.e. the streams' time per "
                 "token (default 1.8; larger prefills the prompt sooner; 0 = a fixed --step-tokens)");
  app.add_option("--api-key", f->api_keys,
                 "Require 'Authorization: Bearer KEY' on /v1/* (without it, only requests whose Host is an "
                 "IP address or localhost are answered); repeat for several keys, one per client")
      ->type_name("KEY");
  app.add_option("--prefix-cache", f->prefix_cache,
                 "Whose cached prompts a request may reuse: shared (any), per-key (those sent with its own "
                 "API key) or off (none). Reuse answers sooner, which lets a client tell whether a prompt "
                 "was sent before (default: per-key with two --api-key values or more, else shared)")
      ->type_name("MODE");
  app.add_option("--grammar-steps", f->grammar_steps,
                 "Work one request's grammar or schema may take to compile, in steps of ~46 ns; "
                 "past it the request gets a 400 (default 64000000, ~3 s)");
  app.add_option("--max-connections", f->max_connections,
                 "Connections open at once, 1..900; more are answered 503 and closed (default 512)");
  app.add_option("--model-id", f->model_ids,
                 "Model name reported by /v1/models and matched against a request's \"model\" (default: the "
                 "directory or file name); repeat to name the models of -m in order")
      ->type_name("ID");
  app.add_flag("--no-webui", f->no_web_page, "Do not serve the chat page at / (the API only)");
  add_speculation_flags(app, f->speculation);
  app.add_flag("-q,--quiet", f->quiet,
               "No access log (by default one line per request on stderr: client, method, "
               "path, status, prompt+completion tokens, seconds)");
  app.add_option("--cors", f->cors,
                 "Let web pages from ORIGIN call the API from a browser (CORS headers, preflights answered); "
                 "'*' for any origin; repeat for several")
      ->type_name("ORIGIN");
  app.add_option("--pooling", f->pooling,
                 "Pooling of /v1/embeddings: mean, cls (first token) or last (default: the model's own, from "
                 "1_Pooling/config.json or the GGUF pooling_type; else last)");
  app.add_option("--reasoning", f->reasoning,
                 "A reasoning model's thinking (Qwen3's <think> block), by default: on (it thinks; the "
                 "reasoning is returned as reasoning_content), off (it answers without thinking) or raw (it "
                 "thinks; the <think> block stays in the content). A request overrides on/off with "
                 "chat_template_kwargs.enable_thinking (default on)")
      ->check(CLI::IsMember({"on", "off", "raw"}))
      ->type_name("MODE");
  app.callback([f] { run(*f); });
}

const bool registered_serve =
    register_command({"", "serve", "Serve the model over an OpenAI-compatible HTTP API", setup_serve});

}  // namespace
}  // namespace nanoinfer::cli
