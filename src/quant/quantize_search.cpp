// The importance-weighted block search (quant/quantize.h).
//
// A block of 32 weights w with importances a is stored as one f16 scale d and integers q in
// [lo, hi] (Q4_0: [-8, 7], Q8_0: [-127, 127]); the loss is E(d, q) = sum_i a_i (w_i - d q_i)^2.
// For a fixed d each q_i is best chosen on its own: round(w_i / d), clamped. For fixed q the
// best d is the weighted least-squares fit sum a w q / sum a q^2. The loss is not convex in d
// (the rounding pattern jumps), so the search walks a grid of candidate scales around the
// round-to-nearest one — mapping the block's largest-magnitude weight m to t in a range of
// integers around lo and around hi, including values that clip m — and for each candidate
// rounds, refits d, rounds the refit d to f16 (the stored value), rounds again and scores.
// The best candidate is then refined by alternating fit and rounding until the loss stops
// falling. Every loss is evaluated with the scale exactly as stored, so what is minimized is
// what the kernels will compute with. Round-to-nearest itself (quantize_row) is
// scored too and kept when nothing beats it.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/weight_blocks.h"
#include "kernels/kernels.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "nanoinfer/isa.h"
#include "quant/quantize.h"

namespace nanoinfer {
namespace {

using Range = QuantRange;
using Choice = BlockCode;

// The loss of a choice, sum_i a_i (w_i - d q_i)^2 with d as stored, in f32: exactly the sum
// kernels::ScoreBlockFn defines (eight interleaved partial sums), for integers chosen
// elsewhere. (Summed in double as one chain of 32 dependent additions, and rounded with
// lround, the ~100 candidates a block tries were nearly all of a quantization's time.)
float block_loss(const float* w, const float* a, float d, const int8_t* q) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < kQuantBlock; i += 8) {
    for (size_t k = 0; k < 8; ++k) {
      const float e = w[i + k] - d * static_cast<float>(q[i + k]);
      s[k] += a[i + k] * e * e;
    }
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

double score(const float* w, const float* a, const Choice& c) {
  return block_loss(w, a, f16_to_f32(c.d), c.q);
}

// Rounds w / d for the stored scale d16 and scores the result: the kernel table's
// score_block, which is round_to_range and block_loss in one pass (bitwise, on every ISA).
void round_and_score(const float* w, const float* a, uint16_t d16, Range r, Choice& out) {
  static const kernels::ScoreBlockFn score_block = kernels::table(best_isa()).score_block;
  const float d = f16_to_f32(d16);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  out.d = d16;
  out.loss = score_block(w, a, d, id, r.lo, r.hi, out.q);
}

// The weighted least-squares scale for fixed integers, or false when q is all 0: the kernel
// table's refit_block sums (in double, eight partial sums each, as score() sums the loss).
bool refit(const float* w, const float* a, const int8_t* q, float& d) {
  static const kernels::RefitBlockFn refit_block = kernels::table(best_isa()).refit_block;
  double sums[2];
  refit_block(w, a, q, sums);
  if (sums[1] <= 0) return false;
  d = static_cast<float>(sums[0] / sums[1]);
  return std::isfinite(d);
}

// Unpacks a stored block into a Choice (to score round-to-nearest's own result).
void unpack(WeightType type, const std::byte* block, Choice& out) {
  weight_type_info(type).unpack_block(block, out);
}

// Candidate targets t for the largest-magnitude weight m (d = m / t): around lo and around
// hi, in steps of 0.1, from half a step beyond the end of the range to `clip` inside it.
constexpr int kSteps = 28;  // per side: t = end + 0.5 - 0.1 k (towards zero), k < kSteps

// GPTQ's scale search (search_block_scale) walks every other candidate: it runs once per
// block of every matrix, GPTQ's error feedback then corrects much of what a finer scale
// would, and on the default model the coarser grid costs 2% of int4's KL divergence (2.144e-4
// against 2.102e-4; every fourth candidate: 2.363e-4) for half the search time, which was
// most of a 0.5B model's quantization.
constexpr int kScaleOnlyStride = 2;

// The search, starting from `best` (scored by the caller), over every `stride`-th candidate.
void search_from(WeightType type, const float* w, const float* a, Choice& best, int stride = 1) {
  const Range r = range_of(type);

  float m = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i)
    if (std::fabs(w[i]) > std::fabs(m)) m = w[i];
  if (m == 0.0f) return;

  Choice c;
  const auto consider = [&](float d) {
    const uint16_t d16 = f32_to_f16(d);
    if (!std::isfinite(f16_to_f32(d16))) return;
    round_and_score(w, a, d16, r, c);
    if (c.loss < best.loss) best = c;
    float fit;
    if (!refit(w, a, c.q, fit)) return;
    const uint16_t f16 = f32_to_f16(fit);
    if (!std::isfinite(f16_to_f32(f16)) || f16 == d16) return;
    round_and_score(w, a, f16, r, c);
    if (c.loss < best.loss) best = c;
  };
  for (int side = 0; side < 2; ++side) {
    const float end = side == 0 ? static_cast<float>(r.lo) : static_cast<float>(r.hi);
    const float toward_zero = side == 0 ? 1.0f : -1.0f;
    // Q8_0's 255 levels make a 0.1 step in t tiny; scale the grid with the range.
    const float step = 0.1f * (std::fabs(end) / 8.0f);
    for (int k = 0; k < kSteps; k += stride) consider(m / (end + toward_zero * (static_cast<float>(k) - 5.0f) * step));
  }
  // Alternate fitting and rounding from the best until the loss stops falling.
  for (int iter = 0; iter < 4; ++iter) {
    float fit;
    if (!refit(w, a, best.q, fit)) break;
    const uint16_t f16 = f32_to_f16(fit);
    if (!std::isfinite(f16_to_f32(f16)) || f16 == best.d) break;
    round_and_score(w, a, f16, r, c);
    if (!(c.loss < best.loss)) break;
    best = c;
  }
}

void search_block(WeightType type, const float* w, const float* a, std::byte* block) {
  Choice best;
  unpack(type, block, best);  // round-to-nearest, already written by the caller
  best.loss = score(w, a, best);
  search_from(type, w, a, best);
  pack_block(type, best, block);
}

}  // namespace

