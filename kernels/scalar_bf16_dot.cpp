// The scalar reference of the avx512-bf16 tier's bf16 product: vdpbf16ps emulated bit for
// bit, so that it runs on any CPU and the kernel (kernels/kernels_avx512_bf16.cpp) can be
// held to it bitwise. For y[t][r] = bias[r] + sum_c w[r][c] * x[t][c]:
//
// 1. Each activation row is rounded to bf16 once (round_activation_bf16, which is what
//    vcvtne2ps2bf16 does) and zero-padded to a multiple of 32 columns; the weights past
//    `cols` read as +0 too (the kernel's masked load).
// 2. 16 float lanes start at +0. For each chunk of 32 columns in ascending order, lane j
//    takes the pair (2j, 2j + 1) of the chunk, odd column first, as the Intel SDM defines
//    vdpbf16ps:
//        acc = ftz(fma(daz(w[2j+1]), daz(x[2j+1]), acc))
//        acc = ftz(fma(daz(w[2j]),   daz(x[2j]),   acc))
//    fma rounds once to nearest even; daz reads a subnormal bf16 as a zero of its sign; ftz
//    turns a subnormal result into a zero of its sign. (The product of two bf16 is exact in
//    f32 range, so each step is acc + p rounded once.) The instruction ignores MXCSR.
// 3. The lanes are added in a fixed tree: lane i += lane i+8 (i < 8), then i += i+4 (i < 4),
//    i += i+2 (i < 2), and lane 0 + lane 1; these are ordinary f32 additions (MXCSR's
//    default: no flushing).
// 4. bias[r] + that sum (no addition at all without a bias).
//
// The hardware was checked against this, not only the manual: on AMD Zen 5 (EPYC, this
// project's test machine) 4 million random lane inputs over the whole bf16 range, subnormals
// and NaNs included, matched it bitwise, and variants with the even column first, one rounding
// for both products, or no DAZ/FTZ did not; vcvtne2ps2bf16 matched round_activation_bf16 for
// all 2^32 inputs. tests/kernels/bf16_dot_test.cpp keeps the decisive cases.
//
// Accuracy: rounding x to bf16 moves each term by at most 2^-8 of |w x| (half an ulp at 8
// significant bits), so |y - exact| <= 2^-8 * sum|w x| + gamma_m * (1 + 2^-8) * sum|w x| for
// m = 2 * ceil(cols/32)
// + 4 + 1 roundings, as long as nothing is subnormal (tests/kernels/kernels_test.cpp checks it).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"

namespace nanoinfer::kernels {

uint16_t round_activation_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t exponent = u & 0x7f800000u;
  if (exponent == 0) return static_cast<uint16_t>((u >> 16) & 0x8000u);  // zero or subnormal
  if (exponent == 0x7f800000u) {                                         // infinity or NaN
    const auto top = static_cast<uint16_t>(u >> 16);
    return (u & 0x007fffffu) != 0 ? static_cast<uint16_t>(top | 0x0040u) : top;
  }
  // Nearest even: add just under half an ulp of bf16, plus one when the kept part is odd.
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

namespace {

constexpr size_t kChunk = 32, kLanes = 16;

// A bf16 operand as vdpbf16ps reads it: subnormals are zeros of their sign.
float operand(uint16_t h) {
  const uint32_t u = (h & 0x7f80u) == 0 ? uint32_t{h & 0x8000u} << 16 : uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// One step of a lane: acc + a * b, rounded once (std::fmaf is correctly rounded; this file is
// compiled without FMA instructions, so it is glibc's exact emulation), then flushed.
float step(float acc, uint16_t a, uint16_t b) {
  const float r = std::fmaf(operand(a), operand(b), acc);
  return std::fpclassify(r) == FP_SUBNORMAL ? std::copysign(0.0f, r) : r;
}

}  // namespace

void matmul_bf16_dot(const std::byte* w_bytes, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                     size_t n_tokens, size_t row_begin, size_t row_end) {
  const auto* w = reinterpret_cast<const uint16_t*>(w_bytes);
  const size_t padded = (cols + kChunk - 1) / kChunk * kChunk;
  std::vector<uint16_t> xb(padded, 0), wb(padded, 0);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (size_t c = 0; c < cols; ++c) xb[c] = round_activation_bf16(x[t * cols + c]);
    for (size_t r = row_begin; r < row_end; ++r) {
      std::copy_n(w + r * cols, cols, wb.begin());  // (memcpy of 0 bytes from a null pointer is UB)
      float lane[kLanes] = {};
      for (size_t c0 = 0; c0 < padded; c0 += kChunk) {
        for (size_t j = 0; j < kLanes; ++j) {
          const size_t odd = c0 + 2 * j + 1, even = c0 + 2 * j;
          lane[j] = step(lane[j], wb[odd], xb[odd]);
          lane[j] = step(lane[j], wb[even], xb[even]);
        }
      }
      for (size_t half = kLanes / 2; half >= 1; half /= 2)
        for (size_t i = 0; i < half; ++i) lane[i] = lane[i] + lane[i + half];
      y[t * rows + r] = bias ? bias[r] + lane[0] : lane[0];
    }
  }
}

}  // namespace nanoinfer::kernels
