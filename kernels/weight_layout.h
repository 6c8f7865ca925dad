// Where a float matrix's elements are, for kernels written once for both layouts: G = 1, rows
// one after another; G = kFloatPackRows, the float packed layout (kernels.h: G rows interleaved
// one 64-byte line at a time). Row r's element at column c is at row_start<G>(w, r, cols) +
// col_offset<G, kStep, WT>(c), for c a multiple of a kernel's step of kStep elements (a whole
// line on the packed layout). Include only from kernel translation units: it has internal linkage (see
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
  // The packed products step a whole line at a time, so column c (a multiple of the step) is
  // c / line lines into the row, each G lines apart.
  static_assert(G == 1 || kStep == kLineElems<WT>, "on the packed layout a kernel steps one line at a time");
  return c * G;
}

}  // namespace
}  // namespace nanoinfer::kernels
