// The access log of `nanoinfer serve` (src/serve/access_log.h): whatever a client puts in its
// method or path, the line stays one line of visible characters whose fields are the server's.
#include <gtest/gtest.h>

#include <string>

#include "serve/access_log.h"

namespace nanoinfer::serve {
namespace {

TEST(ServeAccessLog, ClientBytesCannotForgeOrHideAnything) {
  // A forged second line, a terminal's colour and title sequences, a backspace, a bidi override.
  EXPECT_EQ(log_field("/v1/x\n nanoinfer: 10.0.0.1 GET /admin 200"),
            R"(/v1/x\x0a\x20nanoinfer:\x2010.0.0.1\x20GET\x20/admin\x20200)");
  EXPECT_EQ(log_field("/a\x1b[31mred\x1b]0;title\x07"), R"(/a\x1b[31mred\x1b]0;title\x07)");
  EXPECT_EQ(log_field("/ab\bc\r\t\x7f"), R"(/ab\x08c\x0d\x09\x7f)");
  EXPECT_EQ(log_field("/\u202Egpj.exe"), R"(/\u202egpj.exe)");
  // Other format characters and separators: isolates, zero-width space and joiner, BOM, line
  // separator, no-break space, C1 controls (NEL, CSI), a tag character.
  EXPECT_EQ(log_field("\u2066\u200B\u200D\uFEFF\u2028\u00A0\u0085\u009B\U000E0041"),
            R"(\u2066\u200b\u200d\ufeff\u2028\u00a0\u0085\u009b\U000e0041)");
  // A backslash is escaped too, so a client cannot write an escape that reads as ours.
  EXPECT_EQ(log_field(R"(/\x0a)"), R"(/\x5cx0a)");
  // Invalid UTF-8, byte by byte; a truncated sequence at the end too.
  EXPECT_EQ(log_field("/\xff\xc3(\xe2\x82"), R"(/\xff\xc3(\xe2\x82)");
  // Visible text, ASCII or not, is kept as is.
  EXPECT_EQ(log_field("/v1/chat/completions?x=caf\xc3\xa9-\xe6\x97\xa5\xf0\x9f\x98\x80"),
            "/v1/chat/completions?x=caf\xc3\xa9-\xe6\x97\xa5\xf0\x9f\x98\x80");
}

TEST(ServeAccessLog, OneLineWithTheServersFields) {
  const std::string line = access_line({.client = "127.0.0.1",
                                        .method = "POST",
                                        .path = "/v1/completions",
                                        .status = 200,
                                        .tokens = Usage{31, 16},
                                        .cached = 12,
                                        .seconds = 0.4231});
  EXPECT_EQ(line, "nanoinfer: 127.0.0.1 POST /v1/completions 200 tokens 31+16 cached 12 0.42 s\n");
  EXPECT_EQ(access_line({.client = "", .method = "GE\x1bT", .path = "", .status = 400}),
            "nanoinfer: - GE\\x1bT - 400\n");
  const std::string hostile =
      access_line({.client = "::1", .method = "GET", .path = "/x\n\x1b[2J\u202E y", .status = 401, .seconds = 0.0});
  EXPECT_EQ(hostile, "nanoinfer: ::1 GET /x\\x0a\\x1b[2J\\u202e\\x20y 401 0.00 s\n");
  // One line, six space-separated fields, nothing below U+0020.
  EXPECT_EQ(hostile.find('\n'), hostile.size() - 1);
  for (const char c : hostile.substr(0, hostile.size() - 1)) EXPECT_GE(static_cast<unsigned char>(c), 0x20);
}

}  // namespace
}  // namespace nanoinfer::serve
