// bench generate's speculative measurements: see bench_speculation.h.
#include "bench_speculation.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "bench_record.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::cli {
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

std::vector<double> pass_cost_curve(const OpenedModel& m, const std::vector<int32_t>& prompt, int64_t rounds) {
  Sequence seq = m.model.new_sequence();
  m.model.forward(prompt, seq);
  // The pass's tokens are the prompt's first ones (any tokens cost the same).
  const size_t rows_max = std::min({kMaxPassRows, seq.cache().capacity() - seq.length(), prompt.size()});
  std::vector<std::vector<double>> seconds(rows_max);
  using Clock = std::chrono::steady_clock;
  for (int64_t r = -1; r < rounds * 4; ++r) {  // r = -1 is the warm-up
    for (size_t rows = 1; rows <= rows_max; ++rows) {
      const Clock::time_point start = Clock::now();
      m.model.forward(std::span(prompt).first(rows), seq, /*all_logits=*/true);
      const double t = std::chrono::duration<double>(Clock::now() - start).count();
      seq.cache().truncate(prompt.size());
      if (r >= 0) seconds[rows - 1].push_back(t);
    }
  }
  std::vector<double> relative;
  const double one = summarize(seconds[0]).median;
  for (const auto& s : seconds) relative.push_back(one > 0 ? summarize(s).median / one : 0.0);
  return relative;
}

}  // namespace nanoinfer::cli
