#include "bench_constrained.h"

#include <fmt/format.h>

#include <chrono>

#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The decode rates of the alternated runs, and how many steps the last constrained run took.
struct ConstrainedRuns {
  std::vector<double> plain_ts, constrained_ts;
  size_t constrained_steps = 0;
};

ConstrainedRuns alternate_constrained(Generator& plain, Generator& constrained, const std::vector<int32_t>& prompt,
                                      size_t n_gen, int64_t repetitions, const std::vector<int32_t>& eos) {
  const StopRules plain_rules{.max_new_tokens = static_cast<int64_t>(n_gen) + 1};
  const StopRules constrained_rules{.max_new_tokens = static_cast<int64_t>(n_gen) + 1, .eos_ids = eos};
  const TextSink discard = [](std::string_view) {};
  ConstrainedRuns out;
  for (int64_t r = -1; r < repetitions; ++r) {  // r = -1 is the warm-up
    plain.reset();
    const GenerationStats a = plain.generate(prompt, plain_rules, discard);
    constrained.reset();
    const GenerationStats b = constrained.generate(prompt, constrained_rules, discard);
    if (r < 0) continue;
    out.plain_ts.push_back(a.decode_tokens_per_second());
    if (b.decode_steps > 0) out.constrained_ts.push_back(b.decode_tokens_per_second());
    out.constrained_steps = b.decode_steps;
  }
  if (out.constrained_ts.empty()) {
    fail(
        "bench: the grammar ended every constrained run at its first token; nothing to time (try "
        "another -p)");
  }
  return out;
}

// The mask alone: the constrained run's tokens replayed through fresh processors, each step on
// scores of the vocabulary's size (the values do not change the work); ms per token of each
// repetition (none when there is no token to replay).
std::vector<double> replay_mask(const std::function<std::unique_ptr<LogitProcessor>()>& compile,
                                const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated, size_t vocab,
                                int64_t repetitions) {
  std::vector<double> mask_ms;
  std::vector<double> scores(vocab);
  for (int64_t r = 0; r < repetitions; ++r) {
    std::unique_ptr<LogitProcessor> p = compile();
    std::vector<int32_t> context = prompt;
    double total = 0;
    for (int32_t token : generated) {
      SplitMix64 mix{static_cast<uint64_t>(context.size())};
      for (double& s : scores) s = static_cast<double>(mix.next() >> 11) * 0x1.0p-53;
      const Clock::time_point s0 = Clock::now();
      p->process(scores, context);
      total += ms_since(s0);
      p->accept(token);
      context.push_back(token);
    }
    if (!generated.empty()) mask_ms.push_back(total / static_cast<double>(generated.size()));
  }
  return mask_ms;
}

}  // namespace

std::pair<nlohmann::json, std::string> measure_constrained(const GrammarUnderTest& grammar, OpenedModel& m,
                                                           const std::vector<int32_t>& prompt, size_t n_gen,
                                                           int64_t repetitions, nlohmann::json record) {
  // The constrained run may end early: the grammar allows end of sequence once the text is
  // complete, so it runs with the model's end-of-sequence ids; the plain run never stops early.
  const std::vector<int32_t> eos = stop_token_ids(m.generation, m.tokenizer, false);
  Clock::time_point t = Clock::now();
  const std::shared_ptr<const VocabTrie> trie = VocabTrie::of(m.tokenizer);
  const double trie_ms = ms_since(t);

  std::vector<double> compile_ms;
  const std::function<std::unique_ptr<LogitProcessor>()> compile = [&] {
    const Clock::time_point c = Clock::now();
    std::unique_ptr<LogitProcessor> p = grammar.compile(eos, trie);
    compile_ms.push_back(ms_since(c));
    return p;
  };

  Generator plain(m.model, m.tokenizer, {.temperature = 0.0});
  Generator constrained(m.model, m.tokenizer, {.temperature = 0.0});
  constrained.add_processor(compile());
  const ConstrainedRuns runs = alternate_constrained(plain, constrained, prompt, n_gen, repetitions, eos);
  const std::vector<int32_t> generated(constrained.tokens().begin() + static_cast<std::ptrdiff_t>(prompt.size()),
                                       constrained.tokens().end());
  const std::vector<double> mask_ms =
      replay_mask(compile, prompt, generated, static_cast<size_t>(m.model.config().vocab_size), repetitions);

  const Summary ps = summarize(runs.plain_ts), cs = summarize(runs.constrained_ts), cm = summarize(compile_ms);
  const double ratio = cs.median / ps.median;
  record["bench"] = "generate-constrained";
  record["grammar"] = grammar.name;
  record["n_prompt"] = prompt.size();
  record["n_gen"] = n_gen;
  record["vocab_trie_ms"] = trie_ms;
  record["compile_ms_median"] = cm.median;
  record["compile_ms_min"] = cm.min;
  put_rates(record, "plain", ps, /*with_max=*/false);
  put_rates(record, "constrained", cs, /*with_max=*/false);
  record["constrained_ratio"] = ratio;
  record["constrained_decode_steps"] = runs.constrained_steps;
  std::string mask_text = "no token to replay";
  if (!mask_ms.empty()) {
    const Summary ms = summarize(mask_ms);
    record["mask_ms_per_token_median"] = ms.median;
    record["mask_ms_per_token_min"] = ms.min;
    mask_text = fmt::format("{:.3f} ms per token median ({:.3f} min), replaying {} tokens", ms.median, ms.min,
                            generated.size());
  }
  std::string note = fmt::format(
      "constrained ({}, {} runs alternated, greedy, -p {}): decode {:.2f} tok/s against {:.2f} "
      "plain (x{:.3f}; "
      "the constrained runs decoded {} steps, the plain {}); the grammar's mask alone {}; "
      "compiling it "
      "{:.2f} ms median per request, the vocabulary trie {:.1f} ms once per tokenizer",
      grammar.name, repetitions, prompt.size(), cs.median, ps.median, ratio, runs.constrained_steps, n_gen, mask_text,
      cm.median, trie_ms);
  return {std::move(record), std::move(note)};
}

}  // namespace nanoinfer::bench
