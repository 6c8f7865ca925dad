#include "output.h"

#include <cerrno>
#include <cstring>

namespace nanoinfer::cli {

namespace {

[[noreturn]] void output_failed(std::FILE* stream, int err) {
  const char* name = stream == stdout ? "standard output" : "the output file";
  // errno is only meaningful if the failing call set it; the sticky error flag of an earlier
  // unchecked write comes with errno 0.
  fail("cannot write to {}: {}", name, err != 0 ? std::strerror(err) : "an earlier write failed");
}

}  // namespace

void write_out(std::string_view text, std::FILE* stream) {
  errno = 0;
  if (std::fwrite(text.data(), 1, text.size(), stream) != text.size() || std::ferror(stream))
    output_failed(stream, errno);
}

void flush_out(std::FILE* stream) {
  errno = 0;
  if (std::fflush(stream) != 0 || std::ferror(stream)) output_failed(stream, errno);
}

void write_stdout(std::string_view text) {
  write_out(text);
  flush_out();
}

}  // namespace nanoinfer::cli
