// Byte counts as people read them (942.3 MiB), for the hub commands' lines.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace nanoinfer::cli {

inline std::string byte_size(uint64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.1f} {}", value, units[unit]);
}

}  // namespace nanoinfer::cli
