// Multi-turn chat: the KV cache is reused across turns with only the new tokens prefilled
// (counted exactly), the sequence always stands for what the template renders, /reset, and
// `nanoinfer chat` driven through a pipe.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "nanoinfer/chat_session.h"
#include "nanoinfer/error.h"
#include "nanoinfer/open_model.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

class ChatSessionTest : public ::testing::Test {
 protected:
  void SetUp() override { test::write_tiny_model_dir(dir_.path()); }
  test::TempDir dir_;
};

// Greedy, with the test model's end-of-turn id, as `nanoinfer chat --temp 0` runs it.
const SamplerParams kGreedyWithPenalty{.temperature = 0.0, .repetition_penalty = 1.1};

std::string collect(ChatSession& chat, std::string_view user, int64_t n, GenerationStats* stats = nullptr) {
  std::string out;
  const GenerationStats s = chat.send(user, {.max_new_tokens = n, .eos_ids = {test::kTinyImEnd}},
                                      [&out](std::string_view t) { out.append(t); });
  if (stats != nullptr) *stats = s;
  return out;
}

TEST_F(ChatSessionTest, SecondTurnPrefillsOnlyItsNewTokens) {
  Model model = open_model_alone(dir_.path(), {.threads = 1});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "Be brief.");

  GenerationStats s1;
  const std::string reply1 = collect(chat, "hello there", 6, &s1);
  const std::vector<ChatMessage> first{{"system", "Be brief."}, {"user", "hello there"}};
  EXPECT_EQ(s1.prompt_tokens, tok.encode(render_chat(first, true)).size());
  EXPECT_EQ(model.positions_pushed(), s1.prompt_tokens + s1.decode_steps);

  const uint64_t before = model.positions_pushed();
  const size_t cached_before = gen.cache().length();
  const size_t pending = gen.tokens().size() - cached_before;  // 1 if the reply hit -n, else 0
  EXPECT_EQ(pending, s1.stop_reason == StopReason::MaxTokens ? 1u : 0u);
  GenerationStats s2;
  collect(chat, "and then?", 5, &s2);
  // What the template adds for the second turn, tokenized on its own.
  const size_t delta = tok.encode("<|im_end|>\n<|im_start|>user\nand then?<|im_end|>\n<|im_start|>assistant\n").size();
  EXPECT_EQ(s2.prompt_tokens, pending + delta);
  EXPECT_EQ(model.positions_pushed() - before, pending + delta + s2.decode_steps);

  // The sequence is exactly the rendered conversation, minus the final "<|im_end|>\n".
  ASSERT_EQ(chat.messages().size(), 5u);
  EXPECT_EQ(chat.messages()[2].content, reply1);
  EXPECT_EQ(tok.decode(gen.tokens()), chat.sequence_text());
  EXPECT_EQ(render_chat(chat.messages(), false), chat.sequence_text() + "<|im_end|>\n");
}

TEST_F(ChatSessionTest, ResetStartsOverWithTheSameReply) {
  Model model = open_model_alone(dir_.path(), {.threads = 1});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "");
  const std::string a = collect(chat, "what is it", 6);
  collect(chat, "more", 3);
  chat.reset();
  EXPECT_EQ(gen.cache().length(), 0u);
  ASSERT_TRUE(chat.messages().empty());
  EXPECT_EQ(collect(chat, "what is it", 6), a);
}

TEST_F(ChatSessionTest, TurnThatDoesNotFitLeavesTheConversationUnchanged) {
  Model model = open_model_alone(dir_.path(), {.threads = 1, .max_context = 64});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "x");
  collect(chat, "hi", 2);
  const std::vector<ChatMessage> before = chat.messages();
  const size_t tokens_before = gen.tokens().size();
  EXPECT_THROW(collect(chat, std::string(80, 'q'), 2), ChatTurnRefused);
  EXPECT_EQ(chat.messages().size(), before.size());
  EXPECT_EQ(gen.tokens().size(), tokens_before);
  EXPECT_NO_THROW(collect(chat, "ok", 1));
}

