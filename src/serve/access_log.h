// The access log of `nanoinfer serve`: one line per request on stderr,
//
//   nanoinfer: 127.0.0.1 POST /v1/chat/completions 200 tokens 31+16 cached 12 0.42 s model qwen load_wait_ms 830
//
// (with several models: the model a request ran on, and load_wait_ms when it waited for its
// model to load, or for room to load it).
//
// Every field a client chose (method, path) is written through log_field, so no request can
// forge a line, move the cursor, retitle a terminal or reorder what a reader sees: control
// bytes, spaces, backslashes and invalid UTF-8 become \xNN, and Unicode controls, format
// characters (bidi overrides such as U+202E, zero-width characters) and separators other than
// the ASCII space become \uXXXX (\UXXXXXXXX past the BMP).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "serve/api.h"

namespace nanoinfer::serve {

// `text` as one log field: printable, on one line, without spaces; \ starts every escape.
std::string log_field(std::string_view text);

struct AccessEntry {
  std::string_view client;  // the peer's address; "" = unknown
  std::string_view method;
  std::string_view path;
  int status = 0;
  std::optional<Usage> tokens;  // for requests that reached the scheduler
  size_t cached = 0;            // prompt tokens reused from a cache (written when > 0)
  std::optional<double> seconds;
  std::string_view model;  // "" = none
  std::optional<double> load_wait_ms;
};

// The whole line, ending in '\n'.
std::string access_line(const AccessEntry& e);

}  // namespace nanoinfer::serve
