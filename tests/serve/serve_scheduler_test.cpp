// The scheduler of `nanoinfer serve` on a tiny random model: concurrent requests, decoded in
// one batch, each give exactly what a Generator gives alone (greedy and seeded sampling);
// prefix reuse, stop reasons, a full queue, cancellation and shutdown.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <atomic>
#include <future>
#include <thread>

#include "nanoinfer/generator.h"
#include "nanoinfer/open_model.h"
#include "serve/scheduler.h"
#include "support/files.h"
#include "support/generation_model.h"

namespace nanoinfer::serve {
namespace {

struct Result {
  std::string text;
  Outcome outcome = Outcome::Running;
  FinishReason finish = FinishReason::Stop;
  Usage usage;
  size_t cached = 0;
};

Result drain(Channel& channel) {
  Result r;
  for (Channel::Piece p = channel.next();; p = channel.next()) {
    r.text += p.text;
    if (p.done) break;
  }
  r.outcome = channel.outcome();
  r.finish = channel.finish_reason();
  r.usage = channel.usage();
  r.cached = channel.cached_prompt_tokens();
  return r;
}

class ServeScheduler : public ::testing::Test {
 protected:
  void SetUp() override {
    test::write_tiny_model_dir(dir_.path());
    ModelOptions options;
    options.threads = 1;
    options.max_context = 96;
    model_.emplace(open_model_alone(dir_.path(), options));
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
  // What a Generator alone makes of the same job.
  Result alone(const Job& j) const {
    Generator gen(*model_, *tok_, j.sampling);
    Result r;
    const GenerationStats s =
        gen.generate(j.prompt, {.max_new_tokens = j.max_tokens, .eos_ids = j.eos_ids, .stop_strings = j.stop},
                     [&](std::string_view t) { r.text += t; });
    r.outcome = Outcome::Finished;
    r.finish = s.stop_reason == StopReason::MaxTokens || s.stop_reason == StopReason::ContextFull ? FinishReason::Length
                                                                                                  : FinishReason::Stop;
    r.usage = {j.prompt.size(), s.generated_tokens};
    return r;
  }
  void expect_same(const Result& got, const Result& want, std::string_view what) {
    EXPECT_EQ(got.outcome, Outcome::Finished) << what;
    EXPECT_EQ(got.text, want.text) << what;
    EXPECT_EQ(got.finish, want.finish) << what;
    EXPECT_EQ(got.usage.prompt_tokens, want.usage.prompt_tokens) << what;
    EXPECT_EQ(got.usage.completion_tokens, want.usage.completion_tokens) << what;
  }
  test::TempDir dir_;
  std::optional<Model> model_;
  std::optional<Tokenizer> tok_;
  Metrics metrics_;
};

const SamplerParams kGreedy{.temperature = 0.0};
// For the tests of chunking alone: no row budget beside decoding sequences, so every step
// carries a whole --prefill-chunk of each prompt (the budget has its own test below).
constexpr size_t kNoRowBudget = size_t{1} << 20;

TEST_F(ServeScheduler, ConcurrentGreedyRequestsEqualSingleOnes) {
  const std::vector<Job> jobs = {job("the cat", 40, kGreedy), job("Once upon a time", 40, kGreedy)};
  Scheduler scheduler(*model_, *tok_, {.parallel = 2, .queue = 4}, metrics_);
  std::vector<std::shared_ptr<Channel>> channels;
  for (const Job& j : jobs) channels.push_back(scheduler.submit(j));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(channels[i]);
    const Result want = alone(jobs[i]);
    EXPECT_GT(want.usage.completion_tokens, 5u) << "the test needs generations that overlap";
    expect_same(drain(*channels[i]), want, fmt::format("request {}", i));
  }
}

// Prompts are prefilled a chunk per step, riding in the running sequences' decode steps:
// whatever the chunk size, each request's output is what it makes alone, and its prompt
// took exactly ceil(uncached tokens / chunk) forward passes.
TEST_F(ServeScheduler, ChunkedPrefillEqualsAloneAndTakesCeilPromptOverChunkPasses) {
  const std::vector<Job> jobs = {job("Once upon a time there was a cat that sat on the mat and looked", 30, kGreedy),
                                 job("the cat", 30, kGreedy), job("a dog ran", 12, {.temperature = 0.9, .seed = 7})};
  ASSERT_GT(jobs[0].prompt.size(), 12u);
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{7}, size_t{512}}) {
    Scheduler scheduler(*model_, *tok_,
                        {.parallel = 2, .queue = 4, .prefill_chunk = chunk, .step_tokens = kNoRowBudget}, metrics_);
    std::vector<std::shared_ptr<Channel>> channels;
    for (const Job& j : jobs) channels.push_back(scheduler.submit(j));
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_TRUE(channels[i]);
      const Result got = drain(*channels[i]);
      expect_same(got, alone(jobs[i]), fmt::format("chunk {}, request {}", chunk, i));
      const size_t pushed = jobs[i].prompt.size() - got.cached;
      EXPECT_EQ(channels[i]->prefill_chunks(), (pushed + chunk - 1) / chunk) << "chunk " << chunk << ", request " << i;
    }
  }
  // A continued conversation prefills only what its cache lacks, in chunks too.
  Scheduler scheduler(*model_, *tok_, {.parallel = 1, .queue = 2, .prefill_chunk = 2}, metrics_);
  drain(*scheduler.submit(job("the cat sat on", 4, kGreedy)));
  const Job second = job("the cat sat on the mat and a dog ran", 6, kGreedy);
  const std::shared_ptr<Channel> channel = scheduler.submit(second);
  const Result b = drain(*channel);
  ASSERT_GT(b.cached, 1u);
  expect_same(b, alone(second), "continued");
  EXPECT_EQ(channel->prefill_chunks(), (second.prompt.size() - b.cached + 1) / 2);
}

