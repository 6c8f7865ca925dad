// Output buffers with guard regions for the kernel tests: canary bytes on both sides of the
// elements a kernel may write, and inside the buffer over elements it must not write (the rows
// outside a row range, the other parts of a stacked product, which share the output's rows). A
// write out of range changes a canary; intact() says where. The bitwise comparisons of the
// tests only see the elements they compare, so a stray store beside them went unnoticed.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

namespace nanoinfer::test {

template <class T>
class Guarded {
 public:
  // Past any one vector store (64 bytes) four times over; a multiple of 64, so the elements
  // start on a cache line as a std::vector's usually do not (no kernel may rely on either).
  static constexpr size_t kGuardBytes = 256;

  // n elements, each `fill`, between two guards.
  Guarded(size_t n, T fill)
      : n_(n), bytes_(2 * kGuardBytes + n * sizeof(T)), storage_(alloc(bytes_)), writable_(n, true) {
    for (size_t i = 0; i < bytes_; ++i) storage_.get()[i] = canary(i);
    for (size_t i = 0; i < n; ++i) data()[i] = fill;
  }

  T* data() { return reinterpret_cast<T*>(storage_.get() + kGuardBytes); }
  const T* data() const { return reinterpret_cast<const T*>(storage_.get() + kGuardBytes); }
  size_t size() const { return n_; }
  std::vector<T> values() const { return std::vector<T>(data(), data() + n_); }

  // Elements [begin, end) must not be written: they become canary bytes, checked by intact().
  void forbid(size_t begin, size_t end) {
    for (size_t i = begin; i < end && i < n_; ++i) {
      writable_[i] = false;
      std::byte* p = storage_.get() + kGuardBytes + i * sizeof(T);
      for (size_t b = 0; b < sizeof(T); ++b) p[b] = canary(kGuardBytes + i * sizeof(T) + b);
    }
  }
  // For an output of `rows_of_stride` rows of `stride` elements (a product's y: tokens x rows):
  // every element of each row outside columns [begin, end) is forbidden.
  void forbid_outside_columns(size_t rows_of_stride, size_t stride, size_t begin, size_t end) {
    for (size_t r = 0; r < rows_of_stride; ++r) {
      forbid(r * stride, r * stride + begin);
      forbid(r * stride + end, (r + 1) * stride);
    }
  }

  // Every canary as written: names the first changed byte (before, after, or which element).
  ::testing::AssertionResult intact() const {
    const std::byte* s = storage_.get();
    for (size_t i = 0; i < bytes_; ++i) {
      const bool guard = i < kGuardBytes || i >= kGuardBytes + n_ * sizeof(T);
      if (!guard && writable_[(i - kGuardBytes) / sizeof(T)]) continue;
      if (s[i] == canary(i)) continue;
      if (i < kGuardBytes) {
        return ::testing::AssertionFailure() << "written " << (kGuardBytes - i) << " byte(s) before the output";
      }
      if (guard) {
        return ::testing::AssertionFailure() << "written " << (i - kGuardBytes - n_ * sizeof(T))
                                             << " byte(s) past the end of the output (" << n_ << " elements)";
      }
      return ::testing::AssertionFailure() << "element " << (i - kGuardBytes) / sizeof(T) << " of " << n_
                                           << " was written but lies outside the range the call may write";
    }
    return ::testing::AssertionSuccess();
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  static std::byte* alloc(size_t bytes) {
    return static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  }
  // Varies with the position, so a shifted copy of the canary itself is caught too; never a
  // float that a product of the tests' values would plausibly be exactly.
  static std::byte canary(size_t i) { return static_cast<std::byte>(0xA5 ^ ((i * 29) & 0xff)); }

  size_t n_;
  size_t bytes_;
  std::unique_ptr<std::byte, Free> storage_;
  std::vector<bool> writable_;
};

// A product's output (n_tokens rows of `rows` floats) computed in the row ranges
// [cuts[i], cuts[i + 1]): `run(y, begin, end)` writes one range into its own guarded buffer in
// which every other column is forbidden (the parts of a stacked product share rows the same
// way), each buffer is checked, and the ranges are assembled (NaN where no range wrote).
template <class Run>
std::vector<float> run_row_ranges(size_t n_tokens, size_t rows, const std::vector<size_t>& cuts, Run&& run) {
  std::vector<float> whole(n_tokens * rows, std::numeric_limits<float>::quiet_NaN());
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    Guarded<float> part(whole.size(), std::numeric_limits<float>::quiet_NaN());
    part.forbid_outside_columns(n_tokens, rows, cuts[i], cuts[i + 1]);
    run(part.data(), cuts[i], cuts[i + 1]);
    EXPECT_TRUE(part.intact()) << "rows [" << cuts[i] << ", " << cuts[i + 1] << ") of " << rows << ", " << n_tokens
                               << " token(s)";
    for (size_t t = 0; t < n_tokens; ++t) {
      std::memcpy(&whole[t * rows + cuts[i]], part.data() + t * rows + cuts[i],
                  (cuts[i + 1] - cuts[i]) * sizeof(float));
    }
  }
  return whole;
}

}  // namespace nanoinfer::test
