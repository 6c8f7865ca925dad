// `nanoinfer generate -p TEXT`: one completion, streamed to stdout as it is generated; timings
// on stderr. Sampling defaults come from the model's generation_config.json, flags override.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/generator.h"
#include "output.h"
#include "speculation_options.h"

namespace nanoinfer::cli {
namespace {

struct GenerateFlags : PromptFlags {
  GrammarFlags grammar;
  SpeculationFlags speculation;
  std::vector<std::string> stops;
  bool verbose = false;
};

void run(const GenerateFlags& f) {
  require_prompt(f, "generate");
  require_non_negative(f.n_predict, "-n");
  for (const std::string& s : f.stops) {
    if (s.empty()) fail("--stop must not be empty");
  }
  Speculation speculation(f.speculation);
  OpenedModel m = load_model(f.model);
  speculation.load(f.model, m);
  const SamplingSettings sampling = resolve_sampling(m.generation, f.sampling);

  StopRules options;
  options.max_new_tokens = f.n_predict;
  options.stop_strings = f.stops;
  options.eos_ids = stop_token_ids(m.generation, m.tokenizer, f.chat);
  const std::vector<int32_t> tokens = encode_prompt(m.tokenizer, f);

  if (f.verbose) {
    fmt::print(stderr, "model: {} ({}, {} threads, context {}, {} kernels)\n", m.dir.string(),
               weight_type_name(m.model.weight_type()), m.model.options().threads, m.model.max_context(),
               isa_name(m.model.isa()));
    fmt::print(stderr, "{}", sampling.describe());
    if (speculation.enabled()) {
      fmt::print(stderr, "speculative decoding: {}\n", speculation.describe(speculation.timed(sampling.params())));
    }
    fmt::print(stderr, "eos ids: {}\nprompt: {} tokens: {}\n", fmt::join(options.eos_ids, ", "), tokens.size(),
               fmt::join(tokens, " "));
  }

  Generator generator(m.model, m.tokenizer, sampling.params());
  if (auto g = grammar_processor(f.grammar, m.tokenizer, options.eos_ids)) generator.add_processor(std::move(g));
  speculation.attach(generator, m, sampling.params());
  const GenerationStats s = generator.generate(tokens, options, write_stdout);
  write_stdout("\n");
  if (f.verbose) fmt::print(stderr, "generated ids: {}\n", fmt::join(generator.tokens().subspan(tokens.size()), " "));

  const double decode_tps = s.decode_tokens_per_second();
  fmt::print(stderr, "load {:.2f} s | prompt {} tokens, prefill {:.1f} tok/s | first token {:.3f} s\n", m.load_seconds,
             s.prompt_tokens, s.prefill_tokens_per_second(), s.first_token_seconds);
  // Weight bytes stream once per target pass, however many tokens it verifies.
  const double passes_per_second = s.decode_seconds > 0 ? static_cast<double>(s.decode_steps) / s.decode_seconds : 0;
  fmt::print(stderr, "generated {} tokens ({}) | decode {:.2f} tok/s | {:.1f} GB/s effective\n", s.generated_tokens,
             stop_reason_name(s.stop_reason), decode_tps,
             static_cast<double>(m.model.bytes_per_token()) * passes_per_second / 1e9);
  if (speculation.enabled()) fmt::print(stderr, "{}\n", speculation.stats_line(s));
}

void setup_generate(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  add_prompt_flags(app, *f, 256, "Maximum tokens to generate");
  app.add_option("--stop", f->stops, "Stop when this text appears (not printed); repeatable");
  add_grammar_flags(app, f->grammar);
  add_speculation_flags(app, f->speculation);
  app.add_flag("--verbose", f->verbose, "Print settings and where each came from to stderr");
  app.callback([f] { run(*f); });
}

const bool registered_generate =
    register_command({"", "generate", "Generate text from a prompt, streamed to stdout", setup_generate});

}  // namespace
}  // namespace nanoinfer::cli
