#include "serve/logprob_stream.h"

#include <algorithm>
#include <cstdint>

namespace nanoinfer::serve {

void LogprobAligner::add_token(TokenLogprob entry) {
  entry_bytes_ += entry.token.size();
  entries_.push_back(std::move(entry));
}

void LogprobAligner::add_text(std::string_view text) {
  text_.append(text);
}

void LogprobAligner::take(size_t count, size_t bytes, std::string& text, std::vector<TokenLogprob>& entries) {
  text.append(text_, 0, bytes);
  text_.erase(0, bytes);
  for (size_t i = 0; i < count; ++i) {
    entry_bytes_ -= entries_.front().token.size();
    entries.push_back(std::move(entries_.front()));
    entries_.pop_front();
  }
}

void LogprobAligner::release(size_t held, std::string& text, std::vector<TokenLogprob>& entries) {
  // The tokens' bytes whose text is out, and how far the text differs from them (0 for a
  // byte-level tokenizer; the bytes a space cleanup removed, or a U+FFFD added): a token that
  // ends at byte c of the tokens ends at c - drift of the text.
  const size_t out = entry_bytes_ > held ? entry_bytes_ - held : 0;
  const int64_t drift = static_cast<int64_t>(out) - static_cast<int64_t>(text_.size());
  size_t count = 0, bytes = 0, end = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    end += entries_[i].token.size();
    if (end > out) break;
    const int64_t at = std::clamp<int64_t>(static_cast<int64_t>(end) - drift, 0, static_cast<int64_t>(text_.size()));
    const size_t p = static_cast<size_t>(at);
    if (p == text_.size() || (static_cast<unsigned char>(text_[p]) & 0xC0) != 0x80) {
      count = i + 1;
      bytes = std::max(bytes, p);
    }
  }
  if (count > 0) take(count, bytes, text, entries);
}

void LogprobAligner::finish(bool cut, std::string& text, std::vector<TokenLogprob>& entries) {
  size_t count = entries_.size();
  if (cut) {
    // Entries whose token starts before the end of the text streamed.
    size_t start = 0;
    for (count = 0; count < entries_.size() && start < text_.size(); ++count) start += entries_[count].token.size();
  }
  take(count, text_.size(), text, entries);
  entries_.clear();
  entry_bytes_ = 0;
}

}  // namespace nanoinfer::serve
