// Speculative decoding inside serve's continuous batching (src/serve/scheduler.h) on a tiny
// random model: several concurrent requests, each drafting and verifying its rows inside the
// shared batched steps, give greedy output identical to plain decoding, and seeded sampled
// output identical to a Generator alone with the same drafter; drafts are counted per request.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "serve/scheduler.h"
#include "support/files.h"
#include "support/generation_model.h"

namespace nanoinfer::serve {
namespace {

struct SpecResult {
  std::string text;
  std::vector<int32_t> ids;
  size_t drafted = 0, accepted = 0;
};

SpecResult drain_counting(Channel& channel) {
  SpecResult r;
  for (Channel::Piece p = channel.next();; p = channel.next()) {
    r.text += p.text;
    if (p.done) break;
  }
  EXPECT_EQ(channel.outcome(), Outcome::Finished) << channel.error();
  r.ids = channel.completion_ids();
  r.drafted = channel.drafted_tokens();
  r.accepted = channel.accepted_tokens();
  return r;
}

class ServeSpeculative : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_tiny_model_dir(dir_.path());
    ModelOptions options;
    options.threads = 1;
    options.max_context = 96;
    model_.emplace(open_model_alone(dir_.path(), options));
    options.weights = WeightType::Q4_0;
    int4_.emplace(open_model_alone(dir_.path(), options));
    tok_.emplace(Tokenizer::load(dir_.path()));
  }
  Job job(std::string_view prompt, int64_t max_tokens, SamplerParams params) const {
    Job j;
    j.prompt = tok_->encode(prompt);
    j.max_tokens = max_tokens;
    j.sampling = params;
    j.eos_ids = {test::kTinyImEnd};
    return j;
  }
  // A Generator alone on the same job, with a drafter or none.
  SpecResult alone(const Job& j, std::unique_ptr<Drafter> drafter = nullptr,
                   DraftLength length = DraftLength::adaptive()) const {
    Generator gen(*model_, *tok_, j.sampling);
    if (drafter) gen.set_drafter(std::move(drafter), length);
    SpecResult r;
    const GenerationStats s = gen.generate(j.prompt, {.max_new_tokens = j.max_tokens, .eos_ids = j.eos_ids},
                                           [&](std::string_view t) { r.text += t; });
    r.ids.assign(gen.tokens().begin() + static_cast<ptrdiff_t>(j.prompt.size()), gen.tokens().end());
    r.drafted = s.drafted_tokens;
    r.accepted = s.accepted_tokens;
    return r;
  }
  std::vector<SpecResult> serve(const std::vector<Job>& jobs, SchedulerOptions options) {
    Scheduler scheduler(*model_, *tok_, options, metrics_);
    std::vector<std::shared_ptr<Channel>> channels;
    for (const Job& j : jobs) channels.push_back(scheduler.submit(j));
    std::vector<SpecResult> results;
    for (const auto& c : channels) {
      EXPECT_TRUE(c);
      if (c) results.push_back(drain_counting(*c));
    }
    return results;
  }
  test::TempDir dir_;
  std::optional<Model> model_, int4_;
  std::optional<Tokenizer> tok_;
  Metrics metrics_;
};

// Copy-heavy prompts (prompt lookup finds them), different lengths, more requests than slots.
std::vector<std::string> prompts() {
  return {"the cat sat on the mat. the cat sat on the", "Once upon a time", "a b c d a b c d a b c", "dog dog dog dog",
          "hello world, hello"};
}

TEST_F(ServeSpeculative, GreedyOutputIsPlainOutputWithEveryDrafter) {
  std::vector<Job> jobs;
  for (const std::string& p : prompts()) jobs.push_back(job(p, 40, {.temperature = 0.0}));
  std::vector<SpecResult> plain;
  for (const Job& j : jobs) plain.push_back(alone(j));
  const int64_t vocab = tok_->vocab_size();
  struct Case {
    std::string name;
    std::function<std::unique_ptr<Drafter>()> make;
    std::optional<size_t> k;
  };
  const std::vector<Case> cases = {
      {"lookup adaptive", [] { return std::make_unique<PromptLookupDrafter>(3); }, std::nullopt},
      {"lookup k=4", [] { return std::make_unique<PromptLookupDrafter>(2); }, 4},
      {"self", [&] { return std::make_unique<ModelDrafter>(*model_, vocab); }, 3},
      {"int4", [&] { return std::make_unique<ModelDrafter>(*int4_, vocab); }, std::nullopt},
  };
  for (const Case& c : cases) {
    const std::vector<SpecResult> got =
        serve(jobs, {.parallel = 3, .queue = 8, .make_drafter = c.make, .draft_max = c.k});
    ASSERT_EQ(got.size(), jobs.size());
    size_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(got[i].ids, plain[i].ids) << c.name << ", request " << i;
      EXPECT_EQ(got[i].text, plain[i].text) << c.name << ", request " << i;
      EXPECT_LE(got[i].accepted, got[i].drafted);
      drafted += got[i].drafted;
      accepted += got[i].accepted;
    }
    EXPECT_GT(accepted, 20u) << c.name;
    if (c.name == "self") {
      // The target drafting for itself: every draft is its own choice, kept, but a drafted
      // end of sequence, which ends the request without being kept (at most one each).
      EXPECT_LE(drafted - accepted, jobs.size()) << c.name;
    } else if (c.name == "int4") {
      EXPECT_LT(accepted, drafted) << c.name;  // rejections: rows dropped from the cache
    }
  }
}

// Sampled: each request draws what a Generator alone draws with the same drafter and seed
// (the scheduler verifies the rows exactly as Generator does; a draft model samples its
// drafts and they go through rejection sampling, prompt lookup's are point masses).
TEST_F(ServeSpeculative, SeededSampledOutputIsThatOfAGeneratorWithTheSameDrafter) {
  std::vector<Job> jobs;
  uint64_t seed = 1;
  for (const std::string& p : prompts()) {
    jobs.push_back(job(p, 30, {.temperature = 0.8, .top_k = 20, .repetition_penalty = 1.1, .seed = seed++}));
  }
  const int64_t vocab = tok_->vocab_size();
  size_t rejected = 0;
  for (bool lookup : {true, false}) {
    const auto make = [&]() -> std::unique_ptr<Drafter> {
      if (lookup) return std::make_unique<PromptLookupDrafter>(2);
      return std::make_unique<ModelDrafter>(*int4_, vocab, SamplerParams{.temperature = 0.0});
    };
    const std::vector<SpecResult> got = serve(jobs, {.parallel = 2, .queue = 8, .make_drafter = make, .draft_max = 3});
    ASSERT_EQ(got.size(), jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      std::unique_ptr<Drafter> d = make();
      d->set_sampling(jobs[i].sampling);
      const SpecResult want = alone(jobs[i], std::move(d), DraftLength::fixed(3));
      EXPECT_EQ(got[i].ids, want.ids) << (lookup ? "lookup" : "int4") << ", request " << i;
      EXPECT_EQ(got[i].drafted, want.drafted);
      EXPECT_EQ(got[i].accepted, want.accepted);
      rejected += got[i].drafted - got[i].accepted;
      // Prompt lookup's drafts are point masses: the tokens are plain sampling's, seed for seed.
      if (lookup) {
        EXPECT_EQ(got[i].ids, alone(jobs[i]).ids) << "request " << i;
      }
    }
  }
  EXPECT_GT(rejected, 0u);
}

}  // namespace
}  // namespace nanoinfer::serve
