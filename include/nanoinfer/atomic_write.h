// Writing a whole file the safe way, for the commands that write one (viz --out, --trace):
// the bytes go to a new temporary file beside the target (mkstemp: created exclusively, so a
// symbolic link planted at its name is never followed), removed if SIGINT, SIGTERM or SIGHUP
// arrives, fsync'ed, then renamed over the target. A target that exists and is not a regular
// file — a symbolic link, a FIFO, a device such as /dev/null or /dev/full, a directory — is
// refused before anything is written, rather than replaced by the rename.
#pragma once

#include <filesystem>
#include <string_view>

namespace nanoinfer {

// Throws nanoinfer::Error naming the path and the problem; the target is then untouched.
void write_file_atomically(const std::filesystem::path& path, std::string_view data);

// The target check alone, for a command to refuse a bad output before its long work: throws
// unless nothing or a regular file is at `path`.
void require_replaceable_file(const std::filesystem::path& path);

}  // namespace nanoinfer