TEST_F(ServeScheduler, SeededSamplingUnderLoadEqualsAlone) {
  // Five requests on three slots: some wait, join a running batch, and leave at different steps.
  std::vector<Job> jobs;
  for (uint64_t i = 0; i < 5; ++i) {
    jobs.push_back(job(i % 2 ? "the cat sat" : "a dog", 8 + 7 * static_cast<int64_t>(i),
                       {.temperature = 0.9, .top_k = 40, .top_p = 0.95, .repetition_penalty = 1.1, .seed = 100 + i}));
  }
  jobs[3].stop = {"e"};
  Scheduler scheduler(*model_, *tok_, {.parallel = 3, .queue = 8}, metrics_);
  std::vector<std::shared_ptr<Channel>> channels;
  for (const Job& j : jobs) channels.push_back(scheduler.submit(j));
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_TRUE(channels[i]) << i;
    expect_same(drain(*channels[i]), alone(jobs[i]), fmt::format("request {}", i));
  }
}

TEST_F(ServeScheduler, AContinuedConversationReusesItsPrefix) {
  Scheduler scheduler(*model_, *tok_, {.parallel = 1, .queue = 2}, metrics_);
  const Job first = job("the cat sat on", 6, kGreedy);
  const Result a = drain(*scheduler.submit(first));
  EXPECT_EQ(a.cached, 0u);
  const Job second = job("the cat sat on the mat and", 6, kGreedy);
  const Result b = drain(*scheduler.submit(second));
  // The common token prefix of the two prompts was not pushed again, and the output is the same.
  size_t common = 0;
  while (common < first.prompt.size() && first.prompt[common] == second.prompt[common]) ++common;
  ASSERT_GT(common, 1u);
  EXPECT_EQ(b.cached, common);
  expect_same(b, alone(second), "continued");
}

