#include "nanoinfer/chat_template.h"

#include <algorithm>

#include "nanoinfer/error.h"

namespace nanoinfer {

namespace {

constexpr std::string_view kToolsHead =
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

}  // namespace

// Mirrors the branches of Qwen2.5's Jinja template one to one; see the header for the
// rendered shape, tests/tokenizer_chat_template_test.cpp and tests/serve_tools_test.cpp for
// the checks against the template itself.
std::vector<ChatPiece> render_chat_pieces(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                          std::span<const std::string> tools) {
  if (messages.empty()) fail("chat template: the conversation has no messages");
  std::vector<ChatPiece> out;
  auto markup = [&](std::string_view text) { out.push_back({text, false}); };
  auto content = [&](std::string_view text) { out.push_back({text, true}); };
  auto turn = [&](std::string_view role, std::string_view text) {
    markup("<|im_start|>");
    markup(role);
    markup("\n");
    content(text);
    markup("<|im_end|>\n");
  };
  const std::string_view system = messages[0].role == "system" ? std::string_view(messages[0].content)
                                                               : kQwenDefaultSystemPrompt;
  if (!tools.empty()) {
    markup("<|im_start|>system\n");
    content(system);
    markup(kToolsHead);
    for (const std::string& tool : tools) {
      markup("\n");
      content(tool);
    }
    markup(kToolsTail);
  } else {
    turn("system", system);
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "assistant" && m.tool_calls.empty()) || (m.role == "system" && i > 0)) {
      turn(m.role, m.content);
    } else if (m.role == "assistant") {
      markup("<|im_start|>assistant");
      if (!m.content.empty()) {
        markup("\n");
        content(m.content);
      }
      for (const ChatToolCall& call : m.tool_calls) {
        markup("\n<tool_call>\n{\"name\": \"");
        content(call.name);
        markup("\", \"arguments\": ");
        content(call.arguments);
        markup("}\n</tool_call>");
      }
      markup("<|im_end|>\n");
    } else if (m.role == "system") {
      // The leading system message was rendered above.
    } else if (m.role == "tool") {
      // Consecutive tool results share one user turn.
      if (i == 0 || messages[i - 1].role != "tool") markup("<|im_start|>user");
      markup("\n<tool_response>\n");
      content(m.content);
      markup("\n</tool_response>");
      if (i + 1 == messages.size() || messages[i + 1].role != "tool") markup("<|im_end|>\n");
    } else {
      fail("chat template: message {} has role '{}' (expected system, user, assistant or tool)", i, m.role);
    }
  }
  if (add_generation_prompt) markup("<|im_start|>assistant\n");
  return out;
}

std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::span<const std::string> tools) {
  std::string out;
  for (const ChatPiece& piece : render_chat_pieces(messages, add_generation_prompt, tools)) out += piece.text;
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
                                 bool add_generation_prompt, SpecialTokens content,
                                 std::span<const std::string> tools) {
  const std::vector<ChatPiece> pieces = render_chat_pieces(messages, add_generation_prompt, tools);
  const std::vector<TextPiece> text = chat_text_pieces(pieces, 0, content);
  std::vector<int32_t> ids;
  tok.encode_pieces_append(text, ids);
  return ids;
}

}  // namespace nanoinfer
