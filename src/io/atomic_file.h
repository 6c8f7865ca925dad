// Writing a file atomically: everything goes to a temporary file in the destination directory,
// which is fsync'ed and renamed over the final name only once complete, so an interrupted or
// failed write never leaves a half-written file under that name. Shared by the model writers.
#pragma once

#include <optional>

#include "base/output_files.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace nanoinfer {

class AtomicFile {
 public:
  // Creates the temporary file next to `final_path`; throws Error naming the path if it cannot.
  explicit AtomicFile(const std::filesystem::path& final_path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // removes the temporary file unless commit() succeeded

  void write_all(const void* data, size_t size);  // throws Error on any write failure
  void write_zeros(size_t size);                  // padding
  uint64_t written() const { return written_; }   // bytes written so far

  // Makes the file readable like any other the user writes, fsyncs, renames it into place.
  void commit();

 private:
  std::filesystem::path final_;
  std::string tmp_;
  std::optional<RemoveOnSignal> on_signal_;  // SIGINT/SIGTERM/SIGHUP do not unwind: unlink then
  int fd_ = -1;
  bool committed_ = false;
  uint64_t written_ = 0;
};

}  // namespace nanoinfer
