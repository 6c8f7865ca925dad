#include "grammar/string_content.h"

#include <algorithm>

namespace nanoinfer::string_content {
namespace {

// Inside a character: how many continuation bytes remain, and which range the next one takes.
enum : uint8_t { Need1 = 1, Need2, Need3, AfterE0, AfterED, AfterF0, AfterF4 };

}  // namespace

Step step(uint8_t state, uint8_t b) {
  const auto in = [b](int lo, int hi) { return b >= lo && b <= hi; };
  switch (state) {
    case kBoundary:
      if (in(0x20, 0x7F)) return {b == '"' || b == '\\' ? int8_t{-1} : int8_t{kBoundary}, true};
      if (in(0xC2, 0xDF)) return {Need1, true};
      if (b == 0xE0) return {AfterE0, true};
      if (b == 0xED) return {AfterED, true};
      if (in(0xE1, 0xEF)) return {Need2, true};
      if (b == 0xF0) return {AfterF0, true};
      if (in(0xF1, 0xF3)) return {Need3, true};
      if (b == 0xF4) return {AfterF4, true};
      return {-1, true};
    case Need1:
      return {in(0x80, 0xBF) ? int8_t{kBoundary} : int8_t{-1}, false};
    case Need2:
      return {in(0x80, 0xBF) ? int8_t{Need1} : int8_t{-1}, false};
    case Need3:
      return {in(0x80, 0xBF) ? int8_t{Need2} : int8_t{-1}, false};
    case AfterE0:
      return {in(0xA0, 0xBF) ? int8_t{Need1} : int8_t{-1}, false};
    case AfterED:
      return {in(0x80, 0x9F) ? int8_t{Need1} : int8_t{-1}, false};
    case AfterF0:
      return {in(0x90, 0xBF) ? int8_t{Need2} : int8_t{-1}, false};
    case AfterF4:
      return {in(0x80, 0x8F) ? int8_t{Need2} : int8_t{-1}, false};
    default:
      return {-1, false};
  }
}

uint8_t count_of(std::string_view bytes) {
  uint8_t state = kBoundary;
  int count = 0;
  for (char c : bytes) {
    const Step s = step(state, static_cast<uint8_t>(c));
    if (s.to < 0) return kNotContent;
    count += s.starts_character ? 1 : 0;
    state = static_cast<uint8_t>(s.to);
  }
  return static_cast<uint8_t>(std::min(count, 254));
}

void tail_counts(std::string_view bytes, uint8_t* tails) {
  // From a boundary a character is read to its end (or to the end of the bytes); the tail
  // after it is content from a boundary exactly when its own tail count says so.
  for (size_t k = bytes.size(); k-- > 0;) {
    uint8_t state = kBoundary;
    size_t j = k;
    bool ok = true;
    do {
      const Step s = step(state, static_cast<uint8_t>(bytes[j]));
      if (s.to < 0 || (j > k && s.starts_character)) {
        ok = false;
        break;
      }
      state = static_cast<uint8_t>(s.to);
      ++j;
    } while (state != kBoundary && j < bytes.size());
    if (!ok) {
      tails[k] = kNotContent;
    } else if (j == bytes.size()) {
      tails[k] = 1;
    } else {
      tails[k] = tails[j] == kNotContent ? kNotContent : static_cast<uint8_t>(std::min(tails[j] + 1, 254));
    }
  }
}

}  // namespace nanoinfer::string_content
