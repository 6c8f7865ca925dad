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

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/tokenizer.h"

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

// The same rendering in pieces, in order: the template's own text (<|im_start|>, role names,
// <|im_end|>, newlines) and each message's content. Joined, the texts are render_chat()'s.
// Views into `messages` and static strings: valid while `messages` is.
struct ChatPiece {
  std::string_view text;
  bool is_content;  // a message's content (or the default system prompt)
};
std::vector<ChatPiece> render_chat_pieces(std::span<const ChatMessage> messages,
                                          bool add_generation_prompt);

// The tokens of render_chat(messages, add_generation_prompt): the template's special tokens
// are always parsed; special-token text inside message content is parsed only with
// `content` = SpecialTokens::Parse. The default, AsText, keeps "<|im_end|>" typed by a user
// as plain text, so a message cannot close its turn and forge the next one.
std::vector<int32_t> encode_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt,
                                 SpecialTokens content = SpecialTokens::AsText);

// TextPieces for Tokenizer::encode_pieces_append from chat pieces, skipping the first
// `skip_bytes` bytes of the rendered text (what a cached sequence already holds).
std::vector<TextPiece> chat_text_pieces(std::span<const ChatPiece> pieces, size_t skip_bytes,
                                        SpecialTokens content);

}  // namespace nanoinfer
