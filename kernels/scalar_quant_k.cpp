// Scalar references for the K-quant products (Q4_K, Q5_K, Q6_K, Q3_K: src/base/weight_blocks.h) and their
// packed layout (kernels/quant_blocks.h). The activations are the same int8 blocks of 32 the
// other quantized types read (quantize_activations, kernels/scalar_quant.cpp), so one
// quantized input serves a product whose parts mix Q8_0, Q4_K and Q6_K. For each output,
// over the 32-element activation blocks b in ascending order (8 per super-block):
//
//   Q4_K and Q5_K, b = sub-block j of super-block B (its 32 weights share sc[j], m[j]):
//     isum = sum_i q[i] * xq[i]                 (exact int32; q in [0, 15], Q5_K [0, 31])
//     ds   = f16(d) * float(sc[j]);  dm = f16(dmin) * float(m[j])      (exact: 11 x 6 bits)
//     acc  = acc + dx[b] * (ds * float(isum) - dm * float(s[b]))       (each step rounded)
//   Q6_K, b = sub-blocks 2j and 2j + 1 (16 weights each) of super-block B:
//     ia   = sum_{i < 16} (q[i] - 32) * xq[i];  ib = the same over i in [16, 32)
//     I    = sc[2j] * ia + sc[2j + 1] * ib      (exact int32: |I| <= 2 * 16 * 32 * 128 * 128 = 2^24)
//     acc  = acc + (f16(d) * dx[b]) * float(I)  (each step rounded; float(I) is exact)
//   Q3_K, as Q6_K with (sc - 32) for the scale and (q - 4) for the quant: |I| <= 2 * 16 * 4 * 128 * 32
//   y[t][r] = bias[r] + acc                      (or acc when there is no bias)
//
// with s[b] the sum of the activation block's q (QuantizedActivations::s). Nothing is fused,
// and a SIMD kernel computes each (row, token) pair in one lane with exactly these steps, so
// results are bitwise equal on every ISA, for any split of rows and for any batch.
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/quant_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer::kernels {
namespace {

// Element e (0..255) of a Q4_K / Q5_K super-block, unsigned 4-bit / 5-bit.
int q4_k_quant(const BlockQ4_K& b, size_t e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  return (e / 32) % 2 == 0 ? byte & 0x0f : byte >> 4;
}
int q5_k_quant(const BlockQ5_K& b, size_t e) {
  const uint8_t byte = b.qs[32 * (e / 64) + e % 32];
  const int low = (e / 32) % 2 == 0 ? byte & 0x0f : byte >> 4;
  return low | ((b.qh[e % 32] >> (e / 32)) & 1) << 4;
}

// Element e (0..255) of a Q6_K super-block, unsigned 6-bit.
int q6_k_quant(const BlockQ6_K& b, size_t e) {
  const size_t h = e / 128, k = (e % 128) / 32, l = e % 32;
  const uint8_t ql = b.ql[64 * h + l + (k % 2) * 32];
  const int low = k < 2 ? ql & 0x0f : ql >> 4;
  return low | ((b.qh[32 * h + l] >> (2 * k)) & 3) << 4;
}

}  // namespace

namespace {

// The Q4_K / Q5_K product: sub-block scales and mins, `Quant` reading element e of a block.
template <class Block, int (*Quant)(const Block&, size_t)>
void matmul_k_min(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                  size_t row_begin, size_t row_end) {
  const size_t nsb = x.cols / kSuperBlock, row_bytes = nsb * sizeof(Block);
  for (size_t t = 0; t < x.n; ++t) {
    const int8_t* xq = x.q.data() + t * x.cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      float acc = 0.0f;
      for (size_t sb = 0; sb < nsb; ++sb) {
        const auto blk = load_k_block<Block>(w + r * row_bytes, sb);
        const float d = f16_to_f32(blk.d), dmin = f16_to_f32(blk.dmin);
        for (size_t j = 0; j < 8; ++j) {
          const size_t b = 8 * sb + j;
          int32_t isum = 0;
          for (size_t i = 0; i < kQuantBlock; ++i) isum += Quant(blk, 32 * j + i) * int32_t{xq[32 * b + i]};
          const ScaleMin sm = k_scale_min(blk.scales, static_cast<int>(j));
          const float ds = d * static_cast<float>(sm.scale), dm = dmin * static_cast<float>(sm.min);
          const float inner = ds * static_cast<float>(isum) - dm * static_cast<float>(x.s[b * x.tokens + t]);
          acc += x.d[b * x.tokens + t] * inner;
        }
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

// A Q6_K or Q3_K super-block as its signed sub-block scales and quants (value - 32, q - 4).
struct Sub16Block {
  uint16_t d;
  int32_t scale[16], q[kSuperBlock];
};
Sub16Block sub16_of(const BlockQ6_K& b) {
  Sub16Block out;
  out.d = b.d;
  for (size_t s = 0; s < 16; ++s) out.scale[s] = b.scales[s];
  for (size_t e = 0; e < kSuperBlock; ++e) out.q[e] = q6_k_quant(b, e) - 32;
  return out;
}
Sub16Block sub16_of(const BlockQ3_K& b) {
  const Q3kCode c = unpack_q3_k(b);
  Sub16Block out;
  out.d = c.d;
  for (size_t s = 0; s < 16; ++s) out.scale[s] = c.scale[s];
  for (size_t e = 0; e < kSuperBlock; ++e) out.q[e] = c.q[e];
  return out;
}

// The Q6_K / Q3_K product: 16 sub-blocks of 16 with signed scales.
template <class Block>
void matmul_sub16(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y, size_t rows,
                  size_t row_begin, size_t row_end) {
  const size_t nsb = x.cols / kSuperBlock, row_bytes = nsb * sizeof(Block);
  for (size_t t = 0; t < x.n; ++t) {
    const int8_t* xq = x.q.data() + t * x.cols;
    for (size_t r = row_begin; r < row_end; ++r) {
      float acc = 0.0f;
      for (size_t sb = 0; sb < nsb; ++sb) {
        const Sub16Block blk = sub16_of(load_k_block<Block>(w + r * row_bytes, sb));
        const float d = f16_to_f32(blk.d);
        for (size_t j = 0; j < 8; ++j) {
          const size_t b = 8 * sb + j;
          int32_t half[2] = {0, 0};
          for (size_t i = 0; i < kQuantBlock; ++i) half[i / 16] += blk.q[32 * j + i] * int32_t{xq[32 * b + i]};
          const int32_t isum = blk.scale[2 * j] * half[0] + blk.scale[2 * j + 1] * half[1];
          acc += (d * x.d[b * x.tokens + t]) * static_cast<float>(isum);
        }
      }
      y[t * rows + r] = bias ? bias[r] + acc : acc;
    }
  }
}

}  // namespace

constinit const ByType<MatmulQuantizedFn> matmul_quantized_k{.q4_k = matmul_k_min<BlockQ4_K, q4_k_quant>,
                                                             .q5_k = matmul_k_min<BlockQ5_K, q5_k_quant>,
                                                             .q6_k = matmul_sub16<BlockQ6_K>,
                                                             .q3_k = matmul_sub16<BlockQ3_K>};

// ---- the K types' packed layout (kernels/quant_blocks.h) --------------------------------------

namespace {

// Where byte i of row j's super-block goes in its group's packed super-block
// (kPackRows * block_bytes bytes): the layouts of kernels/quant_blocks.h, as one map.
size_t k_packed_offset(WeightType type, size_t j, size_t i) {
  if (type == WeightType::Q5_K) {  // Q4_K's layout of d, dmin, scales and qs, then qh
    if (i < 16) return k_packed_offset(WeightType::Q4_K, j, i);
    if (i < 48) {
      const size_t q = i - 16, k = q / 4;  // qh word k
      return 2304 + 64 * k + 4 * j + q % 4;
    }
    return k_packed_offset(WeightType::Q4_K, j, i - 32);  // qs
  }
  if (type == WeightType::Q3_K) {                                   // hmask (32), qs (64), scales (12), d (2)
    if (i >= 108) return 2 * j + (i - 108);                         // d
    if (i >= 96) return 32 + 16 * (i - 96) + j;                     // scale byte p, one plane per p
    if (i >= 32) return 224 + 64 * ((i - 32) / 4) + 4 * j + i % 4;  // qs word (i - 32) / 4
    return 1248 + 64 * (i / 4) + 4 * j + i % 4;                     // hmask word i / 4
  }
  if (type == WeightType::Q4_K) {
    if (i < 2) return 2 * j + i;                            // d
    if (i < 4) return 32 + 2 * j + (i - 2);                 // dmin
    if (i < 16) return 64 + 16 * (i - 4) + j;               // scale byte p = i - 4, one plane per p
    const size_t q = i - 16, c = q / 32, k = (q % 32) / 4;  // chunk c, word k
    return 256 + 64 * (8 * c + k) + 4 * j + q % 4;
  }
  // Q6_K: ql (128), qh (64), scales (16), d (2).
  if (i >= 208) return 2 * j + (i - 208);        // d
  if (i >= 192) return 32 + 16 * (i - 192) + j;  // scale s, one plane per s
  size_t h, k, v;
  if (i < 128) {
    h = i / 64;
    const size_t l = i % 64;
    v = l / 32;  // 0: ql[l], 1: ql[l + 32]
    k = (l % 32) / 4;
  } else {
    h = (i - 128) / 32;
    k = ((i - 128) % 32) / 4;
    v = 2;
  }
  return 288 + 64 * (3 * (8 * h + k) + v) + 4 * j + i % 4;
}

// The map for a type, computed once: kPackRows * block_bytes entries, row j's byte i at j *
// block_bytes + i.
template <WeightType kType>
std::vector<uint32_t> make_k_packed_map() {
  const size_t bb = weight_type_info(kType).block_bytes;
  std::vector<uint32_t> m(kPackRows * bb);
  for (size_t j = 0; j < kPackRows; ++j)
    for (size_t i = 0; i < bb; ++i) m[j * bb + i] = static_cast<uint32_t>(k_packed_offset(kType, j, i));
  return m;
}

const std::vector<uint32_t>& k_packed_map(WeightType type) {
  static const std::vector<uint32_t> q4 = make_k_packed_map<WeightType::Q4_K>(),
                                     q5 = make_k_packed_map<WeightType::Q5_K>(),
                                     q6 = make_k_packed_map<WeightType::Q6_K>(),
                                     q3 = make_k_packed_map<WeightType::Q3_K>();
  return type == WeightType::Q4_K ? q4 : type == WeightType::Q5_K ? q5 : type == WeightType::Q6_K ? q6 : q3;
}

}  // namespace

void pack_quantized_k(WeightType type, std::byte* w, size_t rows, size_t cols) {
  const std::vector<uint32_t>& map = k_packed_map(type);
  const size_t bb = weight_type_info(type).block_bytes, nsb = cols / kSuperBlock, row_bytes = nsb * bb;
  std::vector<std::byte> group(kPackRows * row_bytes);
  for (size_t g = 0; g + kPackRows <= rows; g += kPackRows) {
    std::byte* dst = w + g * row_bytes;
    std::memcpy(group.data(), dst, group.size());
    for (size_t sb = 0; sb < nsb; ++sb) {
      std::byte* out = dst + sb * kPackRows * bb;
      for (size_t j = 0; j < kPackRows; ++j)
        for (size_t i = 0; i < bb; ++i) out[map[j * bb + i]] = group[j * row_bytes + sb * bb + i];
    }
  }
}

const std::byte* packed_row_k(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                              std::byte* scratch) {
  const size_t bb = weight_type_info(type).block_bytes, nsb = cols / kSuperBlock, row_bytes = nsb * bb;
  if (r >= rows / kPackRows * kPackRows) return w + r * row_bytes;
  const std::vector<uint32_t>& map = k_packed_map(type);
  const std::byte* group = w + r / kPackRows * kPackRows * row_bytes;
  const size_t j = r % kPackRows;
  for (size_t sb = 0; sb < nsb; ++sb)
    for (size_t i = 0; i < bb; ++i) scratch[sb * bb + i] = group[sb * kPackRows * bb + map[j * bb + i]];
  return scratch;
}

}  // namespace nanoinfer::kernels
