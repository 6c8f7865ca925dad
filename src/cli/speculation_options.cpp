#include "speculation_options.h"

#include <fmt/format.h>

#include "nanoinfer/error.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer::cli {

namespace {
constexpr int64_t kMaxDraft = 64;
}

void add_speculation_flags(CLI::App& app, SpeculationFlags& flags) {
  app.add_option("--lookup", flags.lookup,
                 fmt::format("Speculative decoding by prompt lookup: draft the continuation of the latest earlier "
                             "occurrence of the context's last N tokens (N = 1 to {}, longest match first); no "
                             "second model",
                             PromptLookupDrafter::kMaxNgram))
      ->type_name("N");
  app.add_option("--draft", flags.draft,
                 "Speculative decoding with this draft model (a directory or .gguf with the same tokenizer): it "
                 "drafts with the same sampling settings, the model verifies all drafts in one pass (greedy: the "
                 "output is unchanged; sampled: rejection sampling, the output distribution is unchanged)")
      ->type_name("MODEL");
  app.add_option("--draft-self", flags.draft_self,
                 fmt::format("Speculative decoding with the model's own weights quantized at load as the draft: {} (as "
                             "--dtype quantizes them; int4 is the usual choice)",
                             weight_type_names(WeightTypeKind::Quantized)))
      ->type_name("TYPE");
  app.add_option("--draft-max", flags.draft_max,
                 fmt::format("Tokens drafted per verification pass, 0 to {} (default: adaptive, up to {}: grows "
                             "while drafts are accepted, falls to plain decoding when they are not or when "
                             "speculation is slower per token than plain steps)",
                             kMaxDraft, DraftLength::kDefaultMax))
      ->type_name("K");
}

Speculation::Speculation(const SpeculationFlags& flags) : flags_(flags) {
  const int given = (flags.lookup ? 1 : 0) + (flags.draft.empty() ? 0 : 1) + (flags.draft_self.empty() ? 0 : 1);
  if (given > 1) fail("--lookup, --draft and --draft-self exclude each other");
  if (flags.lookup) {
    if (*flags.lookup < 1 || *flags.lookup > static_cast<int64_t>(PromptLookupDrafter::kMaxNgram)) {
      fail("--lookup must be 1 to {} (the longest n-gram matched), got {}", PromptLookupDrafter::kMaxNgram,
           *flags.lookup);
    }
    kind_ = Kind::Lookup;
  } else if (!flags.draft.empty()) {
    kind_ = Kind::Draft;
  } else if (!flags.draft_self.empty()) {
    self_type_ = weight_type_from_name(flags.draft_self);
    if (!self_type_ || !weight_type_info(*self_type_).quantized) {
      fail("--draft-self must be {}, got '{}'", weight_type_names(WeightTypeKind::Quantized), flags.draft_self);
    }
    kind_ = Kind::DraftSelf;
  }
  if (flags.draft_max) {
    if (kind_ == Kind::None) fail("--draft-max needs --lookup, --draft or --draft-self");
    if (*flags.draft_max < 0 || *flags.draft_max > kMaxDraft) {
      fail("--draft-max must be 0 to {}, got {}", kMaxDraft, *flags.draft_max);
    }
  }
}

void Speculation::load(const ModelFlags& target_flags, const OpenedModel& target) {
  if (kind_ != Kind::Draft && kind_ != Kind::DraftSelf) return;
  OpenOptions options = open_options(target_flags);
  options.model.tensor_parallel = false;  // only rank 0 drafts: the draft stays whole there
  if (kind_ == Kind::DraftSelf) {
    options.model.weights = self_type_;
    draft_ = std::make_unique<OpenedModel>(open_model(target_flags.model_dir, options));
    return;
  }
  options.model.weights.reset();  // the draft as stored
  try {
    draft_ = std::make_unique<OpenedModel>(open_model(flags_.draft, options));
    require_same_vocabulary(target.tokenizer, draft_->tokenizer);
  } catch (const Error& e) {
    fail("--draft {}: {}", flags_.draft, e.what());
  }
}

std::unique_ptr<Drafter> Speculation::make_drafter(const OpenedModel& target, const SamplerParams& sampling) const {
  switch (kind_) {
    case Kind::None:
      return nullptr;
    case Kind::Lookup:
      return std::make_unique<PromptLookupDrafter>(static_cast<size_t>(*flags_.lookup));
    case Kind::Draft:
    case Kind::DraftSelf:
      if (!draft_) fail("internal error: the draft model was not loaded");
      return std::make_unique<ModelDrafter>(draft_->model, target.tokenizer.vocab_size(), sampling);
  }
  return nullptr;
}

std::optional<size_t> Speculation::draft_max() const {
  if (!flags_.draft_max) return std::nullopt;
  return static_cast<size_t>(*flags_.draft_max);
}

bool Speculation::timed(const SamplerParams& sampling) const {
  return !(sampling.temperature > 0 && (kind_ == Kind::Draft || kind_ == Kind::DraftSelf));
}

void Speculation::attach(Generator& generator, const OpenedModel& target, const SamplerParams& sampling,
                         ModelDrafter::ChoiceOverride choose) const {
  if (kind_ == Kind::None) return;
  attached_timed_ = timed(sampling);
  const DraftLength length = flags_.draft_max ? DraftLength::fixed(static_cast<size_t>(*flags_.draft_max))
                                              : DraftLength::adaptive(DraftLength::kDefaultMax, attached_timed_);
  std::unique_ptr<Drafter> drafter = make_drafter(target, sampling);
  if (choose) {
    auto* model_drafter = dynamic_cast<ModelDrafter*>(drafter.get());
    if (model_drafter == nullptr) fail("internal error: only a draft model's choices can be overridden");
    model_drafter->override_choices(std::move(choose));
  }
  generator.set_drafter(std::move(drafter), length);
}

std::string Speculation::describe(bool timed) const {
  const std::string k = flags_.draft_max
                            ? fmt::format("k = {}", *flags_.draft_max)
                            : fmt::format("adaptive{} k <= {}", timed ? " timed" : "", DraftLength::kDefaultMax);
  switch (kind_) {
    case Kind::None:
      return "off";
    case Kind::Lookup:
      return fmt::format("prompt lookup (n-grams up to {}), {}", *flags_.lookup, k);
    case Kind::Draft:
      return fmt::format("draft model {}, {}", flags_.draft, k);
    case Kind::DraftSelf:
      return fmt::format("self-draft {}, {}", flags_.draft_self, k);
  }
  return "?";
}

std::string Speculation::stats_line(const GenerationStats& s) const {
  return fmt::format(
      "speculation: {} | drafted {}, accepted {} ({:.1f}%) | {} verification passes, {:.2f} tokens "
      "per pass | {} target passes for {} tokens",
      describe(attached_timed_), s.drafted_tokens, s.accepted_tokens, 100.0 * s.acceptance_rate(), s.verify_passes,
      s.tokens_per_verify_pass(), s.decode_steps, s.decode_tokens);
}

}  // namespace nanoinfer::cli
