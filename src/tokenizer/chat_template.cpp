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

// A "tool" message i, as both ChatML templates render it: consecutive tool results share one
// user turn.
void tool_result(std::vector<ChatPiece>& out, std::span<const ChatMessage> messages, size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") out.push_back({"<|im_start|>user", false});
  out.push_back({"\n<tool_response>\n", false});
  out.push_back({messages[i].content, true});
  out.push_back({"\n</tool_response>", false});
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out.push_back({"<|im_end|>\n", false});
}

// One <tool_call> block of an assistant turn, after a newline unless `first_in_empty_turn` (Qwen3
// puts none before the first call of a turn without content).
void tool_call(std::vector<ChatPiece>& out, const ChatToolCall& call, bool first_in_empty_turn = false) {
  out.push_back({std::string_view("\n<tool_call>\n{\"name\": \"").substr(first_in_empty_turn ? 1 : 0), false});
  out.push_back({call.name, true});
  out.push_back({"\", \"arguments\": ", false});
  out.push_back({call.arguments, true});
  out.push_back({"}\n</tool_call>", false});
}

// Mirrors the branches of Qwen2.5's Jinja template one to one; see the header for the
// rendered shape, tests/tokenizer/tokenizer_chat_template_test.cpp and tests/serve/serve_tools_test.cpp for
// the checks against the template itself.
std::vector<ChatPiece> render_chatml(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                     std::span<const std::string> tools) {
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
  const std::string_view system =
      messages[0].role == "system" ? std::string_view(messages[0].content) : kQwenDefaultSystemPrompt;
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
      for (const ChatToolCall& call : m.tool_calls) tool_call(out, call);
      markup("<|im_end|>\n");
    } else if (m.role == "system") {
      // The leading system message was rendered above.
    } else if (m.role == "tool") {
      tool_result(out, messages, i);
    } else {
      fail("chat template: message {} has role '{}' (expected system, user, assistant or tool)", i, m.role);
    }
  }
  if (add_generation_prompt) markup("<|im_start|>assistant\n");
  return out;
}

// Python's str.strip(chars) / lstrip / rstrip over a view, for the ASCII `chars` the templates use.
std::string_view lstrip(std::string_view s, std::string_view chars) {
  const size_t at = s.find_first_not_of(chars);
  return at == std::string_view::npos ? std::string_view() : s.substr(at);
}
std::string_view rstrip(std::string_view s, std::string_view chars) {
  const size_t at = s.find_last_not_of(chars);
  return at == std::string_view::npos ? std::string_view() : s.substr(0, at + 1);
}

// The bytes of the code point at s[i] when Python's str.isspace holds for it (what Jinja's
// `trim`, str.strip(), removes), else 0.
size_t space_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return i + k < s.size() ? static_cast<uint8_t>(s[i + k]) : 0; };
  const uint8_t c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;  // U+1680
  if (c == 0xE2 && b(1) == 0x80 && ((b(2) >= 0x80 && b(2) <= 0x8A) || b(2) == 0xA8 || b(2) == 0xA9 || b(2) == 0xAF))
    return 3;                                               // U+2000..200A, U+2028, U+2029, U+202F
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

// Jinja's `trim`: Unicode whitespace removed from both ends.
std::string_view trim(std::string_view s) {
  while (!s.empty()) {
    const size_t n = space_length(s, 0);
    if (n == 0) break;
    s.remove_prefix(n);
  }
  for (bool trimmed = true; trimmed && !s.empty();) {
    trimmed = false;
    for (size_t n = 1; n <= std::min<size_t>(3, s.size()); ++n) {
      if (space_length(s, s.size() - n) == n) {
        s.remove_suffix(n);
        trimmed = true;
        break;
      }
    }
  }
  return s;
}

