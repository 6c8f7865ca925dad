// The chat page's opt-in to the CLI chat's behaviour when a conversation outgrows the context:
// its oldest turns are dropped (system messages kept) instead of the request being refused.
// An API client that does not ask gets OpenAI's 400 as before.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "nanoinfer/chat_template.h"

namespace nanoinfer::serve {

// The request header that asks for it, its one accepted value, and the response header that
// says how many turns went (sent whenever the request asked, 0 included).
inline constexpr const char* kFitContextHeader = "X-Nanoinfer-Fit-Context";
inline constexpr const char* kFitContextValue = "drop-oldest-turns";
inline constexpr const char* kDroppedTurnsHeader = "X-Nanoinfer-Dropped-Turns";

// The token count of a conversation as it would be prompted (SIZE_MAX: surely too long).
using CountTokens = std::function<size_t(std::span<const ChatMessage>)>;

// Drops the fewest oldest turns from `messages` so that its tokens plus `reserve` fit in
// `context`; failing that, the fewest so that its tokens plus `min_reserve` do; failing that,
// none. A turn is a user message with the messages that follow it up to the next user message
// (leading messages that are neither system nor user go with the first turn); leading system
// messages and the last turn always stay. Returns the number of turns dropped.
size_t drop_oldest_turns(std::vector<ChatMessage>& messages, size_t context, size_t reserve, size_t min_reserve,
                         const CountTokens& count);

}  // namespace nanoinfer::serve