// A drafter that drafts nothing (plain decoding, output unchanged) and holds the scheduler
// thread in its first draft until released: requests submitted meanwhile are admitted together
// at the next step, with the first request's slot busy.
struct GateDrafter final : Drafter {
  struct Gate {
    std::promise<void> entered, release;
    std::atomic<bool> first{true};
  };
  explicit GateDrafter(std::shared_ptr<Gate> g) : gate(std::move(g)) {}
  void draft(std::span<const int32_t>, size_t, std::vector<int32_t>& out) override {
    out.clear();
    if (gate->first.exchange(false)) {
      gate->entered.set_value();
      gate->release.get_future().wait();
    }
  }
  std::string_view name() const override { return "gate"; }
  std::shared_ptr<Gate> gate;
};

// Requests that start with the same long system prompt: it is prefilled once. The first
// request computes all of its prompt; every other one copies the shared rows from a slot that
// holds them (or waits a step for the slot computing them) and pushes only its own question, in
// ceil(rest / chunk) passes; every output is what a Generator makes alone.
TEST_F(ServeScheduler, ASharedSystemPromptIsPrefilledOnceAcrossSlots) {
  const std::string system = "Once upon a time there was a cat that sat on the mat and looked at a dog. ";
  const std::vector<Job> jobs = {job(system + "the cat", 30, kGreedy), job(system + "a dog ran", 12, kGreedy),
                                 job(system + "Once the", 8, {.temperature = 0.9, .seed = 3})};
  size_t common = jobs[0].prompt.size();
  for (const Job& j : jobs) {
    size_t same = 0;
    while (same < std::min(common, j.prompt.size()) && j.prompt[same] == jobs[0].prompt[same]) ++same;
    common = same;
  }
  ASSERT_GT(common, 12u);
  for (size_t a = 1; a < jobs.size(); ++a)
    for (size_t b = 0; b < a; ++b) ASSERT_NE(jobs[a].prompt[common], jobs[b].prompt[common]) << "questions differ";
  const std::vector<Result> want = {alone(jobs[0]), alone(jobs[1]), alone(jobs[2])};
  ASSERT_GT(want[0].usage.completion_tokens, 1u) << "the first request must still decode when the others come";
  const auto check = [&](const std::vector<std::shared_ptr<Channel>>& channels, size_t chunk, bool copied) {
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_TRUE(channels[i]);
      const Result got = drain(*channels[i]);
      const std::string what = fmt::format("chunk {}, request {}", chunk, i);
      expect_same(got, want[i], what);
      const size_t cached = i == 0 ? 0 : common;
      EXPECT_EQ(got.cached, cached) << what;
      // Arriving together, a request may also land on a finished request's slot and reuse
      // its cache there; with the first slot held busy, the rows can only have been copied.
      if (copied) {
        EXPECT_EQ(channels[i]->shared_prompt_tokens(), cached) << what;
      }
      EXPECT_LE(channels[i]->shared_prompt_tokens(), cached) << what;
      EXPECT_EQ(channels[i]->prefill_chunks(), (jobs[i].prompt.size() - cached + chunk - 1) / chunk) << what;
    }
  };
  // Arriving together, in chunks of 1, 4 and the whole prompt: the later ones wait for the
  // first's chunks rather than compute them.
  for (size_t chunk : {size_t{1}, size_t{4}, size_t{512}}) {
    Scheduler scheduler(*model_, *tok_,
                        {.parallel = 3, .queue = 4, .prefill_chunk = chunk, .step_tokens = kNoRowBudget}, metrics_);
    std::vector<std::shared_ptr<Channel>> channels;
    for (const Job& j : jobs) channels.push_back(scheduler.submit(j));
    check(channels, chunk, false);
  }
  // The first decoding when the others arrive: they copy its rows.
  auto gate = std::make_shared<GateDrafter::Gate>();
  Scheduler scheduler(*model_, *tok_,
                      {.parallel = 3,
                       .queue = 4,
                       .prefill_chunk = 4,
                       .step_tokens = kNoRowBudget,
                       .make_drafter = [gate] { return std::make_unique<GateDrafter>(gate); },
                       .draft_max = 1},
                      metrics_);
  std::vector<std::shared_ptr<Channel>> channels = {scheduler.submit(jobs[0])};
  gate->entered.get_future().wait();
  channels.push_back(scheduler.submit(jobs[1]));
  channels.push_back(scheduler.submit(jobs[2]));
  gate->release.set_value();
  check(channels, 4, true);
}

