#include "nanoinfer/reasoning.h"

namespace nanoinfer {

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// How many trailing bytes of `text` may begin `tag` (a proper prefix of it).
size_t partial_tag(std::string_view text, std::string_view tag) {
  for (size_t k = std::min(text.size(), tag.size() - 1); k > 0; --k) {
    if (text.ends_with(tag.substr(0, k))) return k;
  }
  return 0;
}

void drop_leading_newlines(std::string& text, bool& strip) {
  if (!strip) return;
  const size_t n = text.find_first_not_of('\n');
  text.erase(0, n == std::string::npos ? text.size() : n);
  if (!text.empty()) strip = false;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool inside) : state_(inside ? State::Reasoning : State::Start) {}

void ReasoningSplitter::feed(std::string_view text, std::string& reasoning, std::string& content) {
  held_.append(text);
  while (true) {
    if (state_ == State::Start) {
      const size_t start = held_.find_first_not_of(" \t\r\n");
      if (start == std::string::npos) return;  // only whitespace so far
      const std::string_view rest = std::string_view(held_).substr(start);
      if (rest.starts_with(kOpen)) {
        held_.erase(0, start + kOpen.size());
        state_ = State::Reasoning;
        continue;
      }
      if (kOpen.starts_with(rest)) return;  // "<thi": not known yet
      state_ = State::Content;
      strip_newlines_ = false;
      continue;
    }
    drop_leading_newlines(held_, strip_newlines_);
    if (state_ == State::Content) {
      content += held_;
      held_.clear();
      return;
    }
    if (const size_t end = held_.find(kClose); end != std::string::npos) {
      const size_t last = held_.find_last_not_of('\n', end == 0 ? 0 : end - 1);
      if (end > 0 && last != std::string::npos) reasoning.append(held_, 0, last + 1);
      held_.erase(0, end + kClose.size());
      state_ = State::Content;
      strip_newlines_ = true;
      continue;
    }
    // Held: a possible start of "</think>" and the newlines before it (they pad the block).
    size_t keep = held_.size() - partial_tag(held_, kClose);
    while (keep > 0 && held_[keep - 1] == '\n') --keep;
    reasoning.append(held_, 0, keep);
    held_.erase(0, keep);
    return;
  }
}

void ReasoningSplitter::finish(std::string& reasoning, std::string& content) {
  (state_ == State::Reasoning ? reasoning : content) += held_;
  held_.clear();
}

}  // namespace nanoinfer
