// render_chat against Qwen2.5's real Jinja chat template, rendered by jinja2 for 32
// conversation/flag combinations (tools/chat-template-reference/render.py wrote the file).
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

}  // namespace
}  // namespace nanoinfer
