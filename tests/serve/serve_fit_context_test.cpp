// The chat page's opt-in to dropping the oldest turns (src/serve/fit_context.h), with a token
// count of 10 per message: which turns go, what always stays, the reserve and its fallback.
#include <gtest/gtest.h>

#include "serve/fit_context.h"

namespace nanoinfer::serve {
namespace {

std::vector<ChatMessage> fit_chat(std::initializer_list<const char*> roles) {
  std::vector<ChatMessage> messages;
  int i = 0;
  for (const char* role : roles) messages.push_back({role, std::to_string(i++), {}});
  return messages;
}

size_t ten_per_message(std::span<const ChatMessage> messages) {
  return 10 * messages.size();
}

std::vector<std::string> fit_contents(const std::vector<ChatMessage>& messages) {
  std::vector<std::string> out;
  for (const ChatMessage& m : messages) out.push_back(m.content);
  return out;
}

TEST(ServeFitContext, DropsTheFewestOldestTurnsKeepingTheSystemPrompt) {
  auto messages = fit_chat({"system", "user", "assistant", "user", "assistant", "user"});
  // 60 tokens + 20 reserved > 70: one turn (a user message and its reply) goes.
  EXPECT_EQ(drop_oldest_turns(messages, 70, 20, 1, ten_per_message), 1u);
  EXPECT_EQ(fit_contents(messages), (std::vector<std::string>{"0", "3", "4", "5"}));
  messages = fit_chat({"system", "user", "assistant", "user", "assistant", "user"});
  EXPECT_EQ(drop_oldest_turns(messages, 50, 20, 1, ten_per_message), 2u);
  EXPECT_EQ(fit_contents(messages), (std::vector<std::string>{"0", "5"}));
}

TEST(ServeFitContext, AFittingConversationIsLeftAlone) {
  auto messages = fit_chat({"user", "assistant", "user"});
  int calls = 0;
  EXPECT_EQ(drop_oldest_turns(messages, 50, 20, 1,
                              [&](std::span<const ChatMessage> m) {
                                ++calls;
                                return ten_per_message(m);
                              }),
            0u);
  EXPECT_EQ(messages.size(), 3u);
  EXPECT_EQ(calls, 1);
}

TEST(ServeFitContext, ToolMessagesGoWithTheirTurnAndTheLastTurnStays) {
  auto messages = fit_chat({"system", "user", "assistant", "tool", "assistant", "user", "assistant", "tool"});
  EXPECT_EQ(drop_oldest_turns(messages, 45, 0, 0, ten_per_message), 1u);
  EXPECT_EQ(fit_contents(messages), (std::vector<std::string>{"0", "5", "6", "7"}));
  // The last turn alone does not fit: nothing is dropped (the request is refused as before).
  messages = fit_chat({"user", "assistant", "user", "assistant", "tool"});
  EXPECT_EQ(drop_oldest_turns(messages, 25, 0, 0, ten_per_message), 0u);
  EXPECT_EQ(messages.size(), 5u);
}

TEST(ServeFitContext, WithoutRoomForTheReserveTheMinimumDecides) {
  // No drop leaves 30 tokens for the reply in 50; dropping both older turns leaves room for 1.
  auto messages = fit_chat({"user", "assistant", "user", "assistant", "user", "assistant", "user"});
  EXPECT_EQ(drop_oldest_turns(messages, 50, 45, 1, ten_per_message), 2u);
  EXPECT_EQ(fit_contents(messages), (std::vector<std::string>{"4", "5", "6"}));
  // A count of SIZE_MAX ("surely too long") never fits.
  messages = fit_chat({"user", "assistant", "user"});
  EXPECT_EQ(drop_oldest_turns(messages, 50, 0, 0,
                              [](std::span<const ChatMessage> m) { return m.size() > 1 ? SIZE_MAX : size_t{10}; }),
            1u);
  EXPECT_EQ(fit_contents(messages), (std::vector<std::string>{"2"}));
}

}  // namespace
}  // namespace nanoinfer::serve
