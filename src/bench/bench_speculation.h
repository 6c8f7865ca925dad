// bench generate's speculative measurements (src/bench/bench_speculation.cpp): the A/B of
// plain and speculative greedy decoding, drafts at a chosen acceptance (--draft-oracle) and
// what a verification pass of n tokens costs.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/speculative.h"

namespace nanoinfer::bench {

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

// oracle_choice over `truth` as a draft model's override (ModelDrafter::override_choices).
ModelDrafter::ChoiceOverride oracle_override(std::vector<int32_t> truth, double rate, int32_t vocab);

// The plain greedy continuation the oracle knows: the tokens of `prompt` and the n_gen + 1
// tokens greedy decoding samples after it.
std::vector<int32_t> greedy_tokens(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen);

// What a verification pass costs: the median time of one forward pass of 1 .. kMaxPassRows
// tokens (all logits, as verification runs it) after `prompt`, each rolled back again,
// relative to the 1-token pass (a decode step). The rows alternate inside each of 4 x
// `rounds` rounds so drift hits all.
inline constexpr size_t kMaxPassRows = 9;
std::vector<double> pass_cost_curve(const OpenedModel& m, const std::vector<int32_t>& prompt, int64_t rounds);

// Plain and speculative greedy decoding of the same prompt (n_gen steps each), alternated
// `repetitions` times after one warm-up so drift in machine load hits both alike; the tokens
// must be identical. `spec` decodes as its drafter makes it, `described` says how (the record's
// "speculation"). Adds the pass cost curve. `record` carries the provenance fields; returns it
// filled, and a note.
std::pair<nlohmann::json, std::string> measure_speculation(const OpenedModel& m, Generator& spec,
                                                           const std::string& described,
                                                           const std::vector<int32_t>& prompt, size_t n_gen,
                                                           int64_t repetitions, nlohmann::json record);

}  // namespace nanoinfer::bench
