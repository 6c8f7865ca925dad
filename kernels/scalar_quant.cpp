// Scalar references for the quantized weight types' products: the matrix product every
// faster kernel is held to, bitwise, and the packed layout. (Quantizing and dequantizing rows
// are the weight-type table's, src/base/weight_blocks.cpp.)
//
// The product reads each activation row quantized to int8 blocks of 32
// (quantize_activation_block below), so that a block's dot product is exact integer
// arithmetic; quantize_activations does so for a whole input once, and every thread and
// matrix reading that input shares the result. Then, for each output,
//
//   acc = 0.0f
//   for each block b, in ascending order:
//     s    = dw[r][b] * dx[t][b]            (f32 multiply, rounded; dw is the f16 scale widened)
//     acc  = acc + s * float(isum(r, t, b))  (f32 multiply, rounded; then f32 add, rounded)
//   y[t][r] = bias[r] + acc                  (or acc when there is no bias)
//
// with isum the exact int32 sum of the 32 products of quantized weights and activations
// (|isum| <= 32 * 128 * 127, so float(isum) is exact). Nothing is fused: every SIMD kernel
// computes each (row, token) pair in one vector lane with exactly these operations, which is
// what makes the results bitwise equal on every ISA, for any split of rows across threads,
// and for a batch versus one token at a time.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer::kernels {

