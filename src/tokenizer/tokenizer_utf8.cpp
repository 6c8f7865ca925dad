#include "tokenizer/tokenizer_utf8.h"

namespace nanoinfer::utf8 {

size_t valid_prefix(std::string_view s) {
  size_t pos = 0;
  while (pos < s.size()) {
    // ASCII runs dominate real text; skip them eight bytes at a time.
    while (pos + 8 <= s.size()) {
      uint64_t word;
      __builtin_memcpy(&word, s.data() + pos, 8);
      if (word & 0x8080808080808080ull) break;
      pos += 8;
    }
    if (pos >= s.size()) break;
    const Decoded d = decode(s, pos);
    if (d.status != Status::kValid) return pos;
    pos += d.length;
  }
  return s.size();
}

void append_lossy(std::string_view s, std::string& out) {
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t valid = pos + valid_prefix(s.substr(pos));
    out.append(s.data() + pos, valid - pos);
    if (valid == s.size()) break;
    out += "\xEF\xBF\xBD";  // U+FFFD
    pos = valid + decode(s, valid).length;
  }
}

size_t incomplete_tail(std::string_view s) {
  // The last sequence starts at the nearest lead byte among the final three bytes.
  for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
    const auto b = static_cast<uint8_t>(s[s.size() - k]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const Decoded d = decode(s, s.size() - k);
    return d.status == Status::kTruncated && d.length == k ? k : 0;
  }
  return 0;
}

}  // namespace nanoinfer::utf8
