// The importance-weighted search for Q3_K super-blocks (quant/quantize.h).
//
// A super-block of 256 weights w with importances a is stored as one f16 scale d, sixteen
// integer scale factors l_s in [-32, 31] (one per sub-block of 16) and quants q in [-4, 3];
// weight i of sub-block s is (d * l_s) * q_i, and the loss is E = sum_i a_i (w_i - value_i)^2.
// Three nested choices, each the weighted least-squares answer for the level above it fixed:
//   1. per sub-block, the best float scale f_s: a grid of candidates mapping the sub-block's
//      largest-magnitude weight to t in [-4.5, -2.6] or [2.4, 3.5] (the quants are asymmetric,
//      so the sign of the scale picks which side gets four levels), each rounded, refit
//      (sum a w q / sum a q^2) and scored;
//   2. d: candidates that map the largest |f_s| to -32 or 31, scaled by a few factors, and the
//      least-squares refit of d once the factors and quants are known; each stored as f16;
//   3. for a d as stored, each sub-block's l_s among the integers around f_s / d (rounding the
//      quants again for each) by its exact loss.
// Every loss is evaluated with the values exactly as the dequantizer computes them. The
// round-to-nearest reference is scored too and kept when nothing beats it.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/weight_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"
#include "quant/quantize.h"

namespace nanoinfer {
namespace {

constexpr QuantRange kQ3Range{-4, 3};
constexpr size_t kSub = 16;

// Quants of 16 weights for the scale `scale` (as the dequantizer computes it), and their loss.
double q3k_round(const float* w, const float* a, float scale, int8_t* q) {
  const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
  double loss = 0;
  for (size_t i = 0; i < kSub; ++i) {
    q[i] = static_cast<int8_t>(round_to_range(w[i] * inv, kQ3Range));
    const double e = static_cast<double>(w[i]) - scale * static_cast<float>(q[i]);
    loss += a[i] * e * e;
  }
  return loss;
}

// Step 1: the best float scale of one sub-block (0 for an all-zero one).
float q3k_float_scale(const float* w, const float* a) {
  float extreme = 0.0f;
  for (size_t i = 0; i < kSub; ++i)
    if (std::fabs(w[i]) > std::fabs(extreme)) extreme = w[i];
  if (extreme == 0.0f) return 0.0f;
  float best_scale = extreme / -4.0f;
  int8_t q[kSub];
  double best = q3k_round(w, a, best_scale, q);
  for (int side = 0; side < 2; ++side) {
    for (int k = 0; k < 20; ++k) {
      const float t = side == 0 ? -4.5f + 0.1f * static_cast<float>(k) : 3.5f - 0.055f * static_cast<float>(k);
      q3k_round(w, a, extreme / t, q);
      double num = 0, den = 0;
      for (size_t i = 0; i < kSub; ++i) {
        num += static_cast<double>(a[i]) * w[i] * q[i];
        den += static_cast<double>(a[i]) * q[i] * q[i];
      }
      if (!(den > 0)) continue;
      const float fit = static_cast<float>(num / den);
      const double loss = q3k_round(w, a, fit, q);
      if (loss < best) best = loss, best_scale = fit;
    }
  }
  return best_scale;
}

// Step 3: for the stored d, each sub-block's factor near hint[s] / d and its quants, into c;
// returns the loss.
double q3k_encode(const float* w, const float* a, uint16_t d16, const float* hint, Q3kCode& c) {
  c.d = d16;
  const float d = f16_to_f32(d16);
  double total = 0;
  for (size_t s = 0; s < 16; ++s) {
    const long center = d != 0.0f ? std::lround(std::clamp(hint[s] / d, -64.0f, 64.0f)) : 0;
    total += q3k_best_factor(w + kSub * s, a + kSub * s, d, static_cast<int>(center), c.scale[s], c.q + kSub * s);
  }
  return total;
}

void q3k_search_superblock(const float* w, const float* a, Q3kCode& best) {
  double best_loss = 0;
  {
    BlockQ3_K rtn;
    quantize_row_q3_k(w, reinterpret_cast<std::byte*>(&rtn), kSuperBlock);
    best = unpack_q3_k(rtn);
    const float d = f16_to_f32(best.d);
    for (size_t i = 0; i < kSuperBlock; ++i) {
      const double e =
          static_cast<double>(w[i]) - (d * static_cast<float>(best.scale[i / kSub])) * static_cast<float>(best.q[i]);
      best_loss += a[i] * e * e;
    }
  }
  float f[16], extreme = 0.0f;
  for (size_t s = 0; s < 16; ++s) {
    f[s] = q3k_float_scale(w + kSub * s, a + kSub * s);
    if (std::fabs(f[s]) > std::fabs(extreme)) extreme = f[s];
  }
  if (extreme == 0.0f) return;
  Q3kCode c;
  const auto consider = [&](float d) {
    const uint16_t d16 = f32_to_f16(d);
    if ((d16 & 0x7c00u) == 0x7c00u) return;
    const double loss = q3k_encode(w, a, d16, f, c);
    if (loss < best_loss) best_loss = loss, best = c;
  };
  for (const float m : {1.0f, 0.985f, 0.97f, 0.95f, 0.93f, 0.9f}) {
    consider(extreme / -32.0f * m);
    consider(extreme / 31.0f * m);
  }
  // The least-squares d for the best factors and quants, then once more with its own.
  for (int pass = 0; pass < 2; ++pass) {
    double num = 0, den = 0;
    for (size_t i = 0; i < kSuperBlock; ++i) {
      const double lq = static_cast<double>(best.scale[i / kSub]) * best.q[i];
      num += static_cast<double>(a[i]) * w[i] * lq;
      den += static_cast<double>(a[i]) * lq * lq;
    }
    if (den > 0) consider(static_cast<float>(num / den));
  }
}

}  // namespace

double q3k_best_factor(const float* w, const float* a, float d, int center, int8_t& factor, int8_t* q) {
  double best = -1;
  int8_t trial[kSub];
  for (int l = std::max(-32, center - 2); l <= std::min(31, center + 2); ++l) {
    const double loss = q3k_round(w, a, d * static_cast<float>(l), trial);
    if (best < 0 || loss < best) {
      best = loss;
      factor = static_cast<int8_t>(l);
      std::memcpy(q, trial, kSub);
    }
  }
  if (best < 0) {  // the center is far outside the range: the nearest end
    const int l = std::clamp(center, -32, 31);
    factor = static_cast<int8_t>(l);
    best = q3k_round(w, a, d * static_cast<float>(l), q);
  }
  return best;
}

Q3kCode q3k_search(const float* w, const float* importance) {
  float uniform[kSuperBlock];
  const float* a = importance;
  float sum = 0.0f;
  for (size_t i = 0; i < kSuperBlock; ++i) sum += a != nullptr ? a[i] : 0.0f;
  if (!(sum > 0.0f)) {
    std::fill(std::begin(uniform), std::end(uniform), 1.0f);
    a = uniform;
  }
  Q3kCode best;
  q3k_search_superblock(w, a, best);
  return best;
}

void quantize_row_search_q3_k(const float* w, const float* importance, std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols; ++i)
    if (!std::isfinite(w[i])) fail("quantize: weight {} of the row is {}", i, w[i]);
  for (size_t sb = 0; sb < cols / kSuperBlock; ++sb) {
    const Q3kCode c = q3k_search(w + sb * kSuperBlock, importance != nullptr ? importance + sb * kSuperBlock : nullptr);
    const BlockQ3_K b = pack_q3_k(c);
    std::memcpy(row + sb * sizeof b, &b, sizeof b);
  }
}

}  // namespace nanoinfer
