#include "nanoinfer/tuning.h"

#include <fmt/format.h>

namespace nanoinfer {

const char* split_name(SplitRule::Split split) {
  switch (split) {
    case SplitRule::Split::Auto: return "auto";
    case SplitRule::Split::Always: return "always";
    case SplitRule::Split::Never: return "never";
  }
  return "?";
}

bool parse_split(std::string_view name, SplitRule::Split& out) {
  for (SplitRule::Split s : {SplitRule::Split::Auto, SplitRule::Split::Always, SplitRule::Split::Never}) {
    if (name == split_name(s)) {
      out = s;
      return true;
    }
  }
  return false;
}

std::string describe(const SplitRule& rule) {
  if (rule == SplitRule{}) return "default";
  if (rule.split == SplitRule::Split::Never) {
    return rule.epilogue_kib != 0 ? fmt::format("never split, epilogue {} KiB", rule.epilogue_kib) : "never split";
  }
  std::string s = rule.split == SplitRule::Split::Always ? "split" : "auto split";
  s += fmt::format(", {} chunks/thread", rule.chunks_per_thread != 0 ? rule.chunks_per_thread : 4);
  if (rule.epilogue_kib != 0) s += fmt::format(", epilogue {} KiB", rule.epilogue_kib);
  return s;
}

const SplitRule* Tuning::find(WeightType type, size_t rows, size_t cols, size_t n_tokens) const {
  const bool prefill = n_tokens > 1;
  for (const TunedRule& r : rules) {
    if (r.shape.type == type && r.shape.rows == rows && r.shape.cols == cols && r.shape.prefill == prefill) {
      return &r.rule;
    }
  }
  return nullptr;
}

void Tuning::set(const ProductShape& shape, const SplitRule& rule) {
  for (auto it = rules.begin(); it != rules.end(); ++it) {
    if (it->shape == shape) {
      if (rule == SplitRule{}) {
        rules.erase(it);
      } else {
        it->rule = rule;
      }
      return;
    }
  }
  if (!(rule == SplitRule{})) rules.push_back({shape, rule});
}

}  // namespace nanoinfer
