// render_chat against Qwen2.5's real Jinja chat template, rendered by jinja2 for 32
// conversation/flag combinations (tools/chat-template-reference/render.py wrote the file), and
// against Qwen3's and Llama 3's (render_arch.py).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "nanoinfer/chat_template.h"
#include "nanoinfer/error.h"

namespace nanoinfer {
namespace {

TEST(TokenizerChatTemplate, MatchesTheJinjaTemplateOnEveryGoldenCase) {
  std::ifstream in(std::string(NANOINFER_SOURCE_DIR) + "/tests/data/tokenizer/chat_template_cases.json");
  ASSERT_TRUE(in) << "tests/data/tokenizer/chat_template_cases.json missing";
  const auto golden = nlohmann::json::parse(in);
  size_t checked = 0;
  for (const auto& c : golden["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    EXPECT_EQ(render_chat(messages, c["add_generation_prompt"]), c["rendered"].get<std::string>())
        << "case " << checked << ": " << c["messages"].dump();
    ++checked;
  }
  EXPECT_EQ(checked, 32u);
}

TEST(TokenizerChatTemplate, DefaultSystemPromptAndGenerationPrompt) {
  const std::vector<ChatMessage> messages = {{"user", "Hi"}};
  EXPECT_EQ(render_chat(messages, true),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(TokenizerChatTemplate, RejectsEmptyConversationsAndUnknownRoles) {
  EXPECT_THROW(render_chat({}, true), Error);
  const std::vector<ChatMessage> messages = {{"user", "a"}, {"narrator", "b"}};
  try {
    render_chat(messages, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'narrator'"), std::string::npos) << e.what();
  }
}

// Qwen3's and Llama 3's templates against their Jinja renders (tools/chat-template-reference/
// render_arch.py): Qwen3's <think> handling (reasoning kept after the last query, dropped before
// it, split at the last </think>), its tools block and tool calls; Llama 3's trimmed contents.
void check_golden(const char* file, ChatFormat format, size_t expected_cases) {
  std::ifstream in(std::string(NANOINFER_SOURCE_DIR) + "/tests/data/tokenizer/" + file);
  ASSERT_TRUE(in) << file << " missing";
  const auto golden = nlohmann::json::parse(in);
  size_t checked = 0;
  for (const auto& c : golden["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) {
      ChatMessage message{m["role"], m["content"], {}};
      if (m.contains("tool_calls"))
        for (const auto& call : m["tool_calls"]) message.tool_calls.push_back({call["name"], call["arguments"]});
      messages.push_back(std::move(message));
    }
    const std::vector<std::string> tools = c["tools"];
    EXPECT_EQ(render_chat(messages, c["add_generation_prompt"], tools, format), c["rendered"].get<std::string>())
        << file << " case " << checked << ": " << c["messages"].dump();
    ++checked;
  }
  EXPECT_EQ(checked, expected_cases);
}

TEST(TokenizerChatTemplate, Qwen3MatchesItsJinjaTemplate) {
  check_golden("chat_template_qwen3_cases.json", ChatFormat::Qwen3, 116);
}

TEST(TokenizerChatTemplate, Llama3MatchesItsJinjaTemplate) {
  check_golden("chat_template_llama3_cases.json", ChatFormat::Llama3, 34);
  const std::vector<ChatMessage> messages = {{"user", "a"}};
  const std::vector<std::string> tools = {"{}"};
  EXPECT_THROW(render_chat(messages, true, tools, ChatFormat::Llama3), Error);
}

TEST(TokenizerChatTemplate, FormatIsRecognisedFromTheTemplateText) {
  EXPECT_EQ(chat_format_of(""), ChatFormat::ChatML);
  EXPECT_EQ(chat_format_of("{{ '<|im_start|>' + message.role }}"), ChatFormat::ChatML);
  EXPECT_EQ(chat_format_of("{{ '<|im_start|>assistant\\n<think>\\n' }}"), ChatFormat::Qwen3);
  EXPECT_EQ(chat_format_of("{{ '<|start_header_id|>' + message['role'] }}"), ChatFormat::Llama3);
}

}  // namespace
}  // namespace nanoinfer
