#include "nanoinfer/chat_template.h"

#include "nanoinfer/error.h"

namespace nanoinfer {

// Mirrors the branches of Qwen2.5's Jinja template (no-tools path) one to one; see the
// header for the rendered shape and tests/tokenizer_chat_template_test.cpp for the check
// against the template itself.
std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt) {
  if (messages.empty()) fail("chat template: the conversation has no messages");
  std::string out;
  auto turn = [&](std::string_view role, std::string_view content) {
    out += "<|im_start|>";
    out += role;
    out += '\n';
    out += content;
    out += "<|im_end|>\n";
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
      if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
      out += "\n<tool_response>\n";
      out += m.content;
      out += "\n</tool_response>";
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
    } else {
      fail("chat template: message {} has role '{}' (expected system, user, assistant or tool)", i, m.role);
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace nanoinfer