// Qwen3's template, branch for branch (the header describes its output).
std::vector<ChatPiece> render_qwen3(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                    std::span<const std::string> tools, bool enable_thinking) {
  std::vector<ChatPiece> out;
  auto markup = [&](std::string_view text) { out.push_back({text, false}); };
  auto content = [&](std::string_view text) { out.push_back({text, true}); };
  const bool system_first = messages[0].role == "system";
  if (!tools.empty()) {
    markup("<|im_start|>system\n");
    if (system_first) {
      content(messages[0].content);
      markup("\n\n");
    }
    markup(kToolsHead.substr(2));  // without the blank line that Qwen2.5's puts first
    for (const std::string& tool : tools) {
      markup("\n");
      content(tool);
    }
    markup(kToolsTail);
  } else if (system_first) {
    markup("<|im_start|>system\n");
    content(messages[0].content);
    markup("<|im_end|>\n");
  }
  // The last real user query: a user message that is not a tool result wrapped as one.
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string_view c = messages[i].content;
    if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) {
      last_query = i;
      break;
    }
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user" || (m.role == "system" && i > 0)) {
      markup("<|im_start|>");
      markup(m.role);
      markup("\n");
      content(m.content);
      markup("<|im_end|>\n");
    } else if (m.role == "assistant") {
      std::string_view text = m.content, reasoning;
      if (const size_t end = text.find("</think>"); end != std::string_view::npos) {
        // content.split('</think>')[-1].lstrip('\n'); the reasoning: the text before the first
        // '</think>', after its last '<think>', stripped of newlines on both sides.
        reasoning = text.substr(0, end);
        if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos)
          reasoning.remove_prefix(open + std::string_view("<think>").size());
        reasoning = lstrip(rstrip(reasoning, "\n"), "\n");
        text = lstrip(text.substr(text.rfind("</think>") + std::string_view("</think>").size()), "\n");
      }
      markup("<|im_start|>assistant\n");
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
        markup("<think>\n");
        content(reasoning);
        markup("\n</think>\n\n");
        content(lstrip(text, "\n"));  // shown stripped; the tool calls below test it unstripped
      } else {
        content(text);
      }
      for (size_t c = 0; c < m.tool_calls.size(); ++c) tool_call(out, m.tool_calls[c], c == 0 && text.empty());
      markup("<|im_end|>\n");
    } else if (m.role == "tool") {
      tool_result(out, messages, i);
    } else if (m.role != "system") {
      fail("chat template: message {} has role '{}' (expected system, user, assistant or tool)", i, m.role);
    }
  }
  if (add_generation_prompt)
    markup(enable_thinking ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  return out;
}

// Llama 3's template (the header describes its output).
std::vector<ChatPiece> render_llama3(std::span<const ChatMessage> messages, std::span<const std::string> tools) {
  if (!tools.empty()) fail("chat template: Llama 3's template has no tools");
  std::vector<ChatPiece> out;
  out.push_back({"<|begin_of_text|>", false});
  for (const ChatMessage& m : messages) {
    out.push_back({"<|start_header_id|>", false});
    out.push_back({m.role, true});
    out.push_back({"<|end_header_id|>\n\n", false});
    out.push_back({trim(m.content), true});
    out.push_back({"<|eot_id|>", false});
  }
  out.push_back({"<|start_header_id|>assistant<|end_header_id|>\n\n", false});
  return out;
}

}  // namespace

std::vector<ChatPiece> render_chat_pieces(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                          std::span<const std::string> tools, ChatFormat format, bool enable_thinking) {
  if (messages.empty()) fail("chat template: the conversation has no messages");
  switch (format) {
    case ChatFormat::ChatML:
      return render_chatml(messages, add_generation_prompt, tools);
    case ChatFormat::Qwen3:
      return render_qwen3(messages, add_generation_prompt, tools, enable_thinking);
    case ChatFormat::Llama3:
      return render_llama3(messages, tools);
  }
  fail("chat template: unknown format");
}

std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::span<const std::string> tools, ChatFormat format) {
  std::string out;
  for (const ChatPiece& piece : render_chat_pieces(messages, add_generation_prompt, tools, format)) out += piece.text;
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
                                 bool add_generation_prompt, SpecialTokens content, std::span<const std::string> tools,
                                 bool enable_thinking) {
  const std::vector<ChatPiece> pieces =
      render_chat_pieces(messages, add_generation_prompt, tools, tok.chat_format(), enable_thinking);
  const std::vector<TextPiece> text = chat_text_pieces(pieces, 0, content);
  std::vector<int32_t> ids;
  tok.encode_pieces_append(text, ids);
  return ids;
}

}  // namespace nanoinfer
