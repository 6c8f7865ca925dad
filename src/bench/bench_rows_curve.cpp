// bench generate --rows-curve: a pass of n rows against a decode step (src/bench/bench_rows_curve.h).
#include "bench_rows_curve.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <span>

#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/kv_cache.h"

namespace nanoinfer::bench {

std::vector<std::vector<double>> time_row_passes(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                 const std::vector<size_t>& rows, int64_t rounds) {
  Sequence seq = m.model.new_sequence();
  m.model.forward(prompt, seq);
  const size_t room = seq.cache().capacity() - seq.length();
  size_t widest = 0;
  for (size_t n : rows) {
    if (n == 0 || n > room) fail("rows curve: a pass of {} rows does not fit ({} positions left after -p)", n, room);
    widest = std::max(widest, n);
  }
  std::vector<int32_t> tokens(widest);
  for (size_t i = 0; i < widest; ++i) tokens[i] = prompt[i % prompt.size()];
  std::vector<std::vector<double>> seconds(rows.size());
  using Clock = std::chrono::steady_clock;
  for (int64_t r = -1; r < rounds; ++r) {  // r = -1 is the warm-up
    for (size_t i = 0; i < rows.size(); ++i) {
      const Clock::time_point start = Clock::now();
      m.model.forward(std::span(tokens).first(rows[i]), seq, /*all_logits=*/true);
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      seq.cache().truncate(prompt.size());
      if (r >= 0) seconds[i].push_back(t);
    }
  }
  return seconds;
}

std::pair<nlohmann::json, std::string> measure_rows_curve(const OpenedModel& m, const std::vector<int32_t>& prompt,
                                                          std::vector<size_t> rows, int64_t rounds,
                                                          nlohmann::json record) {
  if (std::ranges::find(rows, size_t{1}) == rows.end()) rows.insert(rows.begin(), 1);
  const int64_t passes = 4 * rounds;
  const std::vector<std::vector<double>> seconds = time_row_passes(m, prompt, rows, passes);
  const size_t one = static_cast<size_t>(std::ranges::find(rows, size_t{1}) - rows.begin());
  const Summary base = summarize(seconds[one]);
  std::vector<double> median, min, relative, relative_min;
  std::string text;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Summary s = summarize(seconds[i]);
    median.push_back(s.median * 1e3);
    min.push_back(s.min * 1e3);
    relative.push_back(base.median > 0 ? s.median / base.median : 0.0);
    relative_min.push_back(base.min > 0 ? s.min / base.min : 0.0);
    text += fmt::format("{}{}: {:.2f} ms, {:.2f}x (min {:.2f} ms, {:.2f}x)", i ? "; " : "", rows[i], median.back(),
                        relative.back(), min.back(), relative_min.back());
  }
  record["bench"] = "generate-rows-curve";
  record["n_depth"] = prompt.size();
  record["rounds"] = passes;
  record["pass_rows"] = rows;
  record["pass_ms_median"] = median;
  record["pass_ms_min"] = min;
  record["pass_cost_relative"] = relative;
  record["pass_cost_relative_min"] = relative_min;
  std::string note =
      fmt::format("a pass of n rows at depth {} (all logits) against one decode step, median and min of {} rounds: {}",
                  prompt.size(), passes, text);
  return {std::move(record), std::move(note)};
}

}  // namespace nanoinfer::bench
