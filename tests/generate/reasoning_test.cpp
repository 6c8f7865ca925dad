// A reasoning model's think block split off its reply (ReasoningSplitter, over scripted streams
// cut anywhere) and the Qwen3 template's enable_thinking.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/reasoning.h"

namespace nanoinfer {
namespace {

// The splitter over a scripted stream, cut at every byte (a tag split across pieces included),
// gives what it gives the whole text at once.
struct Split {
  std::string reasoning, content;
};
Split split(std::string_view text, size_t cut, bool inside = false) {
  ReasoningSplitter s(inside);
  Split out;
  for (size_t at = 0; at < text.size(); at += cut) s.feed(text.substr(at, cut), out.reasoning, out.content);
  s.finish(out.reasoning, out.content);
  return out;
}

TEST(Reasoning, SplitsTheThinkBlockWhereverTheStreamIsCut) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"<think>\nLet me see.\n</think>\n\nParis.", "Let me see.", "Paris."},
      {"<think>\n\n</think>\n\nHi", "", "Hi"},
      {"\n<think>a<b</thi</think>c", "a<b</thi", "c"},
      {"No thinking here.", "", "No thinking here."},
      {"  <thin", "", "  <thin"},                             // ended before the tag was known: content
      {"<think>\nstill thinking\n", "still thinking\n", ""},  // cut off inside the block: all reasoning
      {"<think>x</think>\n\n<think>y</think>", "x", "<think>y</think>"},
      {"a <think>b</think>", "", "a <think>b</think>"},  // a tag later in the reply is text
  };
  for (const auto& [text, reasoning, content] : cases) {
    for (size_t cut = 1; cut <= text.size(); ++cut) {
      const Split s = split(text, cut);
      EXPECT_EQ(s.reasoning, reasoning) << text << " cut " << cut;
      EXPECT_EQ(s.content, content) << text << " cut " << cut;
    }
  }
  // A template that opened the block in the prompt: the reply starts inside it.
  const Split opened = split("step 1\n</think>\n\nDone.", 3, /*inside=*/true);
  EXPECT_EQ(opened.reasoning, "step 1");
  EXPECT_EQ(opened.content, "Done.");
}

// Qwen3's template with enable_thinking false ends its generation prompt with an empty think
// block (its Jinja: `{{- '<think>\n\n</think>\n\n' }}`); the other formats have no such variable.
TEST(Reasoning, EnableThinkingFalseRendersTheEmptyThinkBlock) {
  const std::vector<ChatMessage> messages = {{"user", "hi", {}}};
  EXPECT_EQ(render_chat(messages, true, {}, ChatFormat::Qwen3),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
  const auto pieces = render_chat_pieces(messages, true, {}, ChatFormat::Qwen3, /*enable_thinking=*/false);
  std::string text;
  for (const ChatPiece& p : pieces) text += p.text;
  EXPECT_EQ(text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(pieces.back().is_content);
  const auto chatml = render_chat_pieces(messages, true, {}, ChatFormat::ChatML, false);
  EXPECT_EQ(chatml.back().text, "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace nanoinfer
