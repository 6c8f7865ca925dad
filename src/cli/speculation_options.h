// Speculative decoding flags (generate, chat, serve, bench generate): --lookup N, --draft MODEL, --draft-self TYPE and
// --draft-max K; the draft model they load, and the stderr line of acceptance statistics.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common_options.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/speculative.h"

namespace nanoinfer::cli {

struct SpeculationFlags {
  std::optional<int64_t> lookup;     // longest n-gram of prompt lookup
  std::string draft;                 // draft model path
  std::string draft_self;            // int8 | int4: the target's weights quantized at load
  std::optional<int64_t> draft_max;  // fixed tokens per pass; unset = adaptive
};

void add_speculation_flags(CLI::App& app, SpeculationFlags& flags);

// What the flags ask for, validated (one-line errors) before anything is loaded; load() then
// opens the draft model, if any, and checks it speaks the target's vocabulary.
class Speculation {
 public:
  explicit Speculation(const SpeculationFlags& flags);
  bool enabled() const { return kind_ != Kind::None; }
  void load(const ModelFlags& target_flags, const OpenedModel& target);
  // Makes `generator` decode speculatively as asked (nothing when not enabled); a draft model
  // drafts with the generator's sampling params (greedy, or sampled for rejection sampling).
  // `choose`, for bench generate's --draft-oracle with a draft model: its drafts' tokens are
  // overridden (ModelDrafter::override_choices), their cost kept.
  void attach(Generator& generator, const OpenedModel& target, const SamplerParams& sampling,
              ModelDrafter::ChoiceOverride choose = {}) const;
  // A drafter as asked (null when not enabled): prompt lookup, or the draft model drafting
  // with `sampling` (serve: one per sequence, set_sampling per request).
  std::unique_ptr<Drafter> make_drafter(const OpenedModel& target, const SamplerParams& sampling) const;
  std::optional<size_t> draft_max() const;  // --draft-max: fixed tokens per pass; unset: adaptive
  // "prompt lookup (n-grams up to 3), adaptive k <= 16" and the like.
  std::string describe(bool timed) const;
  // Whether attach() times the adaptive length: not when a draft model samples its drafts
  // (temperature > 0), whose tokens then depend on how many are drafted, so a timed k would
  // make a seed's output vary from run to run; untimed, k follows the tokens alone.
  bool timed(const SamplerParams& sampling) const;
  // One line for stderr: drafted, accepted (rate), verification passes, tokens per pass (as
  // the last attach() set it up).
  std::string stats_line(const GenerationStats& s) const;

 private:
  enum class Kind { None, Lookup, Draft, DraftSelf };
  SpeculationFlags flags_;
  Kind kind_ = Kind::None;
  std::optional<WeightType> self_type_;
  std::unique_ptr<OpenedModel> draft_;
  mutable bool attached_timed_ = true;
};

}  // namespace nanoinfer::cli
