// The one error policy: library code throws nanoinfer::Error with full context (the name of
// the thing, what was expected, what was found); the CLI catches it once, prints one line and
// exits non-zero. Hot loops use debug-only asserts, never exceptions.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace nanoinfer {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace nanoinfer
