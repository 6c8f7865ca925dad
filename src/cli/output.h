// Checked output. A command whose stdout cannot be written (a full disk, /dev/full, a closed
// file) must fail with one line and a non-zero exit, not drop its output and exit 0. stdio
// reports a failed write only through a short fwrite/fflush and the sticky error flag, which
// nothing checked; these helpers check both and throw nanoinfer::Error naming the stream.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <string_view>

#include "nanoinfer/error.h"

namespace nanoinfer::cli {

// Writes all of `text` to `stream`, or throws Error "cannot write to standard output:
// <reason>" (stderr is never checked: there is nowhere left to report). A loop that reports
// errors and goes on (chat turns) ends when std::ferror(stdout) is set.
void write_out(std::string_view text, std::FILE* stream = stdout);

// fmt::print to stdout through write_out.
template <class... Args>
void print_out(fmt::format_string<Args...> format, Args&&... args) {
  write_out(fmt::format(format, std::forward<Args>(args)...));
}

// Flushes `stream` and throws Error if that or any earlier write to it failed.
// Streaming output (tokens as generated) calls it after each piece; main() calls it once
// at the end for stdout, which catches unchecked writes anywhere in a command.
void flush_out(std::FILE* stream = stdout);

// A streamed piece of generated text: written to stdout and flushed at once, so a failed write
// ends the run at that piece (generate and chat hand it to the generation step).
void write_stdout(std::string_view text);

}  // namespace nanoinfer::cli
