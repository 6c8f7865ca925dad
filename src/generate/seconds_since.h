// How generation times its phases (Generator's statistics, a timed draft length).
#pragma once

#include <chrono>

namespace nanoinfer {

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace nanoinfer