// The prefix cache is a side channel (a cached prompt answers sooner): a job reuses rows only
// of prompts of its own cache scope (an API key under per-key isolation), from a free slot or
// copied from a busy one, and none at all with the prefix cache off. Counted by the prompt
// tokens each request reused; outputs stay what a Generator makes alone.
TEST_F(ServeScheduler, ThePrefixCacheIsReusedOnlyWithinAScopeAndNotAtAllWhenOff) {
  const std::string text = "Once upon a time there was a cat that sat on the mat and looked at a dog.";
  const auto scoped = [&](uint64_t scope, int64_t max_tokens = 4) {
    Job j = job(text, max_tokens, kGreedy);
    j.cache_scope = scope;
    return j;
  };
  const size_t reusable = scoped(1).prompt.size() - 1;  // the last prompt token is always pushed
  const Result want = alone(scoped(1));
  {
    Scheduler scheduler(*model_, *tok_, {.parallel = 2, .queue = 4}, metrics_);
    const Result a = drain(*scheduler.submit(scoped(1)));
    EXPECT_EQ(a.cached, 0u);
    const Result b = drain(*scheduler.submit(scoped(2)));  // another key, the same prompt
    EXPECT_EQ(b.cached, 0u);
    expect_same(b, want, "other scope");
    const Result c = drain(*scheduler.submit(scoped(1)));  // the first key again: its slot is reused
    EXPECT_EQ(c.cached, reusable);
    expect_same(c, want, "same scope");
    const Result d = drain(*scheduler.submit(scoped(2)));
    EXPECT_EQ(d.cached, reusable);
  }
  {
    // A busy slot of scope 1 holds the prompt while requests of scopes 2 and 1 arrive: only
    // the scope-1 one copies its rows.
    auto gate = std::make_shared<GateDrafter::Gate>();
    Scheduler scheduler(*model_, *tok_,
                        {.parallel = 3,
                         .queue = 4,
                         .make_drafter = [gate] { return std::make_unique<GateDrafter>(gate); },
                         .draft_max = 1},
                        metrics_);
    const std::shared_ptr<Channel> first = scheduler.submit(scoped(1, 30));
    gate->entered.get_future().wait();
    const std::shared_ptr<Channel> other = scheduler.submit(scoped(2));
    const std::shared_ptr<Channel> same = scheduler.submit(scoped(1));
    gate->release.set_value();
    const Result o = drain(*other), s = drain(*same);
    drain(*first);
    EXPECT_EQ(o.cached, 0u);
    EXPECT_EQ(other->shared_prompt_tokens(), 0u);
    EXPECT_EQ(s.cached, reusable);
    EXPECT_EQ(same->shared_prompt_tokens(), reusable);
    expect_same(o, want, "other scope beside a busy slot");
    expect_same(s, want, "same scope beside a busy slot");
  }
  {
    Scheduler scheduler(*model_, *tok_, {.parallel = 2, .queue = 4, .prefix_cache = false}, metrics_);
    for (int i = 0; i < 3; ++i) {
      const Result r = drain(*scheduler.submit(scoped(1)));
      EXPECT_EQ(r.cached, 0u) << i;
      expect_same(r, want, "off");
    }
  }
}

