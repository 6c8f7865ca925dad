// bench generate --step-curve B: serve's mixed step (src/bench/bench_step_curve.h).
#include "bench_step_curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <span>

#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/kv_cache.h"

namespace nanoinfer::bench {
namespace {

// The prompt rows a step carries beside the decoders', each timed.
constexpr size_t kStepRows[] = {0, 1, 2, 4, 8, 12, 16, 24, 32, 48, 64};

}  // namespace

std::pair<nlohmann::json, std::string> measure_step_curve(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                          size_t decoders, int64_t rounds, nlohmann::json record) {
  const Model& model = m.model;
  const std::span<const int32_t> head = std::span(prompt).first(std::min<size_t>(16, prompt.size()));
  std::vector<Sequence> seqs;
  for (size_t b = 0; b < decoders; ++b) {
    seqs.push_back(model.new_sequence());
    model.forward(head, seqs.back());
  }
  Sequence longer = model.new_sequence();
  model.forward(prompt, longer);
  std::vector<Sequence*> batch;
  std::vector<int32_t> tokens;
  std::vector<size_t> counts, outputs, rows;
  for (size_t c : kStepRows) {
    if (c <= longer.cache().capacity() - longer.length()) rows.push_back(c);
  }
  std::vector<std::vector<double>> ms(rows.size());
  const uint64_t passes = model.passes();
  for (int64_t r = -1; r < rounds; ++r) {  // r = -1 is the warm-up
    for (size_t i = 0; i < rows.size(); ++i) {
      batch.clear();
      tokens.clear();
      counts.clear();
      outputs.clear();
      for (size_t b = 0; b < decoders; ++b) {
        batch.push_back(&seqs[b]);
        tokens.push_back(prompt[b % prompt.size()]);
        counts.push_back(1);
        outputs.push_back(1);
      }
      if (rows[i] > 0) {
        batch.push_back(&longer);
        for (size_t t = 0; t < rows[i]; ++t) tokens.push_back(prompt[t % prompt.size()]);
        counts.push_back(rows[i]);
        outputs.push_back(0);
      }
      const auto start = std::chrono::steady_clock::now();
      model.decode(batch, tokens, counts, outputs);
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      for (Sequence& s : seqs) s.cache().truncate(head.size());
      longer.cache().truncate(prompt.size());
      if (r >= 0) ms[i].push_back(t * 1e3);
    }
  }
  if (model.passes() - passes != static_cast<uint64_t>(rounds + 1) * rows.size()) {
    fail("step curve: ran {} passes, expected {}", model.passes() - passes,
         static_cast<uint64_t>(rounds + 1) * rows.size());
  }
  std::vector<double> median, min, relative;
  for (const auto& s : ms) {
    const Summary x = summarize(s);
    median.push_back(x.median);
    min.push_back(x.min);
  }
  std::string text;
  for (size_t i = 0; i < rows.size(); ++i) {
    relative.push_back(median[0] > 0 ? median[i] / median[0] : 0.0);
    text += fmt::format("{}{}: {:.1f} ms ({:.2f}x)", i ? ", " : "", rows[i], median[i], relative[i]);
  }
  record["bench"] = "generate-step-curve";
  record["decoders"] = decoders;
  record["n_depth"] = prompt.size();
  record["rounds"] = rounds;
  record["step_prompt_rows"] = rows;
  record["step_ms_median"] = median;
  record["step_ms_min"] = min;
  record["step_cost_relative"] = relative;
  std::string note =
      fmt::format("mixed step ({} decoding sequences + c prompt rows at depth {}, one pass, median of {} rounds): {}",
                  decoders, prompt.size(), rounds, text);
  return {std::move(record), std::move(note)};
}

}  // namespace nanoinfer::bench
