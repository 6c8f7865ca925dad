#include "serve/fit_context.h"

#include <algorithm>

namespace nanoinfer::serve {

namespace {

// Where each turn starts, after the leading system messages: the first message past them, then
// every later user message.
std::vector<size_t> turn_starts(std::span<const ChatMessage> messages) {
  size_t first = 0;
  while (first < messages.size() && messages[first].role == "system") ++first;
  std::vector<size_t> starts;
  if (first == messages.size()) return starts;
  starts.push_back(first);
  for (size_t i = first + 1; i < messages.size(); ++i) {
    if (messages[i].role == "user") starts.push_back(i);
  }
  return starts;
}

std::vector<ChatMessage> without_turns(std::span<const ChatMessage> messages, size_t first, size_t cut) {
  std::vector<ChatMessage> kept(messages.begin(), messages.begin() + static_cast<ptrdiff_t>(first));
  kept.insert(kept.end(), messages.begin() + static_cast<ptrdiff_t>(cut), messages.end());
  return kept;
}

bool fits(size_t tokens, size_t reserve, size_t context) {
  return tokens != SIZE_MAX && tokens <= context && reserve <= context - tokens;
}

}  // namespace

size_t drop_oldest_turns(std::vector<ChatMessage>& messages, size_t context, size_t reserve, size_t min_reserve,
                         const CountTokens& count) {
  const std::vector<size_t> starts = turn_starts(messages);
  if (starts.size() < 2) return 0;
  const size_t whole = count(messages);
  if (fits(whole, reserve, context)) return 0;
  // counts[k]: the tokens with the k oldest turns dropped, computed once each.
  std::vector<size_t> counts{whole};
  for (const size_t want : {reserve, min_reserve}) {
    for (size_t drops = 1; drops < starts.size(); ++drops) {
      if (counts.size() <= drops) counts.push_back(count(without_turns(messages, starts[0], starts[drops])));
      if (fits(counts[drops], want, context)) {
        messages = without_turns(messages, starts[0], starts[drops]);
        return drops;
      }
    }
  }
  return 0;
}

}  // namespace nanoinfer::serve