// Each step is one forward pass holding the decoding sequences' rows and a chunk of the prompt
// being prefilled: a long prompt arriving while two sequences decode rides in their steps, at
// most step_tokens rows each, and every request still gets what it gets alone. Counted: one
// model pass per step, and every row a step carried is a prompt token or a decode token.
TEST_F(ServeScheduler, APromptArrivingRidesInTheDecodeStepsWithinTheRowBudget) {
  std::vector<Job> jobs = {
      job("the cat", 84, kGreedy), job("a dog ran", 84, {.temperature = 0.9, .seed = 5}),
      job("Once upon a time there was a cat that sat on the mat and looked at a dog that ran after a bird", 6,
          kGreedy)};
  jobs[0].eos_ids.clear();  // the streams run to max_tokens
  jobs[1].eos_ids.clear();
  ASSERT_GT(jobs[2].prompt.size(), 20u);
  std::vector<Result> want;
  for (const Job& j : jobs) want.push_back(alone(j));
  for (size_t i = 0; i < 2; ++i)
    ASSERT_GT(want[i].usage.completion_tokens, jobs[2].prompt.size() + 2) << "the streams must outlast the prompt";
  for (size_t step_tokens : {size_t{3}, size_t{4}, size_t{9}}) {
    const uint64_t passes = model_->passes(), pushed = model_->positions_pushed();
    // The gate holds the scheduler in the first decode step's draft (nothing is drafted): the
    // long prompt comes while both sequences decode.
    auto gate = std::make_shared<GateDrafter::Gate>();
    Scheduler scheduler(*model_, *tok_,
                        {.parallel = 3,
                         .queue = 4,
                         .step_tokens = step_tokens,
                         .make_drafter = [gate] { return std::make_unique<GateDrafter>(gate); },
                         .draft_max = 1},
                        metrics_);
    std::vector<std::shared_ptr<Channel>> channels = {scheduler.submit(jobs[0]), scheduler.submit(jobs[1])};
    gate->entered.get_future().wait();
    channels.push_back(scheduler.submit(jobs[2]));
    gate->release.set_value();
    for (const auto& c : channels) ASSERT_TRUE(c);
    uint64_t expected_rows = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const Result got = drain(*channels[i]);
      expect_same(got, want[i], fmt::format("step_tokens {}, request {}", step_tokens, i));
      // Prompt rows, then one decode row per token after the first (and one for an end of sequence).
      expected_rows += jobs[i].prompt.size() - got.cached + got.usage.completion_tokens - 1 +
                       (got.finish == FinishReason::Stop ? 1 : 0);
    }
    const std::string what = fmt::format("step_tokens {}", step_tokens);
    EXPECT_EQ(model_->passes() - passes, scheduler.steps()) << what;
    EXPECT_EQ(model_->positions_pushed() - pushed, scheduler.rows()) << what;
    EXPECT_EQ(scheduler.rows(), expected_rows) << what;
    EXPECT_GE(scheduler.mixed_steps(), 1u) << what;
    EXPECT_LE(scheduler.max_mixed_rows(), step_tokens) << what;
    // Two decode rows leave step_tokens - 2 prompt rows per step (at least 1): the prompt took
    // at least that many passes.
    const size_t per_step = step_tokens > 2 ? step_tokens - 2 : 1;
    EXPECT_GE(channels[2]->prefill_chunks(), (jobs[2].prompt.size() + per_step - 1) / per_step) << what;
  }
}

TEST_F(ServeScheduler, ZeroTokensAndContextFullEndAsLength) {
  Scheduler scheduler(*model_, *tok_, {.parallel = 2, .queue = 2}, metrics_);
  const Result zero = drain(*scheduler.submit(job("the cat", 0, kGreedy)));
  EXPECT_EQ(zero.text, "");
  EXPECT_EQ(zero.finish, FinishReason::Length);
  EXPECT_EQ(zero.usage.completion_tokens, 0u);
  // Sampling without eos so the sequence runs into the context end (96 positions).
  Job full = job("the cat", 1000, {.temperature = 1.0, .seed = 3});
  full.eos_ids.clear();
  const Result r = drain(*scheduler.submit(full));
  EXPECT_EQ(r.finish, FinishReason::Length);
  EXPECT_EQ(r.usage.completion_tokens, 96 - full.prompt.size() + 1);
}

