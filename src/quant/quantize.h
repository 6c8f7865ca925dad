// The quantization layer's writer: the importance-weighted block search, and writing a
// quantized model.safetensors from a float one. (Calibration is quant/calibrate.h; the model
// directory, staging and the command's flow are the engine's: src/engine/quantize_model.cpp.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/weight_blocks.h"
#include "io/safetensors.h"
#include "nanoinfer/config.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer {

struct GptqFactor;  // quant/gptq.h

// The integer range of a block type's values (its row's q_min, q_max: Q4_0 [-8, 7], Q8_0
// [-127, 127]). Throws for a type without blocks.
struct QuantRange {
  int lo, hi;
};
QuantRange range_of(WeightType type);

// x rounded half away from zero and clamped to the range: std::lround's rounding, inline and
// without branches (lround is a library call, a data-dependent branch mispredicts half the
// time, and the searches round ~10^10 times for a 0.5B model). Exact: below 2^23 the
// fraction x - trunc(x) is exact in f32, above it every float is an integer. x is bounded
// first, NaN to the bottom of the range, as the clamp of lround's result would put it.
inline int round_to_range(float x, QuantRange r) {
  x = x > -1e9f ? x : -1e9f;  // NaN fails the comparison
  x = x < 1e9f ? x : 1e9f;
  int i = static_cast<int>(x);  // toward zero; |x| <= 1e9 < 2^31
  const float frac = x - static_cast<float>(i);
  i += static_cast<int>(frac >= 0.5f) - static_cast<int>(frac <= -0.5f);
  i = i > r.lo ? i : r.lo;
  return i < r.hi ? i : r.hi;
}

// One block as chosen by a quantizer: the scale as stored (f16 bits) and the integers, and
// the loss they were chosen for. Written through the type's pack_block (throws for a type
// without blocks).
struct BlockCode : ScaledBlock {
  double loss = 0;  // the weighted squared error it was chosen for
};
void pack_block(WeightType type, const BlockCode& code, std::byte* block);

// The scale quantize_row_search picks for one block of 32 weights (importance: [32] or
// nullptr for uniform), as f16 bits.
uint16_t search_block_scale(WeightType type, const float* w, const float* importance);

// Quantizes one row of `cols` weights into blocks of `type` (Q8_0 or Q4_0), choosing every
// block's scale to minimize sum_i importance[i] * (w[i] - value[i])^2, where value[i] is what
// dequantize_row gives back (the f16-rounded scale times the integer). importance: [cols],
// >= 0, or nullptr for uniform weights. A block whose importances are all zero is treated as
// uniform. Never worse than round-to-nearest under the same weighting (RTN is a candidate).
void quantize_row_search(WeightType type, const float* w, const float* importance, std::byte* row, size_t cols);

// Q3_K's search (src/quant/quantize_q3k.cpp; quantize_row_search takes it for Q3_K): each
// super-block's d, sixteen sub-block factors and quants chosen to minimize the same weighted
// loss, never worse than round-to-nearest under it.
void quantize_row_search_q3_k(const float* w, const float* importance, std::byte* row, size_t cols);
// One super-block of 256 weights (importance: [256] or nullptr) by that search.
Q3kCode q3k_search(const float* w, const float* importance);
// For 16 weights w (importances a) and the super-block scale d as stored: the factor l in
// [center - 2, center + 2] and in [-32, 31] (the nearest end when none is) and its quants,
// rounded for the scale d * l, with the least loss; returns that loss.
double q3k_best_factor(const float* w, const float* a, float d, int center, int8_t& factor, int8_t* q);

// Round-to-nearest into blocks of `type` (Q8_0 or Q4_0) with one scale per `group` weights (a
// multiple of the block; the row's last group may be shorter): the type's own rule (Q8_0:
// amax / 127; Q4_0: the signed value of largest magnitude maps to -8) over the whole group, its
// f16 scale written into each of the group's blocks. group = 32 is bitwise quantize_row.
void quantize_row_grouped(WeightType type, const float* w, std::byte* row, size_t cols, size_t group);

// sum_i importance[i] * (w[i] - dequantize(row)[i])^2 (importance nullptr: uniform).
double weighted_row_error(WeightType type, const float* w, const float* importance, const std::byte* row, size_t cols);

// How one matrix of the input is written.
struct MatrixQuantization {
  WeightType type = WeightType::F32;  // a block type; a float type copies or converts the matrix
  bool search = false;                // quantize_row_search rather than round-to-nearest
  std::vector<float> importance;      // [cols] for the search and GPTQ's scales; empty: uniform
  // GPTQ (quant/gptq.h) with this factor of the inputs' Gram matrix (shared by the matrices
  // that read the same input); takes precedence over `search`.
  std::shared_ptr<const GptqFactor> gptq_factor;
  // Round-to-nearest with one scale per this many weights (quantize_row_grouped); 0 or the
  // type's block: quantize_row. Not with `search` or `gptq_factor`.
  size_t scale_group = 0;
};

struct QuantizedFileStats {
  uint64_t matrix_params = 0, matrix_bytes = 0;  // all matrices written
  uint64_t params = 0, tensor_bytes = 0;         // everything written
  double error_sq = 0, weight_sq = 0;            // sums over the quantized matrices
  uint64_t repeated_scale_bytes = 0;             // scales written again within a scale group
};

// Throws a one-line Error naming the first tensor of the manifest holding a NaN or infinity.
void check_finite_weights(const SafetensorsFile& in, const ModelConfig& cfg, ThreadPool& pool);

// Writes out_file (temp + rename): the manifest's tensors of `in` in manifest order (a tied
// model's stored lm_head copy is dropped), matrices per `plan` (missing from it: copied as
// stored), norms and biases as F32; `metadata` plus the declaration of the block tensors in
// `__metadata__`. Non-finite weights are an Error.
QuantizedFileStats write_quantized_weights(const SafetensorsFile& in, const ModelConfig& cfg,
                                           const std::map<std::string, MatrixQuantization>& plan,
                                           const std::map<std::string, std::string>& metadata,
                                           const std::filesystem::path& out_file, ThreadPool& pool,
                                           const std::function<void(uint64_t done, uint64_t total)>& progress);

}  // namespace nanoinfer
