// Writing a whole file the safe way, for the commands that write one (viz --out, --trace):
// the bytes go to a new temporary file beside the target (mkstemp: created exclusively, so a
// symbolic link planted at its name is never followed), removed if SIGINT, SIGTERM or SIGHUP
// arrives, fsync'ed, then renamed over the target. A target that exists and is not a regular
// file — a symbolic link, a FIFO, a device such as /dev/null or /dev/full, a directory — is
// refused before anything is written, rather than replaced by the rename.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace nanoinfer {

class AtomicFile;

// Throws nanoinfer::Error naming the path and the problem; the target is then untouched.
void write_file_atomically(const std::filesystem::path& path, std::string_view data);

// The same, piece by piece, for an output written as it is made (bench discard's rewrite of a
// results file it streams): the target is checked and the temporary made by the constructor,
// pieces are buffered and written in chunks, and commit() renames the file into place. Without
// commit() (an error, an exception) the temporary is removed and the target is untouched.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::filesystem::path& path);  // throws as write_file_atomically
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view data);
  void commit();

 private:
  void flush();
  std::unique_ptr<AtomicFile> file_;
  std::string buffer_;
};

// The target check alone, for a command to refuse a bad output before its long work: throws
// unless nothing or a regular file is at `path`.
void require_replaceable_file(const std::filesystem::path& path);

}  // namespace nanoinfer