TEST_F(ServeScheduler, AFullQueueRefusesAndCancelledRequestsEnd) {
  // One slot and no waiting place: whether or not the first request has been admitted yet,
  // the second finds no room.
  // The tiny model can run the first request's 90 tokens to their end while this thread is
  // descheduled between the two submits; then the second is rightly taken. Such a round must
  // show the first ended by its length, and the next round tries again.
  Scheduler scheduler(*model_, *tok_, {.parallel = 1, .queue = 0}, metrics_);
  Job endless = job("the cat", 90, {.temperature = 1.0, .seed = 1});
  endless.eos_ids.clear();
  std::shared_ptr<Channel> a;
  bool refused = false;
  for (int round = 0; round < 20 && !refused; ++round) {
    a = scheduler.submit(endless);
    ASSERT_TRUE(a);
    const std::shared_ptr<Channel> b = scheduler.submit(endless);
    refused = b == nullptr;
    if (!refused) {
      const Result first = drain(*a);
      EXPECT_EQ(first.finish, FinishReason::Length);
      EXPECT_EQ(first.usage.completion_tokens, 90u);
      drain(*b);
    }
  }
  ASSERT_TRUE(refused) << "the second request found room in 20 rounds";
  a->cancel();
  const Result r = drain(*a);
  EXPECT_EQ(r.outcome, Outcome::Cancelled);
  EXPECT_LT(r.usage.completion_tokens, 90u);
  EXPECT_EQ(scheduler.active(), 0u);
  EXPECT_TRUE(scheduler.submit(job("the cat", 2, kGreedy)));
}

// --queue is strict: of a burst of requests, exactly parallel + queue are
// taken, whatever the scheduler thread is doing meanwhile (taking some from the queue, starting
// them), and the reported queue depth never passes --queue.
TEST_F(ServeScheduler, TheQueueBoundIsStrict) {
  constexpr size_t kParallel = 2, kQueue = 3, kBurst = 12;
  Scheduler scheduler(*model_, *tok_, {.parallel = kParallel, .queue = kQueue}, metrics_);
  Job endless = job("the cat", 90, {.temperature = 1.0, .seed = 1});
  endless.eos_ids.clear();
  // The tiny model can run a request to its context's end (96 positions) while the test thread
  // is descheduled mid-burst, which frees a place: a burst takes exactly parallel + queue, plus
  // at most one more for each request that ended before the burst did.
  const auto ended = [](const std::vector<std::shared_ptr<Channel>>& channels) {
    return static_cast<size_t>(std::count_if(channels.begin(), channels.end(),
                                             [](const auto& c) { return c->outcome() != Outcome::Running; }));
  };
  std::vector<std::shared_ptr<Channel>> taken;
  size_t refused = 0, deepest = 0;
  for (size_t i = 0; i < kBurst; ++i) {
    if (auto c = scheduler.submit(endless)) {
      taken.push_back(std::move(c));
    } else {
      ++refused;
    }
    deepest = std::max(deepest, scheduler.queue_depth());
  }
  const size_t ended_in_burst = ended(taken);
  EXPECT_GE(taken.size(), kParallel + kQueue);
  EXPECT_LE(taken.size(), kParallel + kQueue + ended_in_burst);
  EXPECT_EQ(refused + taken.size(), kBurst);
  EXPECT_LE(deepest, kQueue);
  EXPECT_LE(scheduler.holding(), kParallel + kQueue);
  // Cancelled, queued or running, every request gives its place back.
  for (auto& c : taken) c->cancel();
  for (auto& c : taken) EXPECT_NE(drain(*c).outcome, Outcome::Running);
  EXPECT_EQ(scheduler.holding(), 0u);
  EXPECT_EQ(scheduler.queue_depth(), 0u);
  std::vector<std::shared_ptr<Channel>> again;
  for (size_t i = 0; i < kBurst; ++i) {
    if (auto c = scheduler.submit(endless)) again.push_back(std::move(c));
  }
  const size_t ended_again = ended(again);
  EXPECT_GE(again.size(), kParallel + kQueue);
  EXPECT_LE(again.size(), kParallel + kQueue + ended_again);
}

