// bench generate's speculative measurements (src/cli/bench_speculation.cpp): drafts at a
// chosen acceptance (--draft-oracle) and what a verification pass of n tokens costs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nanoinfer/engine.h"
#include "nanoinfer/speculative.h"

namespace nanoinfer::cli {

// Drafts that know the answer, for --draft-oracle: the plain greedy continuation `truth`,
// except that the draft for a position is wrong (the right id + 1) unless a fixed
// pseudo-random number of that position is below `rate`. What verification costs at a chosen
// acceptance, with drafts that cost nothing: the most any drafter could gain at that rate.
std::unique_ptr<Drafter> make_oracle_drafter(std::vector<int32_t> truth, double rate, int32_t vocab);

// The oracle's draft for context position `i` by the same rule: truth[i] with probability
// `rate` (a fixed pseudo-random number per position), else truth[i] + 1; `otherwise` past the
// end of truth. With --draft or --draft-self it overrides a draft model's choices
// (ModelDrafter::override_choices), so the drafts cost what the draft model costs.
int32_t oracle_choice(const std::vector<int32_t>& truth, double rate, int32_t vocab, size_t i, int32_t otherwise);

// What a verification pass costs: the median time of one forward pass of 1 .. kMaxPassRows
// tokens (all logits, as verification runs it) after `prompt`, each rolled back again,
// relative to the 1-token pass (a decode step). The rows alternate inside each of 4 x
// `rounds` rounds so drift hits all.
inline constexpr size_t kMaxPassRows = 9;
std::vector<double> pass_cost_curve(const OpenedModel& m, const std::vector<int32_t>& prompt, int64_t rounds);

}  // namespace nanoinfer::cli
