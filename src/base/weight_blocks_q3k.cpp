// The scalar references of Q3_K (layout in src/base/weight_blocks.h): the block <-> numbers
// codec, the dequantizer every kernel is tested against, and a plain round-to-nearest
// quantizer (`--dtype q3_k` of a float model, test matrices). The dequantizer computes each
// weight as (d * float(sc - 32)) * float(q - 4), each product rounded once: llama.cpp's
// order, so that a file's weights come out bitwise as llama.cpp reads them.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/weight_blocks.h"
#include "nanoinfer/dtype.h"
#include "nanoinfer/error.h"

namespace nanoinfer {

int q3_k_scale(const uint8_t (&scales)[12], int s) {
  const int low = s < 8 ? scales[s] & 0x0F : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return low | high << 4;
}

void q3_k_pack_scales(const uint8_t* sc, uint8_t (&scales)[12]) {
  std::memset(scales, 0, sizeof scales);
  for (int s = 0; s < 16; ++s) {
    scales[s % 8] |= static_cast<uint8_t>((sc[s] & 0x0F) << (s < 8 ? 0 : 4));
    scales[8 + s % 4] |= static_cast<uint8_t>(((sc[s] >> 4) & 3) << (2 * (s / 4)));
  }
}

Q3kCode unpack_q3_k(const BlockQ3_K& b) {
  Q3kCode c;
  c.d = b.d;
  for (int s = 0; s < 16; ++s) c.scale[s] = static_cast<int8_t>(q3_k_scale(b.scales, s) - 32);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * n + l] >> (2 * j)) & 3, high = (b.hmask[l] >> (4 * n + j)) & 1;
        c.q[128 * n + 32 * j + l] = static_cast<int8_t>((low | high << 2) - 4);
      }
  return c;
}

BlockQ3_K pack_q3_k(const Q3kCode& c) {
  BlockQ3_K b{};
  b.d = c.d;
  uint8_t sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = static_cast<uint8_t>(c.scale[s] + 32);
  q3_k_pack_scales(sc, b.scales);
  for (int n = 0; n < 2; ++n)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 32; ++l) {
        const int q = c.q[128 * n + 32 * j + l] + 4;
        b.qs[32 * n + l] |= static_cast<uint8_t>((q & 3) << (2 * j));
        b.hmask[l] |= static_cast<uint8_t>((q >> 2) << (4 * n + j));
      }
  return b;
}

void dequantize_row_q3_k(const std::byte* row, float* out, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const Q3kCode c = unpack_q3_k(load_k_block<BlockQ3_K>(row, i));
    const float d = f16_to_f32(c.d);
    for (size_t e = 0; e < kSuperBlock; ++e) {
      const float scale = d * static_cast<float>(c.scale[e / 16]);
      out[i * kSuperBlock + e] = scale * static_cast<float>(c.q[e]);
    }
  }
}

void quantize_row_q3_k(const float* in, std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols; ++i)
    if (!std::isfinite(in[i])) fail("quantize: weight {} of the row is {}", i, in[i]);
  for (size_t i = 0; i < cols / kSuperBlock; ++i) {
    const float* x = in + i * kSuperBlock;
    // Per sub-block the signed value of largest magnitude maps to -4, and the signed step of
    // largest magnitude to the scale factor -32 (the sign of d follows it).
    float step[16], extreme_step = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float extreme = 0.0f;
      for (int l = 0; l < 16; ++l)
        if (std::fabs(x[16 * s + l]) > std::fabs(extreme)) extreme = x[16 * s + l];
      step[s] = extreme / -4.0f;
      if (std::fabs(step[s]) > std::fabs(extreme_step)) extreme_step = step[s];
    }
    Q3kCode c;
    c.d = f32_to_f16(extreme_step / -32.0f);
    if ((c.d & 0x7c00u) == 0x7c00u)
      fail("quantize: a super-block needs a scale of {}, beyond f16's range", extreme_step / -32.0f);
    const float d = f16_to_f32(c.d);
    for (int s = 0; s < 16; ++s) {
      const long f = d != 0.0f ? std::clamp<long>(std::lround(step[s] / d), -32, 31) : 0;
      c.scale[s] = static_cast<int8_t>(f);
      const float ds = d * static_cast<float>(f);
      for (int l = 0; l < 16; ++l)
        c.q[16 * s + l] =
            static_cast<int8_t>(ds != 0.0f ? std::clamp<long>(std::lround(x[16 * s + l] / ds), -4, 3) : 0);
    }
    const BlockQ3_K b = pack_q3_k(c);
    std::memcpy(row + i * sizeof b, &b, sizeof b);
  }
}

bool finite_row_q3_k(const std::byte* row, size_t cols) {
  for (size_t i = 0; i < cols / kSuperBlock; ++i)
    if ((load_k_block<BlockQ3_K>(row, i).d & 0x7c00u) == 0x7c00u) return false;
  return true;
}

}  // namespace nanoinfer