// The longest message worth tokenizing is 4 x the longest token x the context; a longer one is
// refused before it is tokenized (the tokenizer's piece cache, which every encoded word
// enters, is untouched), a shorter one that still does not fit is refused once tokenized,
// and neither changes the conversation.
TEST_F(ChatSessionTest, ALongMessageIsRefusedBeforeItIsTokenized) {
  Model model = open_model_alone(dir_.path(), {.threads = 1, .max_context = 64});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "x");
  size_t longest = 0;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) longest = std::max(longest, tok.token_bytes(id).size());
  ASSERT_GT(longest, 1u);
  EXPECT_EQ(chat.max_message_bytes(), 4 * longest * 64);
  collect(chat, "hi", 2);
  const std::vector<ChatMessage> before = chat.messages();
  const size_t tokens_before = gen.tokens().size();
  const auto words = [](size_t bytes) {  // distinct words, so each would enter the piece cache
    std::string text;
    for (size_t i = 0; text.size() < bytes; ++i) text += " w" + std::to_string(i);
    text.resize(bytes);
    return text;
  };
  tok.clear_cache();
  try {
    collect(chat, words(chat.max_message_bytes() + 1), 2);
    ADD_FAILURE() << "not refused";
  } catch (const ChatTurnRefused& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("message not sent: {} bytes cannot fit a context of 64 tokens (at most {} "
                          "bytes: 4 x {}, the longest token's bytes, per token); shorten it or "
                          "raise -c",
                          chat.max_message_bytes() + 1, chat.max_message_bytes(), longest));
  }
  EXPECT_EQ(tok.cache_entries(), 0u);
  EXPECT_EQ(chat.messages().size(), before.size());
  EXPECT_EQ(gen.tokens().size(), tokens_before);
  // Under the byte bound but over the context in tokens: tokenized, then refused.
  EXPECT_THROW(collect(chat, words(chat.max_message_bytes() / 8), 2), ChatTurnRefused);
  EXPECT_GT(tok.cache_entries(), 0u);
  EXPECT_EQ(chat.messages().size(), before.size());
  EXPECT_EQ(gen.tokens().size(), tokens_before);
  EXPECT_NO_THROW(collect(chat, "ok", 1));
  EXPECT_EQ(chat.messages().size(), before.size() + 2);
}

// `chat` refuses a message too long for the context with one line on stderr and goes on: the
// next message gets the reply it gets in a fresh chat, and the exit code is 0 (before: the
// refusal counted as a failed turn, exit 1; a 50 MB line was tokenized first, 1.6 GB). A
// message continued with backslashes past the bound is refused once, not turned into turns.
TEST_F(ChatSessionTest, CliRefusesATooLongMessageAndGoesOn) {
  Model model = open_model_alone(dir_.path(), {.threads = 1, .max_context = 96});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "");
  const size_t bound = chat.max_message_bytes();
  const std::string reply = collect(chat, "hello", 4);
  const std::vector<std::string> args = {"chat", "-m", dir_.path().string(), "--temp", "0", "-n", "4", "-t", "1",
                                         "-c",   "96"};
  for (const std::string& message : {std::string(bound + 1, 'a'),                // refused unread by the tokenizer
                                     std::string(bound / 4, 'b'),                // tokenized, too many tokens
                                     std::string(bound, 'c') + "\\\nd\\\ne"}) {  // continued past the bound
    const test::CliProcess r = test::run_cli_process(args, {.stdin_text = message + "\nhello\n"});
    ASSERT_TRUE(r.exited);
    EXPECT_EQ(r.exit_code, 0) << r.err.substr(0, 300);
    EXPECT_EQ(r.out, reply + "\n") << message.substr(0, 20);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 600);
    EXPECT_TRUE(r.err.starts_with("nanoinfer: message not sent: ")) << r.err.substr(0, 300);
    EXPECT_LT(r.err.size(), 300u);
  }
}

// A conversation that outgrows the context loses its oldest turns, never the system prompt,
// and the cache is then exactly the render of what is kept (prefilled again from scratch).
TEST_F(ChatSessionTest, OutgrownConversationDropsItsOldestTurnsAndKeepsTheSystemPrompt) {
  Model model = open_model_alone(dir_.path(), {.threads = 1, .max_context = 64});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, {.temperature = 0.0, .repetition_penalty = 1.0});
  ChatSession chat(gen, tok, "x");
  const int64_t n = 12;  // the reply's room: min(12, 64 / 2)
  size_t dropped = 0;
  std::vector<ChatMessage> all{{"system", "x"}};
  for (int turn = 0; turn < 8; ++turn) {
    const std::string user = "turn " + std::to_string(turn);
    GenerationStats s;
    const std::string reply = collect(chat, user, n, &s);
    all.push_back({"user", user});
    all.push_back({"assistant", reply});
    const std::vector<ChatMessage>& kept = chat.messages();
    ASSERT_GE(kept.size(), 3u);
    EXPECT_EQ(kept.front().role, "system");
    EXPECT_EQ(kept.front().content, "x");
    // What is kept is the system prompt and the newest turns, in order.
    const auto same = [](const ChatMessage& a, const ChatMessage& b) {
      return a.role == b.role && a.content == b.content;
    };
    EXPECT_TRUE(std::equal(kept.begin() + 1, kept.end(), all.end() - static_cast<ptrdiff_t>(kept.size() - 1), same));
    EXPECT_EQ(tok.decode(gen.tokens()), chat.sequence_text());
    EXPECT_EQ(render_chat(kept, false), chat.sequence_text() + "<|im_end|>\n");
    if (chat.dropped_turns() > 0) {
      dropped += chat.dropped_turns();
      // Prefilled from scratch: the prompt is the whole render of what is kept.
      std::vector<ChatMessage> prompt(kept.begin(), kept.end() - 1);
      EXPECT_EQ(s.prompt_tokens, tok.encode(render_chat(prompt, true)).size());
      EXPECT_LE(s.prompt_tokens + static_cast<size_t>(n), 64u);
    }
    EXPECT_EQ(kept.size(), all.size() - 2 * dropped);
  }
  EXPECT_GT(dropped, 0u);  // 8 turns of ~12 tokens each do not fit in 64
}

