#include "nanoinfer/tuning.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace nanoinfer {

const char* split_name(SplitRule::Split split) {
  switch (split) {
    case SplitRule::Split::Auto:
      return "auto";
    case SplitRule::Split::Always:
      return "always";
    case SplitRule::Split::Never:
      return "never";
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

double sign_test_p(int wins, int n) {
  if (n <= 0) return 1;
  const int k = std::max(wins, n - wins);
  // P(X >= k) for X ~ Binomial(n, 1/2), doubled.
  double tail = 0, c = 1;  // c = C(n, j), built up from j = 0
  for (int j = 0; j <= n; ++j) {
    if (j >= k) tail += c;
    c = c * (n - j) / (j + 1);
  }
  return std::min(1.0, 2 * tail / std::pow(2.0, n));
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
