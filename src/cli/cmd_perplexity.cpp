// `nanoinfer perplexity -f FILE [--kl-base BASE]`: perplexity of a text file under a model, in
// non-overlapping windows of -c tokens (protocol in nanoinfer/perplexity.h); with --kl-base,
// also the base model's perplexity and, position by position, the KL divergence and top-1
// agreement of the model against it. Result on stdout (lines, or JSON with --json); a
// progress line on stderr for runs longer than a second or so.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/perplexity.h"
#include "output.h"

namespace nanoinfer::cli {
namespace {

constexpr size_t kDefaultWindow = 512;

struct PerplexityFlags {
  ModelFlags model;
  std::string file;
  std::string kl_base;
  bool json = false;
  std::string scoring = "all";
};

PerplexityScoring scoring_of(const std::string& name) {
  if (name == "all") return PerplexityScoring::AllPositions;
  if (name == "second-half") return PerplexityScoring::SecondHalf;
  fail("--scoring must be 'all' or 'second-half', got '{}'", name);
}

// On a terminal: one progress line, redrawn at most once a second, with the time left at the
// pace so far; erased when the run ends. Nothing when stderr is not a terminal.
PerplexityProgress progress_printer(std::string_view what) {
  if (::isatty(STDERR_FILENO) == 0) return {};
  struct State {
    std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last = start;
    bool shown = false;
  };
  auto state = std::make_shared<State>();
  return [state, what](size_t done, size_t total, const PerplexityResult& so_far) {
    const auto now = std::chrono::steady_clock::now();
    if (done == total) {
      if (state->shown) fmt::print(stderr, "\r\x1b[K");
      return;
    }
    if (now - state->last < std::chrono::seconds(1)) return;
    state->last = now;
    state->shown = true;
    const double elapsed = std::chrono::duration<double>(now - state->start).count();
    const double left = elapsed / static_cast<double>(done) * static_cast<double>(total - done);
    fmt::print(stderr, "\r{}: window {}/{}, {} tokens scored, running perplexity {:.4f}, about {:.0f} s left\x1b[K",
               what, done, total, so_far.scored, so_far.perplexity, left);
    std::fflush(stderr);
  };
}

// The standard error needs two scored tokens: with one there is none to give (not 0).
std::string plus_minus(const PerplexityResult& r) {
  return r.scored > 1 ? fmt::format("+/- {:.4f}", r.perplexity_stderr)
                      : "+/- n/a (one token scored: no error estimate)";
}
nlohmann::json stderr_json(const PerplexityResult& r) {
  return r.scored > 1 ? nlohmann::json(r.perplexity_stderr) : nlohmann::json(nullptr);
}

// The fields every result has: what was scored and how.
nlohmann::json scored_json(const PerplexityFlags& f, const PerplexityResult& r) {
  return {{"file", f.file},     {"ctx", r.ctx},         {"scoring", f.scoring},
          {"tokens", r.tokens}, {"windows", r.windows}, {"scored", r.scored}};
}

void run_kl(const PerplexityFlags& f, const std::string& text) {
  OpenedModel m = load_model(f.model);
  ModelFlags base_flags = f.model;
  base_flags.model_dir = f.kl_base;
  base_flags.dtype = "as-stored";
  OpenedModel base = load_model(base_flags);
  const size_t limit = std::min(m.model.max_context(), base.model.max_context());
  const size_t ctx = f.model.context > 0 ? static_cast<size_t>(f.model.context) : std::min(kDefaultWindow, limit);
  const std::vector<int32_t> tokens = m.tokenizer.encode(text);
  if (base.tokenizer.encode(text) != tokens) {
    fail("--kl-base {}: its tokenizer splits '{}' differently from the model's; the models must share a tokenizer",
         f.kl_base, f.file);
  }
  if (tokens.size() < 2) fail("'{}' has {} token(s); perplexity needs at least 2", f.file, tokens.size());

  const auto start = std::chrono::steady_clock::now();
  const KlDivergenceResult r =
      kl_divergence(m.model, base.model, tokens, ctx, progress_printer("kl-divergence"), scoring_of(f.scoring));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string weights(weight_type_name(m.model.weight_type()));
  if (f.json) {
    nlohmann::json j = scored_json(f, r.model);
    j.update(nlohmann::json{{"model", m.dir.string()},
                            {"base", base.dir.string()},
                            {"ppl", r.model.perplexity},
                            {"ppl_stderr", stderr_json(r.model)},
                            {"ppl_base", r.base.perplexity},
                            {"ppl_base_stderr", stderr_json(r.base)},
                            {"ln_ppl_ratio", r.ln_ppl_ratio},
                            {"ln_ppl_ratio_stderr", r.ln_ppl_ratio_stderr},
                            {"delta_ppl_pct", r.delta_ppl_pct},
                            {"delta_ppl_pct_stderr", r.delta_ppl_pct_stderr},
                            {"kld_mean", r.kld_mean},
                            {"kld_stderr", r.kld_stderr},
                            {"kld_median", r.kld_median},
                            {"kld_p90", r.kld_p90},
                            {"kld_p99", r.kld_p99},
                            {"kld_max", r.kld_max},
                            {"top1_agreement", r.top1_agreement},
                            {"top1_stderr", r.top1_stderr},
                            {"seconds", seconds},
                            {"threads", m.model.options().threads},
                            {"weights", weights}});
    print_out("{}\n", j.dump());
    return;
  }
  print_out("model   {} ({} weights): perplexity {:.4f} {}\n", m.dir.string(), weights, r.model.perplexity,
            plus_minus(r.model));
  print_out("base    {}: perplexity {:.4f} {}\n", base.dir.string(), r.base.perplexity, plus_minus(r.base));
  print_out("delta   PPL {:+.3f}% +/- {:.3f}%  (ln ratio {:.6f} +/- {:.6f})\n", r.delta_ppl_pct, r.delta_ppl_pct_stderr,
            r.ln_ppl_ratio, r.ln_ppl_ratio_stderr);
  print_out("KLD     mean {:.6g} +/- {:.2g}, median {:.6g}, p90 {:.6g}, p99 {:.6g}, max {:.6g}\n", r.kld_mean,
            r.kld_stderr, r.kld_median, r.kld_p90, r.kld_p99, r.kld_max);
  print_out("top-1   {:.3f}% +/- {:.3f}% of positions agree\n", 100.0 * r.top1_agreement, 100.0 * r.top1_stderr);
  print_out("({} positions in {} windows of {}{}; {:.2f} s)\n", r.scored, r.windows, r.ctx,
            f.scoring == "second-half" ? ", second half of each" : "", seconds);
}

void run(const PerplexityFlags& f) {
  scoring_of(f.scoring);  // a bad value is refused before the model loads
  const std::string text = read_file(f.file, kMaxTextFileBytes);
  if (!f.kl_base.empty()) return run_kl(f, text);
  OpenedModel m = load_model(f.model);
  const size_t ctx =
      f.model.context > 0 ? static_cast<size_t>(f.model.context) : std::min(kDefaultWindow, m.model.max_context());
  const std::vector<int32_t> tokens = m.tokenizer.encode(text);
  if (tokens.size() < 2) fail("'{}' has {} token(s); perplexity needs at least 2", f.file, tokens.size());

  const auto start = std::chrono::steady_clock::now();
  const PerplexityResult r = perplexity(m.model, tokens, ctx, progress_printer("perplexity"), scoring_of(f.scoring));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (f.json) {
    nlohmann::json j = scored_json(f, r);
    j.update(nlohmann::json{{"model", m.dir.string()},
                            {"nll_sum", r.nll_sum},
                            {"mean_nll", r.mean_nll},
                            {"perplexity", r.perplexity},
                            {"perplexity_stderr", stderr_json(r)},
                            {"seconds", seconds},
                            {"tokens_per_second", static_cast<double>(r.tokens) / seconds},
                            {"threads", m.model.options().threads},
                            {"weights", std::string(weight_type_name(m.model.weight_type()))}});
    print_out("{}\n", j.dump());
    return;
  }
  print_out("perplexity {:.4f} {} ({} tokens scored in {} windows of {}{}; {:.2f} s, {:.0f} tok/s)\n", r.perplexity,
            plus_minus(r), r.scored, r.windows, r.ctx, f.scoring == "second-half" ? ", second half of each" : "",
            seconds, static_cast<double>(r.tokens) / seconds);
}

void setup_perplexity(CLI::App& app) {
  auto f = std::make_shared<PerplexityFlags>();
  add_model_flags(app, f->model);
  app.add_option("-f,--file", f->file, "Text file to score")->required();
  app.add_option("--kl-base", f->kl_base,
                 "Base model directory (loaded as stored) to compare against: both perplexities, Delta PPL, "
                 "KL divergence mean/p99/max and top-1 agreement, with standard errors");
  app.add_flag("--json", f->json, "Print the result as one JSON object");
  app.add_option("--scoring", f->scoring,
                 "Which tokens of each window are scored: all (default: every token but the first, the last "
                 "window may be shorter) or second-half (llama-perplexity's: whole windows only, the tokens "
                 "after the first c/2; use it with the same -c to compare numbers with llama-perplexity)")
      ->type_name("all|second-half");
  app.footer(
      "Windows are -c tokens (default 512, or the model's context if smaller), non-overlapping, each "
      "from an empty cache. By default every token but a window's first is scored, so the result is "
      "higher than llama-perplexity's on the same file and -c, which scores only each window's second "
      "half (--scoring second-half does the same).");
  app.callback([f] { run(*f); });
}

const bool registered_perplexity = register_command(
    {"", "perplexity", "Perplexity of a text file under a model (+- standard error)", setup_perplexity});

}  // namespace
}  // namespace nanoinfer::cli