// A request cancelled while it waits (its client left) is dropped from the queue without
// running, and its place is free for another while the running request goes on.
TEST_F(ServeScheduler, ACancelledWaitingRequestNeverRuns) {
  Scheduler scheduler(*model_, *tok_, {.parallel = 1, .queue = 1}, metrics_);
  Job endless = job("the cat", 90, {.temperature = 1.0, .seed = 1});
  endless.eos_ids.clear();
  auto running = scheduler.submit(endless);
  auto waiting = scheduler.submit(endless);
  ASSERT_TRUE(running && waiting);
  // One running, one waiting, a queue of one: a third is refused, unless the first had already
  // ended (on a loaded machine its 90 tokens can reach the context's end first).
  auto third = scheduler.submit(endless);
  if (third) {
    EXPECT_TRUE(running->wait_closed(std::chrono::milliseconds(0))) << "a third request got in while two were held";
    third->cancel();
    drain(*third);
  }
  waiting->cancel();
  const Result w = drain(*waiting);
  if (!third) {  // it never left the queue
    EXPECT_EQ(w.outcome, Outcome::Cancelled);
    EXPECT_EQ(w.usage.completion_tokens, 0u);
  }
  running->cancel();
  drain(*running);
  EXPECT_EQ(scheduler.holding(), 0u);
}

TEST_F(ServeScheduler, ShutdownReleasesEveryWaiter) {
  auto scheduler = std::make_unique<Scheduler>(*model_, *tok_, SchedulerOptions{.parallel = 1, .queue = 4}, metrics_);
  Job endless = job("the cat", 90, {.temperature = 1.0, .seed = 1});
  endless.eos_ids.clear();
  auto a = scheduler->submit(endless);
  auto b = scheduler->submit(endless);
  scheduler->shutdown();
  EXPECT_NE(drain(*a).outcome, Outcome::Running);
  EXPECT_EQ(drain(*b).outcome, Outcome::Cancelled);
  EXPECT_FALSE(scheduler->submit(endless));
}

// A model whose finite weights overflow an activation (layer 1's ffn norm at 3e38) held as int8,
// whose products round their inputs to integers: every request fails with the layer named,
// never finishes with the text of the finite garbage the rounding made of the infinities.
TEST_F(ServeScheduler, ANonFiniteActivationFailsTheRequestNamingTheLayer) {
  test::fill_f32_tensor(dir_.path(), "model.layers.1.post_attention_layernorm.weight", 3e38f);
  ModelOptions options;
  options.threads = 1;
  options.max_context = 96;
  options.weights = WeightType::Q8_0;
  const Model broken = open_model_alone(dir_.path(), options);
  Scheduler scheduler(broken, *tok_, {.parallel = 2, .queue = 4}, metrics_);
  auto a = scheduler.submit(job("the cat", 8, kGreedy));
  auto b = scheduler.submit(job("Once upon a time", 8, {.temperature = 0.9, .seed = 7}));
  ASSERT_TRUE(a && b);
  for (const auto& channel : {a, b}) {
    const Result r = drain(*channel);
    EXPECT_EQ(r.outcome, Outcome::Failed) << r.text;
    EXPECT_EQ(r.text, "");
    EXPECT_NE(channel->error().find("non-finite activation in layer 1 (ffn_norm at position "), std::string::npos)
        << channel->error();
  }
}

}  // namespace
}  // namespace nanoinfer::serve
