// `nanoinfer perplexity -f FILE`: perplexity of a text file under a model, in non-overlapping
// windows of -c tokens (protocol in nanoinfer/perplexity.h). Result on stdout (a line, or JSON
// with --json); a progress line on stderr for runs longer than a second or so.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

#include "command.h"
#include "output.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/perplexity.h"

namespace nanoinfer::cli {
namespace {

constexpr size_t kDefaultWindow = 512;

struct PerplexityFlags {
  ModelFlags model;
  std::string file;
  bool json = false;
};

void run(const PerplexityFlags& f) {
  const std::string text = read_file(f.file, kMaxTextFileBytes);
  OpenedModel m = load_model(f.model);
  const size_t ctx = f.model.context > 0 ? static_cast<size_t>(f.model.context)
                                         : std::min(kDefaultWindow, m.model.max_context());
  const std::vector<int32_t> tokens = m.tokenizer.encode(text);
  if (tokens.size() < 2) fail("'{}' has {} token(s); perplexity needs at least 2", f.file, tokens.size());

  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  const PerplexityResult r = perplexity(m.model, tokens, ctx, [&](size_t done, size_t total, const PerplexityResult& so_far) {
    const auto now = std::chrono::steady_clock::now();
    if (now - last_report < std::chrono::seconds(1) || done == total) return;
    last_report = now;
    fmt::print(stderr, "perplexity: window {}/{}, {} tokens scored, running perplexity {:.4f}\n", done, total,
               so_far.scored, so_far.perplexity);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (f.json) {
    const nlohmann::json j = {{"model", m.dir.string()},
                              {"file", f.file},
                              {"ctx", r.ctx},
                              {"tokens", r.tokens},
                              {"windows", r.windows},
                              {"scored", r.scored},
                              {"nll_sum", r.nll_sum},
                              {"mean_nll", r.mean_nll},
                              {"perplexity", r.perplexity},
                              {"perplexity_stderr", r.perplexity_stderr},
                              {"seconds", seconds},
                              {"tokens_per_second", static_cast<double>(r.tokens) / seconds},
                              {"threads", m.model.options().threads},
                              {"weights", std::string(weight_type_name(m.model.weight_type()))}};
    print_out("{}\n", j.dump());
    return;
  }
  print_out("perplexity {:.4f} +/- {:.4f} ({} tokens scored in {} windows of {}; {:.2f} s, {:.0f} tok/s)\n",
             r.perplexity, r.perplexity_stderr, r.scored, r.windows, r.ctx, seconds,
             static_cast<double>(r.tokens) / seconds);
}

void setup(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  add_model_flags(app, f->model);
  app.add_option("-f,--file", f->file, "Text file to score")->required();
  app.add_flag("--json", f->json, "Print the result as one JSON object");
  app.footer("Windows are -c tokens (default 512, or the model's context if smaller), non-overlapping; "
             "the first token of each window is not scored.");
  app.callback([f] { run(*f); });
}

const bool registered = register_command(
    {"", "perplexity", "Perplexity of a text file under a model (+- standard error)", setup});

}  // namespace
}  // namespace nanoinfer::cli
