// bench generate's speculative measurements: see bench_speculation.h.
#include "bench_speculation.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "bench_record.h"
#include "bench_rows_curve.h"
#include "nanoinfer/error.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::bench {
namespace {

class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> truth, double rate, int32_t vocab)
      : truth_(std::move(truth)), rate_(rate), vocab_(vocab) {}
  void draft(std::span<const int32_t> context, size_t k, std::vector<int32_t>& out) override {
    out.clear();
    for (size_t i = context.size(); i < truth_.size() && out.size() < k; ++i) {
      out.push_back(oracle_choice(truth_, rate_, vocab_, i, 0));
    }
  }
  std::string_view name() const override { return "oracle"; }

 private:
  std::vector<int32_t> truth_;
  double rate_;
  int32_t vocab_;
};

// The decode rates of the alternated runs, the drafter's share of the decode time, and the
// last speculative run's statistics.
struct SpeculativeRuns {
  std::vector<double> plain_ts, spec_ts, draft_share;
  GenerationStats last;
};

SpeculativeRuns alternate_speculative(Generator& plain, Generator& spec, const std::vector<int32_t>& prompt,
                                      size_t n_gen, int64_t repetitions) {
  const StopRules rules{.max_new_tokens = static_cast<int64_t>(n_gen) + 1};
  const TextSink discard = [](std::string_view) {};
  SpeculativeRuns out;
  for (int64_t r = -1; r < repetitions; ++r) {  // r = -1 is the warm-up
    plain.reset();
    spec.reset();
    const GenerationStats p = plain.generate(prompt, rules, discard);
    out.last = spec.generate(prompt, rules, discard);
    if (!std::ranges::equal(plain.tokens(), spec.tokens())) {
      fail("speculative A/B: speculative and plain greedy decoding differ (run {})", r);
    }
    if (out.last.decode_tokens != n_gen)
      fail("bench: expected {} decoded tokens, got {}", n_gen, out.last.decode_tokens);
    if (r < 0) continue;
    out.plain_ts.push_back(p.decode_tokens_per_second());
    out.spec_ts.push_back(out.last.decode_tokens_per_second());
    out.draft_share.push_back(out.last.decode_seconds > 0 ? out.last.draft_seconds / out.last.decode_seconds : 0.0);
  }
  return out;
}

}  // namespace

int32_t oracle_choice(const std::vector<int32_t>& truth, double rate, int32_t vocab, size_t i, int32_t otherwise) {
  if (i >= truth.size()) return otherwise;
  SplitMix64 mix{i};
  const bool right = static_cast<double>(mix.next() >> 11) * 0x1.0p-53 < rate;
  return right ? truth[i] : (truth[i] + 1) % vocab;
}

std::unique_ptr<Drafter> make_oracle_drafter(std::vector<int32_t> truth, double rate, int32_t vocab) {
  return std::make_unique<OracleDrafter>(std::move(truth), rate, vocab);
}

ModelDrafter::ChoiceOverride oracle_override(std::vector<int32_t> truth, double rate, int32_t vocab) {
  return [truth = std::move(truth), rate, vocab](size_t i, int32_t drafted) {
    return oracle_choice(truth, rate, vocab, i, drafted);
  };
}

std::vector<int32_t> greedy_tokens(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen) {
  Generator plain(m.model, m.tokenizer, {.temperature = 0.0});
  plain.generate(prompt, {.max_new_tokens = static_cast<int64_t>(n_gen) + 1}, [](std::string_view) {});
  return {plain.tokens().begin(), plain.tokens().end()};
}

std::vector<double> pass_cost_curve(const OpenedModel& m, const std::vector<int32_t>& prompt, int64_t rounds) {
  Sequence probe = m.model.new_sequence();
  // The pass's tokens are the prompt's first ones (any tokens cost the same).
  const size_t rows_max = std::min({kMaxPassRows, probe.cache().capacity() - prompt.size(), prompt.size()});
  std::vector<size_t> rows(rows_max);
  for (size_t i = 0; i < rows_max; ++i) rows[i] = i + 1;
  const std::vector<std::vector<double>> seconds = time_row_passes(m, prompt, rows, rounds * 4);
  std::vector<double> relative;
  const double one = summarize(seconds[0]).median;
  for (const auto& s : seconds) relative.push_back(one > 0 ? summarize(s).median / one : 0.0);
  return relative;
}

std::pair<nlohmann::json, std::string> measure_speculation(const OpenedModel& m, Generator& spec,
                                                           const std::string& described,
                                                           const std::vector<int32_t>& prompt, size_t n_gen,
                                                           int64_t repetitions, nlohmann::json record) {
  Generator plain(m.model, m.tokenizer, {.temperature = 0.0});
  const SpeculativeRuns runs = alternate_speculative(plain, spec, prompt, n_gen, repetitions);
  const GenerationStats& last = runs.last;
  const Summary a = summarize(runs.plain_ts), b = summarize(runs.spec_ts), d = summarize(runs.draft_share);
  const double speedup = a.median > 0 ? b.median / a.median : 0.0;
  record["bench"] = "generate-speculative";
  record["n_prompt"] = prompt.size();
  record["n_gen"] = n_gen;
  record["speculation"] = described;
  put_rates(record, "plain", a);
  put_rates(record, "speculative", b);
  record["speedup"] = speedup;
  record["drafted"] = last.drafted_tokens;
  record["accepted"] = last.accepted_tokens;
  record["acceptance_rate"] = last.acceptance_rate();
  record["verify_passes"] = last.verify_passes;
  record["tokens_per_verify_pass"] = last.tokens_per_verify_pass();
  record["target_passes"] = last.decode_steps;
  record["draft_time_share"] = d.median;
  record["identical_output"] = true;
  const std::vector<double> curve = pass_cost_curve(m, prompt, repetitions);
  record["pass_cost_relative"] = curve;
  std::string curve_text;
  for (size_t i = 0; i < curve.size(); ++i) curve_text += fmt::format("{}{}: {:.2f}", i ? ", " : "", i + 1, curve[i]);
  std::string note = fmt::format(
      "speculative A/B ({}; {} runs, {} tokens after a {}-token prompt, identical tokens): plain "
      "{:.2f} tok/s, "
      "speculative {:.2f} tok/s (x{:.2f}); acceptance {:.1f}% ({} of {} drafted), {:.2f} tokens "
      "per verification "
      "pass, {} target passes for {} tokens, drafting {:.1f}% of the decode time",
      described, repetitions, n_gen, prompt.size(), a.median, b.median, speedup, 100.0 * last.acceptance_rate(),
      last.accepted_tokens, last.drafted_tokens, last.tokens_per_verify_pass(), last.decode_steps, last.decode_tokens,
      100.0 * d.median);
  note += fmt::format("; a pass of n tokens costs, relative to one decode step: {}", curve_text);
  return {std::move(record), std::move(note)};
}

}  // namespace nanoinfer::bench
