// `nanoinfer viz -p TEXT`: runs the model with an attention tap and shows what it did in the
// browser page of docs/VIZ.md — the candidates of every step, the attention of every layer and
// head, and cached decoding racing full recomputation — served on 127.0.0.1 or written to one
// self-contained HTML file with --out. The trace is recorded by the library
// (nanoinfer/viz_trace.h); this command writes or serves it.
#include <fmt/format.h>

#include <cstdio>

#include "command.h"
#include "common_options.h"
#include "http_serve.h"
#include "nanoinfer/atomic_write.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/model_files.h"
#include "nanoinfer/viz_trace.h"
#include "viz_page.h"

namespace nanoinfer::cli {
namespace {

struct VizFlags : PromptFlags {
  std::string out;
  std::string trace_out;
  int port = 8080;
  uint64_t max_requests = 0;  // hidden, for tests: stop serving after this many requests
  bool verbose = false;
};

void run(const VizFlags& f, bool port_given) {
  require_prompt(f, "viz");
  if (f.n_predict < 1) fail("-n must be >= 1 (the page shows at least one step), got {}", f.n_predict);
  if (!f.out.empty() && port_given) fail("--out and --port exclude each other: write a file or serve the page");
  if (f.port < 0 || f.port > 65535) fail("--port must be in [0, 65535], got {}", f.port);
  // Refused before the model runs: an output the final rename must not replace.
  for (const std::string& target : {f.out, f.trace_out}) {
    if (!target.empty()) require_replaceable_file(target);
  }
  OpenedModel m = load_model(f.model);
  const SamplingSettings sampling = resolve_sampling(m.generation, f.sampling);
  if (f.verbose) fmt::print(stderr, "{}", sampling.describe());
  VizTraceRequest request;
  request.model_label = f.model.model_dir.empty() ? embedded_model_label().string() : f.model.model_dir;
  request.prompt_text = f.prompt;
  request.prompt = encode_prompt(m.tokenizer, f);
  request.n_predict = f.n_predict;
  request.params = sampling.params();
  request.eos_ids = stop_token_ids(m.generation, m.tokenizer, f.chat);
  const VizTrace trace = record_viz_trace(m.model, m.tokenizer, request);
  if (!f.trace_out.empty()) write_file_atomically(f.trace_out, trace.json + "\n");
  const std::string page = render_viz_page(trace.json);
  const std::string summary = fmt::format("traced {} steps | cached and recomputed decoding {}\n", trace.steps,
                                          trace.race_agrees ? "chose the same tokens" : "DIFFER");
  if (!f.out.empty()) {
    write_file_atomically(f.out, page);
    fmt::print(stderr, "{}", summary);
    fmt::print("wrote {}\n", f.out);
    return;
  }
  fmt::print(stderr, "{}", summary);
  serve_html(
      page, f.port,
      [](int port) {
        fmt::print("serving the page at http://127.0.0.1:{}/ (Ctrl-C to stop)\n", port);
        std::fflush(stdout);
      },
      f.max_requests);
}

void setup_viz(CLI::App& app) {
  auto f = std::make_shared<VizFlags>();
  add_prompt_flags(app, *f, 32, "Maximum tokens to generate and trace");
  app.add_option("--out", f->out, "Write the page to this HTML file (self-contained) instead of serving it");
  app.add_option("--trace", f->trace_out, "Also write the trace (JSON, docs/VIZ.md) to this file");
  CLI::Option* port =
      app.add_option("--port", f->port, "Serve the page on 127.0.0.1:PORT (default 8080; 0 = any free port)");
  app.add_option("--max-requests", f->max_requests)->group("");  // tests: stop after N requests
  app.add_flag("--verbose", f->verbose, "Print the sampling settings, the seed included, to stderr");
  app.callback([f, port] { run(*f, port->count() > 0); });
}

const bool registered_viz = register_command(
    {"", "viz", "Trace a generation and show candidates, attention and the cache race in the browser", setup_viz});

}  // namespace
}  // namespace nanoinfer::cli
