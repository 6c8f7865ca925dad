// Reading files a user names (config.json, tokenizer.json, -f text files, stdin) without the
// ways that can go wrong silently or forever: a FIFO that blocks open() until a writer comes,
// /dev/zero read until memory runs out, a directory reported as "basic_filebuf::underflow".
//
// Every function checks the file's type with stat() before opening it, requires a regular
// file, opens with O_NONBLOCK (so a file swapped for a FIFO after the check cannot block
// either), and caps what it reads into memory. Every error is a nanoinfer::Error whose
// message names the path and, for a cap, the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace nanoinfer {

// Caps on what is read whole into memory, by kind of file. Real files are far smaller:
// config.json ~1 KB, tokenizer_config.json ~10 KB, Qwen2.5's tokenizer.json 11 MB.
inline constexpr uint64_t kMaxConfigFileBytes = uint64_t{16} << 20;      // *config.json
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{512} << 20;  // tokenizer.json
inline constexpr uint64_t kMaxTextFileBytes = uint64_t{1} << 30;         // -f text, stdin
inline constexpr size_t kMaxLineBytes = size_t{64} << 20;                // one --jsonl line

// Throws unless `path` (symlinks followed) is a regular file: "{path}: not found",
// "{path}: is a directory, not a file", "{path}: is a FIFO, not a regular file", ...
// Never opens the file.
void require_regular_file(const std::filesystem::path& path);

// Whether anything exists at `path`: false only when nothing does (ENOENT, ENOTDIR); any
// other failure to stat it (e.g. permission denied on a directory) throws. For optional
// files, so that one which exists but cannot be read is an error rather than "absent".
bool path_exists(const std::filesystem::path& path);

// The whole content of the regular file `path`, which must hold at most max_bytes.
std::string read_file(const std::filesystem::path& path, uint64_t max_bytes);

// The first max_bytes of the regular file `path` (all of it when it is shorter), with the same
// checks as read_file: for a file of which only the start is used (calibration text).
std::string read_file_head(const std::filesystem::path& path, uint64_t max_bytes);

// The whole content of an open descriptor (e.g. stdin, which may be a pipe), read to its
// end; more than max_bytes is an error naming `name` and the limit.
std::string read_all(int fd, std::string_view name, uint64_t max_bytes);

// Reads a regular file, or stdin when the path is "-", line by line; a line longer than
// max_line_bytes is an error naming the file, the line number and the limit.
class LineReader {
 public:
  LineReader(const std::string& path, size_t max_line_bytes = kMaxLineBytes);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its '\n' (a last line without one counts); false at the end.
  bool next(std::string& line);
  size_t line_number() const { return line_number_; }  // of the line last returned

 private:
  bool fill();  // reads more into buffer_; false at end of input

  std::string path_;
  int fd_ = -1;
  bool owns_fd_ = false;
  size_t max_line_bytes_;
  std::string buffer_;
  size_t pos_ = 0;  // start of unread data in buffer_
  bool eof_ = false;
  size_t line_number_ = 0;
};

// What the file type bits of a stat()/lstat() st_mode name, for messages: "a FIFO",
// "a symbolic link", "a character device", ...
const char* file_kind_name(unsigned mode);

// Temporary names beside an output: ".NAME.tmp.PID." (then mkstemp's or mkdtemp's six
// characters) for the output `dir/NAME` written by process PID. Used by ScratchDir::beside and
// the atomic file writer, so that a run killed outright (SIGKILL, power loss) leaves names a
// later run recognises.
std::string temp_name_prefix(const std::filesystem::path& target);
// Removes what a run killed outright left beside `target`: entries of its parent named
// ".NAME.tmp.PID.XXXXXX" whose process PID no longer exists (a live process's, this one's
// included, are left alone, as are names of any other form). Errors are ignored: this is
// tidying, not the command's work.
void remove_stale_temps(const std::filesystem::path& target);

class RemoveOnSignal;

// A new directory, made with mkdtemp as `parent/prefix.XXXXXX` (mode 0700), removed with its
// contents when the object goes, unless commit() moved it into place, and when SIGINT, SIGTERM
// or SIGHUP ends the process (base/output_files.h). For outputs built
// aside and renamed over their target at the end (quantize's model directory) and for
// scratch space (the directory a GGUF file is built from, bench quant's levels).
class ScratchDir {
 public:
  // Throws Error naming `parent` when the directory cannot be made.
  ScratchDir(const std::filesystem::path& parent, std::string_view prefix);
  // A hidden directory beside `target` (temp_name_prefix(target) + "XXXXXX" in its parent),
  // where an output is built before it is renamed over, or written to, `target`; stale ones of
  // earlier runs are removed first (remove_stale_temps). Errors name `target`.
  static ScratchDir beside(const std::filesystem::path& target);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Gives the directory the mode a new directory gets under the umask (mkdtemp's is 0700)
  // and renames it to `target` (an absent or empty directory on the same file system).
  void commit(const std::filesystem::path& target);

 private:
  std::filesystem::path path_;
  std::unique_ptr<RemoveOnSignal> on_signal_;  // SIGINT/SIGTERM/SIGHUP do not unwind
  bool committed_ = false;
};

}  // namespace nanoinfer