// The interrupt flag ends the reply before its next token; what was generated is kept as the
// reply, and the conversation goes on.
TEST_F(ChatSessionTest, InterruptStopsTheReplyAndKeepsWhatItSaid) {
  Model model = open_model_alone(dir_.path(), {.threads = 1});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, {.temperature = 0.0, .repetition_penalty = 1.0});
  ChatSession chat(gen, tok, "");
  std::atomic<bool> stop{false};
  std::string out;
  const GenerationStats s =
      chat.send("hello", {.max_new_tokens = 20, .eos_ids = {}, .interrupt = &stop}, [&](std::string_view t) {
        out.append(t);
        stop.store(true);  // as a Ctrl-C during the first token
      });
  EXPECT_EQ(s.stop_reason, StopReason::Interrupted);
  EXPECT_EQ(s.generated_tokens, 1u);
  ASSERT_EQ(chat.messages().size(), 2u);
  EXPECT_EQ(chat.messages()[1].content, out);
  stop.store(false);
  EXPECT_NO_THROW(collect(chat, "again", 3));
  EXPECT_EQ(tok.decode(gen.tokens()), chat.sequence_text());
}

TEST_F(ChatSessionTest, CliHelpIsNotSentAndABackslashContinuesTheMessage) {
  Model model = open_model_alone(dir_.path(), {.threads = 1});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "");
  const std::string r1 = collect(chat, "hello\nthere", 6);
  const auto r = test::run_cli({"chat", "-m", dir_.path().string(), "--temp", "0", "-n", "6", "-t", "1"},
                               "/help\nhello\\\nthere\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, r1 + "\n");
  EXPECT_NE(r.err.find("/reset"), std::string::npos) << r.err;
}

// On a terminal (a pseudo-terminal from util-linux's `script`), the up arrow recalls the
// previous line, and lines are kept in $XDG_STATE_HOME/nanoinfer/chat_history.
TEST_F(ChatSessionTest, CliOnATerminalEditsAndKeepsHistory) {
  if (std::system("command -v script > /dev/null 2>&1") != 0) GTEST_SKIP() << "util-linux 'script' not found";
  const std::filesystem::path state = dir_.path() / "state";
  test::write_text(dir_.path() / "input.txt", "hello\n\x1b[A\n/exit\n");
  const std::string command = fmt::format(
      "XDG_STATE_HOME={} timeout 60 script -qfec '{} chat -m {} --temp 0 -n 3 -t 1' /dev/null < {} > {} 2>&1",
      state.string(), NANOINFER_BINARY_PATH, dir_.path().string(), (dir_.path() / "input.txt").string(),
      (dir_.path() / "out.txt").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << test::read_text(dir_.path() / "out.txt");
  const std::string out = test::read_text(dir_.path() / "out.txt");
  // The prompt shows "hello" twice: typed, then recalled by the up arrow.
  size_t shown = 0;
  for (size_t at = out.find("> hello"); at != std::string::npos; at = out.find("> hello", at + 1)) ++shown;
  EXPECT_EQ(shown, 2u) << out;
  EXPECT_EQ(test::read_text(state / "nanoinfer/chat_history"), "_HiStOrY_V2_\nhello\n/exit\n");
}

TEST_F(ChatSessionTest, CliFromAPipePrintsRepliesOnly) {
  Model model = open_model_alone(dir_.path(), {.threads = 1});
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyWithPenalty);
  ChatSession chat(gen, tok, "");
  const std::string r1 = collect(chat, "hello", 6);
  const std::string r2 = collect(chat, "how are you", 6);

  const auto r = test::run_cli({"chat", "-m", dir_.path().string(), "--temp", "0", "-n", "6", "-t", "1"},
                               "hello\n\nhow are you\n/exit\nnever read\n");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, r1 + "\n" + r2 + "\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(ChatSessionTest, CliResetAndEndOfInput) {
  const auto r =
      test::run_cli({"chat", "-m", dir_.path().string(), "--temp", "0", "-n", "5"}, "tell me\n/reset\ntell me\n");
  ASSERT_EQ(r.status, 0) << r.err;
  // Two identical replies, each followed by a newline: out = X + "\n" + X + "\n".
  ASSERT_EQ(r.out.size() % 2, 0u);
  EXPECT_EQ(r.out.substr(0, r.out.size() / 2), r.out.substr(r.out.size() / 2));
}

TEST_F(ChatSessionTest, CliBadFlagIsOneLineError) {
  const auto r = test::run_cli({"chat", "-m", dir_.path().string(), "--top-p", "2"}, "hi\n");
  EXPECT_NE(r.status, 0);
  EXPECT_EQ(r.err, "nanoinfer: error: top-p must be in (0, 1], got 2\n");
}

}  // namespace
}  // namespace nanoinfer
