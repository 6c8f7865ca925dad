// The generation loop on a tiny random model: work counted in positions pushed, every stop
// condition, continuation of a sequence, and the stop-string filter on its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "nanoinfer/error.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "support/files.h"
#include "support/generation_model.h"

namespace nanoinfer {
namespace {

struct Collected {
  std::string text;
  std::vector<std::string> pieces;
  TextSink sink() {
    return [this](std::string_view s) {
      text.append(s);
      pieces.emplace_back(s);
    };
  }
};

class GeneratorTest : public ::testing::Test {
 protected:
  void SetUp() override { test::write_tiny_model_dir(dir_.path()); }
  Model load(size_t context = 0) {
    ModelOptions options;
    options.threads = 1;
    options.max_context = context;
    return open_model_alone(dir_.path(), options);
  }
  test::TempDir dir_;
};

const SamplerParams kGreedyParams{.temperature = 0.0};

TEST_F(GeneratorTest, TokenizerRoundTripsOnTheTestModel) {
  const Tokenizer tok = Tokenizer::load(dir_.path());
  EXPECT_EQ(tok.vocab_size(), 300);
  const std::vector<int32_t> ids = tok.encode("the cat<|im_end|>\n");
  EXPECT_EQ(tok.decode(ids), "the cat<|im_end|>\n");
  EXPECT_NE(std::find(ids.begin(), ids.end(), test::kTinyImEnd), ids.end());
}

TEST_F(GeneratorTest, PushesPromptPlusAllButTheLastToken) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyParams);
  const std::vector<int32_t> prompt = tok.encode("Once upon a time");
  Collected out;
  const GenerationStats s = gen.generate(prompt, {.max_new_tokens = 9}, out.sink());
  EXPECT_EQ(s.stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(s.prompt_tokens, prompt.size());
  EXPECT_EQ(s.generated_tokens, 9u);
  EXPECT_EQ(s.decode_steps, 8u);
  // The last sampled token is not pushed: the sequence may not continue.
  EXPECT_EQ(model.positions_pushed(), prompt.size() + 8);
  EXPECT_EQ(gen.cache().length(), prompt.size() + 8);
  ASSERT_EQ(gen.tokens().size(), prompt.size() + 9);
  const std::vector<int32_t> generated(gen.tokens().begin() + static_cast<ptrdiff_t>(prompt.size()),
                                       gen.tokens().end());
  EXPECT_EQ(out.text, tok.decode(generated));
}

TEST_F(GeneratorTest, ContinuationPrefillsOnlyWhatTheCacheLacks) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyParams);
  Collected out;
  const std::vector<int32_t> first = tok.encode("and so");
  gen.generate(first, {.max_new_tokens = 4}, out.sink());
  const uint64_t before = model.positions_pushed();
  const std::vector<int32_t> second = tok.encode(" then");
  const GenerationStats s = gen.generate(second, {.max_new_tokens = 3}, out.sink());
  // The pending last token of the first call, the new tokens, then 2 decode steps.
  EXPECT_EQ(s.prompt_tokens, 1 + second.size());
  EXPECT_EQ(model.positions_pushed() - before, 1 + second.size() + 2);
  EXPECT_EQ(gen.tokens().size(), first.size() + 4 + second.size() + 3);

  // The continued sequence equals generating the same tokens in one fresh sequence.
  Model fresh_model = load();
  Generator fresh(fresh_model, tok, kGreedyParams);
  std::vector<int32_t> prefix(gen.tokens().begin(), gen.tokens().end() - 3);
  fresh.generate(prefix, {.max_new_tokens = 3}, Collected{}.sink());
  EXPECT_TRUE(std::equal(gen.tokens().begin(), gen.tokens().end(), fresh.tokens().begin(), fresh.tokens().end()));
}

TEST_F(GeneratorTest, StopsAtAnEosIdWithoutEmittingIt) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  const std::vector<int32_t> prompt = tok.encode("the king");
  Generator probe(model, tok, kGreedyParams);
  probe.generate(prompt, {.max_new_tokens = 12}, Collected{}.sink());
  const std::vector<int32_t> greedy(probe.tokens().begin() + static_cast<ptrdiff_t>(prompt.size()),
                                    probe.tokens().end());
  // The first position whose token did not occur before it: declaring it EOS stops there.
  size_t k = 1;
  while (k < greedy.size() && std::find(greedy.begin(), greedy.begin() + static_cast<ptrdiff_t>(k), greedy[k]) !=
                                  greedy.begin() + static_cast<ptrdiff_t>(k)) {
    ++k;
  }
  ASSERT_LT(k, greedy.size()) << "greedy output repeats one token; pick another prompt";

  Generator gen(model, tok, kGreedyParams);
  Collected out;
  const GenerationStats s = gen.generate(prompt, {.max_new_tokens = 12, .eos_ids = {999, greedy[k]}}, out.sink());
  EXPECT_EQ(s.stop_reason, StopReason::Eos);
  EXPECT_EQ(s.generated_tokens, k);
  EXPECT_EQ(out.text, tok.decode(std::span(greedy).first(k)));
}