QuantRange range_of(WeightType type) {
  const WeightTypeInfo& info = weight_type_info(type);
  if (!info.scaled_blocks()) fail("quantize: {} is not a 32-block scaled-integer type", info.name);
  return {info.q_min, info.q_max};
}

void pack_block(WeightType type, const BlockCode& c, std::byte* block) {
  (void)range_of(type);  // a block type
  weight_type_info(type).pack_block(c, block);
}

uint16_t search_block_scale(WeightType type, const float* w, const float* importance) {
  const float* a = importance;
  float uniform[kQuantBlock];
  float sum = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i) sum += a != nullptr ? a[i] : 0.0f;
  if (!(sum > 0.0f)) {
    for (float& u : uniform) u = 1.0f;
    a = uniform;
  }
  (void)range_of(type);  // a block type
  std::vector<std::byte> rtn(weight_row_bytes(type, kQuantBlock));
  quantize_row(type, w, rtn.data(), kQuantBlock);
  Choice best;
  unpack(type, rtn.data(), best);
  best.loss = score(w, a, best);
  search_from(type, w, a, best, kScaleOnlyStride);
  return best.d;
}

void quantize_row_search(WeightType type, const float* w, const float* importance, std::byte* row, size_t cols) {
  if (type == WeightType::Q3_K) return quantize_row_search_q3_k(w, importance, row, cols);
  const size_t block_bytes = weight_type_info(type).block_bytes;
  (void)range_of(type);
  quantize_row(type, w, row, cols);  // the round-to-nearest starting point
  float uniform[kQuantBlock];
  for (float& u : uniform) u = 1.0f;
  for (size_t b = 0; b < cols / kQuantBlock; ++b) {
    const float* a = importance != nullptr ? importance + b * kQuantBlock : uniform;
    float sum = 0.0f;
    for (size_t i = 0; i < kQuantBlock; ++i) sum += a[i];
    search_block(type, w + b * kQuantBlock, sum > 0.0f ? a : uniform, row + b * block_bytes);
  }
}

double weighted_row_error(WeightType type, const float* w, const float* importance, const std::byte* row, size_t cols) {
  std::vector<float> back(cols);
  dequantize_row(type, row, back.data(), cols);
  double sum = 0;
  for (size_t i = 0; i < cols; ++i) {
    const double e = static_cast<double>(w[i]) - back[i];
    sum += (importance != nullptr ? importance[i] : 1.0) * e * e;
  }
  return sum;
}

}  // namespace nanoinfer
