// Speculative decoding flags (generate, chat): --lookup N, --draft MODEL, --draft-self TYPE and
// --draft-max K; the draft model they load, and the stderr line of acceptance statistics.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common_options.h"
#include "nanoinfer/engine.h"
#include "nanoinfer/generator.h"
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
  // applies the generator's repetition penalty too.
  void attach(Generator& generator, const OpenedModel& target, double repetition_penalty) const;
  // "prompt lookup (n-grams up to 3), adaptive k <= 16" and the like.
  std::string describe() const;
  // One line for stderr: drafted, accepted (rate), verification passes, tokens per pass.
  std::string stats_line(const GenerationStats& s) const;

 private:
  enum class Kind { None, Lookup, Draft, DraftSelf };
  SpeculationFlags flags_;
  Kind kind_ = Kind::None;
  std::optional<WeightType> self_type_;
  std::unique_ptr<OpenedModel> draft_;
};

}  // namespace nanoinfer::cli
