#include "nanoinfer/chat_template.h"

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

// Mirrors the branches of Qwen2.5's Jinja template (no-tools path) one to one; see the
// header for the rendered shape and tests/tokenizer_chat_template_test.cpp for the check
// against the template itself.
std::vector<ChatPiece> render_chat_pieces(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  if (messages.empty()) fail("chat template: the conversation has no messages");
  std::vector<ChatPiece> out;
  auto markup = [&](std::string_view text) { out.push_back({text, false}); };
  auto turn = [&](std::string_view role, std::string_view content) {
    markup("<|im_start|>");
    markup(role);
    markup("\n");
    out.push_back({content, true});
    markup("<|im_end|>\n");
  };
  if (messages[0].role == "system") {
    turn("system", messages[0].content);
  } else {
    turn("system", kQwenDefaultSystemPrompt);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || m.role == "assistant" || (m.role == "system" && i > 0)) {
      turn(m.role, m.content);
    } else if (m.role == "system") {
      // The leading system message was rendered above.
    } else if (m.role == "tool") {
      // Consecutive tool results share one user turn.
      if (i == 0 || messages[i - 1].role != "tool") markup("<|im_start|>user");
      markup("\n<tool_response>\n");
      out.push_back({m.content, true});
      markup("\n</tool_response>");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") markup("<|im_end|>\n");
    } else {
      fail("chat template: message {} has role '{}' (expected system, user, assistant or tool)", i, m.role);
    }
  }
  if (add_generation_prompt) markup("<|im_start|>assistant\n");
  return out;
}

std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatPiece& piece : render_chat_pieces(messages, add_generation_prompt)) out += piece.text;
  return out;
}

std::vector<TextPiece> chat_text_pieces(std::span<const ChatPiece> pieces, size_t skip_bytes, SpecialTokens content) {
  std::vector<TextPiece> out;
  for (const ChatPiece& piece : pieces) {
    std::string_view text = piece.text;
    const size_t skip = std::min(skip_bytes, text.size());
    text.remove_prefix(skip);
    skip_bytes -= skip;
    if (!text.empty()) out.push_back({text, piece.is_content ? content : SpecialTokens::Parse});
  }
  return out;
}

std::vector<int32_t> encode_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt, SpecialTokens content) {
  const std::vector<ChatPiece> pieces = render_chat_pieces(messages, add_generation_prompt);
  const std::vector<TextPiece> text = chat_text_pieces(pieces, 0, content);
  std::vector<int32_t> ids;
  tok.encode_pieces_append(text, ids);
  return ids;
}

}  // namespace nanoinfer
