// Qwen2.5's chat template (ChatML), rendered in C++. It reproduces the model's Jinja
// chat_template (tokenizer_config.json) for conversations without tools:
//
//   <|im_start|>system\n{system or the default prompt}<|im_end|>\n
//   <|im_start|>{role}\n{content}<|im_end|>\n            for each user/assistant/system turn
//   <|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n
//                                                       for a run of "tool" messages (grouped)
//   <|im_start|>assistant\n                              if add_generation_prompt
//
// The default system prompt is used when the first message is not a system message.
// The tools branch of the template (function signatures, tool_calls) is not reproduced:
// ChatMessage carries no tools.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace nanoinfer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
};

inline constexpr std::string_view kQwenDefaultSystemPrompt =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// Throws nanoinfer::Error for an empty conversation (the Jinja template fails on it too) or an
// unknown role (which the Jinja template would silently drop).
std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace nanoinfer
