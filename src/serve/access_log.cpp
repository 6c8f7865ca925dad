#include "serve/access_log.h"

#include <fmt/format.h>
#include <utf8proc.h>

#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer::serve {

namespace {

// Code points a terminal or a log viewer does not show as themselves: controls (C0 and C1),
// format characters (bidi embeddings, overrides and isolates, zero-width characters, the
// BOM, tag characters), separators (line, paragraph, and spaces other than U+0020), private
// use and unassigned code points (a later Unicode version may make them format characters).
bool hidden(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string log_field(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      if (b <= 0x20 || b == 0x7F || b == '\\') {
        out += fmt::format("\\x{:02x}", b);
      } else {
        out += static_cast<char>(b);
      }
      ++pos;
      continue;
    }
    const utf8::Decoded d = utf8::decode(text, pos);
    if (d.status != utf8::Status::kValid) {
      // Each byte of an ill-formed (or cut) sequence on its own.
      for (uint32_t k = 0; k < d.length; ++k)
        out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[pos + k]));
    } else if (hidden(d.cp)) {
      out += d.cp <= 0xFFFF ? fmt::format("\\u{:04x}", static_cast<uint32_t>(d.cp))
                            : fmt::format("\\U{:08x}", static_cast<uint32_t>(d.cp));
    } else {
      out.append(text.substr(pos, d.length));
    }
    pos += d.length;
  }
  return out;
}

std::string access_line(const AccessEntry& e) {
  std::string line =
      fmt::format("nanoinfer: {} {} {} {}", e.client.empty() ? "-" : log_field(e.client),
                  e.method.empty() ? "-" : log_field(e.method), e.path.empty() ? "-" : log_field(e.path), e.status);
  if (e.tokens) line += fmt::format(" tokens {}+{}", e.tokens->prompt_tokens, e.tokens->completion_tokens);
  if (e.cached > 0) line += fmt::format(" cached {}", e.cached);
  if (e.seconds) line += fmt::format(" {:.2f} s", *e.seconds);
  if (!e.model.empty()) line += " model " + log_field(e.model);
  if (e.load_wait_ms) line += fmt::format(" load_wait_ms {:.0f}", *e.load_wait_ms);
  line += '\n';
  return line;
}

}  // namespace nanoinfer::serve