TEST_F(GeneratorTest, StopStringEndsGenerationAndIsNotEmitted) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  const std::vector<int32_t> prompt = tok.encode("to be or not");
  Generator probe(model, tok, kGreedyParams);
  Collected full;
  probe.generate(prompt, {.max_new_tokens = 24}, full.sink());
  ASSERT_GE(full.text.size(), 8u);
  // Two bytes from the middle of the output, on a character boundary.
  size_t at = full.text.size() / 2;
  while (at > 0 && (static_cast<unsigned char>(full.text[at]) & 0xC0) == 0x80) --at;
  size_t end = at + 1;
  while (end < full.text.size() && (static_cast<unsigned char>(full.text[end]) & 0xC0) == 0x80) ++end;
  const std::string stop = full.text.substr(at, end - at + 1);
  const size_t first = full.text.find(stop);

  Generator gen(model, tok, kGreedyParams);
  Collected out;
  const GenerationStats s = gen.generate(prompt, {.max_new_tokens = 24, .stop_strings = {stop}}, out.sink());
  EXPECT_EQ(s.stop_reason, StopReason::StopString);
  EXPECT_EQ(out.text, full.text.substr(0, first));
  EXPECT_LT(s.generated_tokens, 24u);
}

TEST_F(GeneratorTest, StopsWhenTheContextIsFull) {
  Model model = load(16);
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyParams);
  const std::vector<int32_t> prompt(10, 'a');
  const GenerationStats s = gen.generate(prompt, {.max_new_tokens = 100}, Collected{}.sink());
  // 10 prompt positions + 6 decode steps fill 16; the 7th token is sampled from the last.
  EXPECT_EQ(s.stop_reason, StopReason::ContextFull);
  EXPECT_EQ(s.generated_tokens, 7u);
  EXPECT_EQ(gen.cache().length(), 16u);
  EXPECT_EQ(model.positions_pushed(), 16u);
}

TEST_F(GeneratorTest, PromptLongerThanContextFailsBeforeAnyWork) {
  Model model = load(16);
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyParams);
  const std::vector<int32_t> prompt(17, 'a');
  try {
    gen.generate(prompt, {.max_new_tokens = 1}, Collected{}.sink());
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("17 tokens but the context holds 16"), std::string::npos) << e.what();
  }
  EXPECT_EQ(model.positions_pushed(), 0u);
  EXPECT_TRUE(gen.tokens().empty());
}

TEST_F(GeneratorTest, ZeroTokensOnlyPrefills) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  Generator gen(model, tok, kGreedyParams);
  const GenerationStats s = gen.generate(tok.encode("abc"), {.max_new_tokens = 0}, Collected{}.sink());
  EXPECT_EQ(s.generated_tokens, 0u);
  EXPECT_EQ(model.positions_pushed(), 3u);
}

TEST_F(GeneratorTest, SeededSamplingIsReproducible) {
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  const SamplerParams params{.temperature = 0.9, .top_k = 40, .top_p = 0.95, .seed = 5};
  std::vector<std::vector<int32_t>> runs;
  for (int i = 0; i < 2; ++i) {
    Generator gen(model, tok, params);
    gen.generate(tok.encode("the"), {.max_new_tokens = 20}, Collected{}.sink());
    runs.emplace_back(gen.tokens().begin(), gen.tokens().end());
  }
  EXPECT_EQ(runs[0], runs[1]);
}

// ---- StopStringFilter -------------------------------------------------------------------------

TEST_F(GeneratorTest, NonFiniteLogitsAreAnErrorNamingTheStep) {
  test::make_logits_overflow(dir_.path());
  Model model = load();
  const Tokenizer tok = Tokenizer::load(dir_.path());
  for (const SamplerParams& params : {kGreedyParams, SamplerParams{.temperature = 1.0, .top_k = 5, .seed = 3}}) {
    Generator gen(model, tok, params);
    Collected out;
    try {
      gen.generate(tok.encode("hello"), {.max_new_tokens = 4}, out.sink());
      ADD_FAILURE() << "generated from non-finite logits: " << out.text;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::StartsWith("generated token 1: the model produced a non-finite logit ("));
    }
    EXPECT_EQ(out.text, "");
  }
}

TEST(GeneratorStopFilter, HoldsBackPossibleStartsAndStopsAcrossChunks) {
  StopStringFilter f({"END", "xyz"});
  Collected out;
  EXPECT_FALSE(f.push("abcE", out.sink()));
  EXPECT_EQ(out.text, "abc");  // "E" could begin "END"
  EXPECT_FALSE(f.push("Nx", out.sink()));
  EXPECT_EQ(out.text, "abcEN");  // "ENx" cannot begin a stop string, "x" can
  EXPECT_FALSE(f.push("q", out.sink()));
  EXPECT_EQ(out.text, "abcENxq");
  EXPECT_FALSE(f.push("E", out.sink()));
  EXPECT_TRUE(f.push("ND and more", out.sink()));
  EXPECT_EQ(out.text, "abcENxq");
  EXPECT_TRUE(f.push("ignored", out.sink()));
  f.finish(out.sink());
  EXPECT_EQ(out.text, "abcENxq");
}

TEST(GeneratorStopFilter, EarliestStopWinsAndFinishFlushes) {
  {
    StopStringFilter f({"cd", "b"});
    Collected out;
    EXPECT_TRUE(f.push("abcd", out.sink()));
    EXPECT_EQ(out.text, "a");
  }
  {
    StopStringFilter f({"zz"});
    Collected out;
    EXPECT_FALSE(f.push("abz", out.sink()));
    EXPECT_EQ(out.text, "ab");
    f.finish(out.sink());
    EXPECT_EQ(out.text, "abz");
  }
  {
    StopStringFilter f({});
    Collected out;
    EXPECT_FALSE(f.push("é", out.sink()));
    EXPECT_EQ(out.pieces, (std::vector<std::string>{"é"}));
  }
  EXPECT_THROW(StopStringFilter({""}), Error);
}

}  // namespace
}  // namespace nanoinfer