float quantize_activation_block(const float* x, int8_t* q) {
  // fmax skips NaN, like the SIMD max with the running maximum as its second operand.
  float amax = 0.0f;
  for (size_t i = 0; i < kQuantBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  if (!(d >= std::numeric_limits<float>::min())) {
    std::memset(q, 0, kQuantBlock);
    return 0.0f;
  }
  const float id = 1.0f / d;
  for (size_t i = 0; i < kQuantBlock; ++i) {
    // |x * id| <= 127 * (1 + 2^-22) for finite x, so r is in range; NaN maps to -128 as
    // vcvtps2dq + saturating packs do.
    const float r = std::nearbyint(x[i] * id);
    q[i] = r >= -127.0f && r <= 127.0f ? static_cast<int8_t>(r) : int8_t{-128};
  }
  return d;
}

namespace {

// The product for any scaled-integer type, reading its blocks through the type's unpack
// (src/base/weight_blocks.h): weight i of a block is d * q[i].
template <WeightType kType>
void matmul_scaled(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                   size_t row_begin, size_t row_end) {
  const WeightTypeInfo& info = weight_type_info(kType);
  const size_t nb = x.nb;
  const size_t row_bytes = weight_row_bytes(kType, x.cols);
  ScaledBlock blk;
  for (size_t t = 0; t < x.n; ++t) {
    const int8_t* xq = x.q.data() + t * x.cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      const std::byte* row = w + r * row_bytes;
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        info.unpack_block(row + b * info.block_bytes, blk);
        const float dw = f16_to_f32(blk.d);
        int32_t isum = 0;
        for (size_t i = 0; i < kQuantBlock; ++i) isum += int32_t{blk.q[i]} * int32_t{xq[b * kQuantBlock + i]};
        const float s = dw * x.d[b * x.tokens + t];
        acc += s * static_cast<float>(isum);
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

}  // namespace

void quantize_activations(const float* x, size_t cols, size_t n, QuantizedActivations& a) {
  a.shape(cols, n);
  for (size_t t = 0; t < a.tokens; ++t) {
    for (size_t b = 0; b < a.nb; ++b) {
      int8_t* q = a.q.data() + t * cols + b * kQuantBlock;
      float d = 0.0f;
      if (t < n)
        d = quantize_activation_block(x + t * cols + b * kQuantBlock, q);
      else
        std::memset(q, 0, kQuantBlock);
      int32_t half[2] = {0, 0};
      for (size_t i = 0; i < kQuantBlock; ++i) half[i / 16] += q[i];
      a.d[b * a.tokens + t] = d;
      a.s[b * a.tokens + t] = half[0] + half[1];
      a.s16[2 * b * a.tokens + t] = half[0];
      a.s16[(2 * b + 1) * a.tokens + t] = half[1];
    }
  }
}

constinit const ByType<MatmulQuantizedFn> matmul_quantized_scaled{.q8_0 = matmul_scaled<WeightType::Q8_0>,
                                                                  .q4_0 = matmul_scaled<WeightType::Q4_0>};

float score_block(const float* w, const float* a, float d, float id, int lo, int hi, int8_t* q) {
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (size_t i = 0; i < 32; i += 8) {
    for (size_t k = 0; k < 8; ++k) {
      float x = w[i + k] * id;
      x = x > -1e9f ? x : -1e9f;  // NaN fails the comparison
      x = x < 1e9f ? x : 1e9f;
      int r = static_cast<int>(x);  // toward zero
      const float frac = x - static_cast<float>(r);
      r += static_cast<int>(frac >= 0.5f) - static_cast<int>(frac <= -0.5f);
      float t = static_cast<float>(r);
      t = t > flo ? t : flo;
      t = t < fhi ? t : fhi;
      q[i + k] = static_cast<int8_t>(t);
      const float e = w[i + k] - d * t;
      s[k] += a[i + k] * e * e;
    }
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void refit_block(const float* w, const float* a, const int8_t* q, double* sums) {
  double n[8] = {}, d[8] = {};
  for (size_t i = 0; i < 32; i += 8) {
    for (size_t k = 0; k < 8; ++k) {
      const double ai = a[i + k], qi = q[i + k];
      n[k] += (ai * static_cast<double>(w[i + k])) * qi;
      d[k] += (ai * qi) * qi;
    }
  }
  sums[0] = ((n[0] + n[1]) + (n[2] + n[3])) + ((n[4] + n[5]) + (n[6] + n[7]));
  sums[1] = ((d[0] + d[1]) + (d[2] + d[3])) + ((d[4] + d[5]) + (d[6] + d[7]));
}

}  // namespace nanoinfer::kernels

// ---- the packed layout (kernels/quant_blocks.h) -------------------------------------------

namespace nanoinfer::kernels {
namespace {

// A type's packed layout (kernels/quant_blocks.h): how many 4-byte words of quants a block
// has, and the bits flipped in each quant byte to hold it (Q8_0 words are held as q + 128,
// unsigned: flipping the top bit converts both ways).
struct PackedLayout {
  size_t words;
  uint8_t flip;
};

// Q8_0 and Q4_0's; every other quantized type's packed layout is its file's (pack_quantized).
PackedLayout packed_layout(WeightType type) {
  if (type == WeightType::Q8_0) return {8, 0x80u};
  if (type == WeightType::Q4_0) return {4, 0x00u};
  fail("pack_quantized: {} has no packed layout", weight_type_name(type));
}

}  // namespace

void pack_quantized(WeightType type, std::byte* w, size_t rows, size_t cols) {
  if (weight_type_info(type).block_elems == kSuperBlock) return pack_quantized_k(type, w, rows, cols);
  if (weight_type_info(type).quantized && !weight_type_info(type).scaled_blocks())
    return pack_quantized_file(type, w, rows, cols);
  const PackedLayout layout = packed_layout(type);
  const size_t row_bytes = weight_row_bytes(type, cols), nb = cols / kQuantBlock;
  const size_t bb = row_bytes / nb, words = layout.words;
  std::vector<std::byte> group(kPackRows * row_bytes);
  for (size_t g = 0; g + kPackRows <= rows; g += kPackRows) {
    std::byte* dst = w + g * row_bytes;
    std::memcpy(group.data(), dst, group.size());
    for (size_t b = 0; b < nb; ++b) {
      std::byte* out = dst + b * kPackRows * bb;
      for (size_t r = 0; r < kPackRows; ++r) {
        const std::byte* blk = group.data() + r * row_bytes + b * bb;
        std::memcpy(out + 2 * r, blk, 2);  // the f16 scale
        for (size_t k = 0; k < words; ++k)
          for (size_t i = 0; i < 4; ++i)
            out[2 * kPackRows + 64 * k + 4 * r + i] =
                std::byte{static_cast<uint8_t>(std::to_integer<uint8_t>(blk[2 + 4 * k + i]) ^ layout.flip)};
      }
    }
  }
}

const std::byte* packed_row(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                            std::byte* scratch) {
  if (type == WeightType::F32 || type == WeightType::BF16) {
    packed_row_float(w, weight_row_bytes(type, cols), r, scratch);
    return scratch;
  }
  if (weight_type_info(type).block_elems == kSuperBlock) return packed_row_k(type, w, rows, cols, r, scratch);
  if (weight_type_info(type).quantized && !weight_type_info(type).scaled_blocks())
    return packed_row_file(type, w, rows, cols, r, scratch);
  const PackedLayout layout = packed_layout(type);
  const size_t row_bytes = weight_row_bytes(type, cols);
  if (r >= rows / kPackRows * kPackRows) return w + r * row_bytes;
  const size_t nb = cols / kQuantBlock, bb = row_bytes / nb, words = layout.words;
  const std::byte* group = w + r / kPackRows * kPackRows * row_bytes;
  const size_t j = r % kPackRows;
  for (size_t b = 0; b < nb; ++b) {
    const std::byte* in = group + b * kPackRows * bb;
    std::byte* blk = scratch + b * bb;
    std::memcpy(blk, in + 2 * j, 2);
    for (size_t k = 0; k < words; ++k)
      for (size_t i = 0; i < 4; ++i)
        blk[2 + 4 * k + i] = std::byte{
            static_cast<uint8_t>(std::to_integer<uint8_t>(in[2 * kPackRows + 64 * k + 4 * j + i]) ^ layout.flip)};
  }
  return scratch;
}

}  // namespace nanoinfer::kernels
