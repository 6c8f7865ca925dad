// Comparing the API key a client sent with the server's. An early exit at the first differing
// byte would let a client time how much of its guess is right; this reads every byte of both
// (up to the longer length) whatever the first difference, and folds the differences with OR,
// so the work depends only on the lengths.
#pragma once

#include <algorithm>
#include <cstddef>

namespace nanoinfer {

// `Bytes` is anything with size() and operator[] giving a char (std::string_view in the
// server; the tests pass a type that counts the reads).
template <class Bytes>
bool same_secret(const Bytes& given, const Bytes& expected) {
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  const size_t n = std::max(given.size(), expected.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff = static_cast<unsigned char>(diff | (a ^ b));
  }
  return diff == 0;
}

}  // namespace nanoinfer
