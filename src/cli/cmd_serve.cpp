// `nanoinfer serve`: the OpenAI-compatible HTTP server (nanoinfer/serve.h). Prints its URL on
// stdout once it listens; SIGINT or SIGTERM stops it (in-flight requests are cancelled) and
// the process exits 0.
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/serve.h"

namespace nanoinfer::cli {
namespace {

struct ServeFlags {
  ModelFlags model;
  std::string host = "127.0.0.1";
  int port = 8080;
  int64_t parallel = 4;
  int64_t queue = 64;
  std::string api_key;
  std::string model_id;
};

void run(const ServeFlags& f) {
  if (f.parallel < 1) fail("--parallel must be >= 1, got {}", f.parallel);
  require_non_negative(f.queue, "--queue");
  if (f.port < 0 || f.port > 65535) fail("--port must be in 0..65535 (0 = any free port), got {}", f.port);
  // Signals are taken by sigwait on this thread only: every thread started from here on
  // inherits the mask, so none of them is interrupted.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  OpenedModel m = load_model(f.model);
  ServeOptions options;
  options.host = f.host;
  options.port = f.port;
  options.parallel = static_cast<size_t>(f.parallel);
  options.queue = static_cast<size_t>(f.queue);
  options.api_key = f.api_key;
  options.model_id = f.model_id;
  Server server(m, options);
  server.start();
  fmt::print(stderr, "nanoinfer: serving '{}' ({}, context {}, {} parallel, queue {}; load {:.2f} s)\n",
             server.model_id(), m.dir.string(), m.model.max_context(), options.parallel, options.queue,
             m.load_seconds);
  const bool ipv6 = f.host.find(':') != std::string::npos;
  fmt::print("http://{}{}{}:{}/v1\n", ipv6 ? "[" : "", f.host, ipv6 ? "]" : "", server.port());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&signals, &sig);
  fmt::print(stderr, "nanoinfer: {} received, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  server.stop();
}

void setup(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  add_model_flags(app, f->model);
  app.add_option("--host", f->host, "Address to listen on (default 127.0.0.1: this machine only)");
  app.add_option("--port", f->port, "Port (default 8080; 0 = any free port, printed)");
  app.add_option("--parallel", f->parallel, "Sequences generated together (default 4)");
  app.add_option("--queue", f->queue, "Requests that may wait for a free sequence; more get 503 (default 64)");
  app.add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY' on /v1/*");
  app.add_option("--model-id", f->model_id, "Model name reported by /v1/models (default: the directory name)");
  app.callback([f] { run(*f); });
}

const bool registered = register_command(
    {"", "serve", "Serve the model over an OpenAI-compatible HTTP API", setup});

}  // namespace
}  // namespace nanoinfer::cli
