// Where a float matrix's elements are, for kernels written once for both layouts: G = 1, rows
// one after another; G = kFloatPackRows, the float packed layout (kernels.h: G rows interleaved
// one 64-byte line at a time). Row r's element at column c is at row_start<G>(w, r, cols) +
// col_offset<G, kStep, WT>(c), for c a multiple of a kernel's step of kStep elements (which
// divides a line). Include only from kernel translation units: it has internal linkage (see
// simd_kernels.h for why).
#pragma once

#include <cstddef>

namespace nanoinfer::kernels {
namespace {

// Elements of WT in one line of the packed layout.
template <class WT>
inline constexpr size_t kLineElems = 64 / sizeof(WT);

template <size_t G, class WT>
[[gnu::always_inline]] inline const WT* row_start(const WT* w, size_t r, size_t cols) {
  if constexpr (G == 1) {
    return w + r * cols;
  } else {
    return w + (r / G) * G * cols + (r % G) * kLineElems<WT>;
  }
}

template <size_t G, size_t kStep, class WT>
[[gnu::always_inline]] inline size_t col_offset(size_t c) {
  constexpr size_t kLine = kLineElems<WT>;
  static_assert(kLine % kStep == 0, "a kernel's step divides a line");
  if constexpr (G == 1) {
    return c;
  } else if constexpr (kStep == kLine) {
    return c * G;  // c is a multiple of the line
  } else {
    return c / kLine * (G * kLine) + c % kLine;
  }
}

}  // namespace
}  // namespace nanoinfer::kernels
