// Small helpers many test files use: the message of an expected error, a greedy pick, the
// names in a directory. One copy here (the tests compile as a unity build, where two files'
// private copies of the same helper collide).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nanoinfer/error.h"

namespace nanoinfer::test {

// Runs `body` in a child process (fork, then _exit(0) after it) and returns its wait status.
inline int in_child(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return status;
}

// The message of the Error fn throws ("" if it throws none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Whether two float arrays hold the same bits (NaNs and signed zeros included).
inline bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// tests/data/models: the tiny models with reference logits.
inline std::filesystem::path tiny_models_dir() {
  return std::filesystem::path(NANOINFER_SOURCE_DIR) / "tests/data/models";
}

// The tiny models' directories that hold `marker` (the full reference by default), sorted.
inline std::vector<std::filesystem::path> tiny_model_dirs(const char* marker = "reference.safetensors") {
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(tiny_models_dir()))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / marker)) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

// The index of the largest value; ties go to the lowest index, as in the reference.
inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// The names of a directory's entries, sorted.
inline std::vector<std::string> entries(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace nanoinfer::test
