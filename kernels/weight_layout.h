// Where a float matrix's rows are, for kernels written once for both layouts: G = 1, rows one
// after another; G = kFloatPackRows, the float packed layout (kernels.h: G rows interleaved
// one step of kStep columns, one 64-byte line, at a time). In either, row r's step at column c (a multiple of kStep)
// starts at row_start<G, kStep>(w, r, cols) + c * G. Include only from kernel translation
// units: it has internal linkage (see simd_kernels.h for why).
#pragma once

#include <cstddef>

namespace nanoinfer::kernels {
namespace {

template <size_t G, size_t kStep, class WT>
[[gnu::always_inline]] inline const WT* row_start(const WT* w, size_t r, size_t cols) {
  if constexpr (G == 1) {
    return w + r * cols;
  } else {
    return w + (r / G) * G * cols + (r % G) * kStep;
  }
}

}  // namespace
}  // namespace nanoinfer::kernels
