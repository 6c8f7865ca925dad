// Scalar references for the products of the other 32-blocks of llama.cpp's files (Q4_1, Q5_0,
// Q5_1: src/base/weight_blocks.h) and their packed layout (kernels/quant_blocks.h). They read
// the same int8 activation blocks of 32 as every quantized type (quantize_activations,
// kernels/scalar_quant.cpp). For each output, over the blocks b in ascending order:
//
//   isum = sum_i q[i] * xq[i]                        (exact int32; q unsigned, in [0, 31])
//   Q5_0:        acc = acc + (f16(d) * dx[b]) * float(isum - 16 * s[b])
//   Q4_1, Q5_1:  acc = acc + dx[b] * (f16(d) * float(isum) + f16(m) * float(s[b]))
//   y[t][r] = bias[r] + acc                           (or acc when there is no bias)
//
// each step rounded, nothing fused (isum - 16 s[b] is the exact sum of (q - 16) * xq, as Q4_0's
// offset; s[b] is the activation block's sum, QuantizedActivations::s). A SIMD kernel computes
// each (row, token) pair in one lane with exactly these steps, so results are bitwise equal on
// every ISA, for any split of rows and for any batch.
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"

namespace nanoinfer::kernels {
namespace {

template <class Block>
void matmul_block32(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                    size_t row_begin, size_t row_end) {
  const size_t nb = x.nb, row_bytes = nb * sizeof(Block);
  for (size_t t = 0; t < x.n; ++t) {
    const int8_t* xq = x.q.data() + t * x.cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      float acc = 0.0f;
      for (size_t b = 0; b < nb; ++b) {
        Block blk;
        std::memcpy(&blk, w + r * row_bytes + b * sizeof(Block), sizeof blk);
        int32_t isum = 0;
        for (size_t i = 0; i < kQuantBlock; ++i) isum += block_quant(blk, i) * int32_t{xq[kQuantBlock * b + i]};
        const float d = f16_to_f32(blk.d), dx = x.d[b * x.tokens + t];
        const int32_t s = x.s[b * x.tokens + t];
        if constexpr (std::is_same_v<Block, BlockQ5_0>) {
          acc += (d * dx) * static_cast<float>(isum - 16 * s);
        } else {
          acc += dx * (d * static_cast<float>(isum) + f16_to_f32(blk.m) * static_cast<float>(s));
        }
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

// The Q5 types' 32 fifth bits of a row's block (bit i of qh: element i) as the packed layout
// holds them (kernels/quant_blocks.h): byte j has, for word k = 0..3, bit 2k = element 4k + j
// and bit 2k + 1 = element 16 + 4k + j.
void spread_qh(const uint8_t (&qh)[4], uint8_t* out) {
  const uint32_t bits = uint32_t{qh[0]} | uint32_t{qh[1]} << 8 | uint32_t{qh[2]} << 16 | uint32_t{qh[3]} << 24;
  for (size_t j = 0; j < 4; ++j) {
    uint8_t v = 0;
    for (size_t k = 0; k < 4; ++k) {
      v = static_cast<uint8_t>(v | ((bits >> (4 * k + j)) & 1) << (2 * k));
      v = static_cast<uint8_t>(v | ((bits >> (16 + 4 * k + j)) & 1) << (2 * k + 1));
    }
    out[j] = v;
  }
}
void gather_qh(const uint8_t* in, uint8_t (&qh)[4]) {
  uint32_t bits = 0;
  for (size_t j = 0; j < 4; ++j)
    for (size_t k = 0; k < 4; ++k) {
      bits |= uint32_t{(in[j] >> (2 * k)) & 1u} << (4 * k + j);
      bits |= uint32_t{(in[j] >> (2 * k + 1)) & 1u} << (16 + 4 * k + j);
    }
  for (size_t i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(bits >> (8 * i));
}

// Row j's block <-> its place in the group's packed block (kPackRows * sizeof(Block) bytes).
template <class Block>
void pack_block(const Block& b, size_t j, uint8_t* out) {
  constexpr bool kMin = requires {
    b.m;
  };
  constexpr size_t qs0 = kMin ? 4 * kPackRows : 2 * kPackRows;
  std::memcpy(out + 2 * j, &b.d, 2);
  if constexpr (kMin) std::memcpy(out + 2 * kPackRows + 2 * j, &b.m, 2);
  for (size_t k = 0; k < 4; ++k) std::memcpy(out + qs0 + 64 * k + 4 * j, b.qs + 4 * k, 4);
  if constexpr (requires { b.qh; }) spread_qh(b.qh, out + qs0 + 256 + 4 * j);
}
template <class Block>
Block unpack_block(const uint8_t* in, size_t j) {
  Block b{};
  constexpr bool kMin = requires {
    b.m;
  };
  constexpr size_t qs0 = kMin ? 4 * kPackRows : 2 * kPackRows;
  std::memcpy(&b.d, in + 2 * j, 2);
  if constexpr (kMin) std::memcpy(&b.m, in + 2 * kPackRows + 2 * j, 2);
  for (size_t k = 0; k < 4; ++k) std::memcpy(b.qs + 4 * k, in + qs0 + 64 * k + 4 * j, 4);
  if constexpr (requires { b.qh; }) gather_qh(in + qs0 + 256 + 4 * j, b.qh);
  return b;
}

template <class Block>
void pack_rows(std::byte* w, size_t rows, size_t cols) {
  const size_t nb = cols / kQuantBlock, row_bytes = nb * sizeof(Block);
  std::vector<std::byte> group(kPackRows * row_bytes);
  for (size_t g = 0; g + kPackRows <= rows; g += kPackRows) {
    std::byte* dst = w + g * row_bytes;
    std::memcpy(group.data(), dst, group.size());
    for (size_t b = 0; b < nb; ++b)
      for (size_t j = 0; j < kPackRows; ++j) {
        Block blk;
        std::memcpy(&blk, group.data() + j * row_bytes + b * sizeof(Block), sizeof blk);
        pack_block(blk, j, reinterpret_cast<uint8_t*>(dst + b * kPackRows * sizeof(Block)));
      }
  }
}

template <class Block>
const std::byte* packed_row_of(const std::byte* w, size_t rows, size_t cols, size_t r, std::byte* scratch) {
  const size_t nb = cols / kQuantBlock, row_bytes = nb * sizeof(Block);
  if (r >= rows / kPackRows * kPackRows) return w + r * row_bytes;
  const auto* group = reinterpret_cast<const uint8_t*>(w + r / kPackRows * kPackRows * row_bytes);
  for (size_t b = 0; b < nb; ++b) {
    const Block blk = unpack_block<Block>(group + b * kPackRows * sizeof(Block), r % kPackRows);
    std::memcpy(scratch + b * sizeof(Block), &blk, sizeof blk);
  }
  return scratch;
}

}  // namespace

constinit const ByType<MatmulQuantizedFn> matmul_quantized_file{
    .q4_1 = matmul_block32<BlockQ4_1>, .q5_0 = matmul_block32<BlockQ5_0>, .q5_1 = matmul_block32<BlockQ5_1>};

void pack_quantized_file(WeightType type, std::byte* w, size_t rows, size_t cols) {
  if (type == WeightType::Q4_1) return pack_rows<BlockQ4_1>(w, rows, cols);
  if (type == WeightType::Q5_0) return pack_rows<BlockQ5_0>(w, rows, cols);
  return pack_rows<BlockQ5_1>(w, rows, cols);
}

const std::byte* packed_row_file(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                                 std::byte* scratch) {
  if (type == WeightType::Q4_1) return packed_row_of<BlockQ4_1>(w, rows, cols, r, scratch);
  if (type == WeightType::Q5_0) return packed_row_of<BlockQ5_0>(w, rows, cols, r, scratch);
  return packed_row_of<BlockQ5_1>(w, rows, cols, r, scratch);
}

}  // namespace nanoinfer::kernels
