// Several sequences on one loaded model: the weights are shared and immutable, everything a
// forward pass writes belongs to its Sequence, so interleaving two conversations step by step
// (or running them from two threads at once) must give each bitwise the logits it gets alone.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "support/checks.h"

namespace nanoinfer {
namespace {

using test::argmax;

namespace fs = std::filesystem;

fs::path tiny(const char* name) {
  return fs::path(NANOINFER_SOURCE_DIR) / "tests/data/models" / name;
}

// A prefill of `prompt`, then `steps` greedy decode steps: the logits of every call, in order.
struct StepLog {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> next;  // the token the last logits chose
};

// One step of a run: the prefill when the run is empty, else the decode of its last choice.
void step(const Model& model, Sequence& seq, const std::vector<int32_t>& prompt, StepLog& run) {
  const std::span<const float> out =
      run.logits.empty() ? model.forward(prompt, seq) : model.forward({&run.next.back(), 1}, seq);
  run.logits.emplace_back(out.begin(), out.end());
  run.next.push_back(argmax(out));
}

const std::vector<int32_t> kPromptA = {3, 14, 15, 92, 65, 35, 89, 79, 32, 38, 46, 26};
const std::vector<int32_t> kPromptB = {27, 18, 28, 18, 28};
constexpr int kSteps = 12;

StepLog alone(const Model& model, const std::vector<int32_t>& prompt) {
  Sequence seq = model.new_sequence();
  StepLog run;
  for (int i = 0; i <= kSteps; ++i) step(model, seq, prompt, run);
  return run;
}

TEST(Sequences, InterleavedStepByStepMatchAloneBitwise) {
  for (const char* name : {"tiny-gqa7", "tiny-bf16", "tiny-untied"}) {
    const Model model = open_model_alone(tiny(name), {.threads = 2});
    const StepLog a_alone = alone(model, kPromptA), b_alone = alone(model, kPromptB);

    Sequence a = model.new_sequence(), b = model.new_sequence(64);
    StepLog a_run, b_run;
    for (int i = 0; i <= kSteps; ++i) {
      step(model, a, kPromptA, a_run);
      step(model, b, kPromptB, b_run);
    }
    ASSERT_EQ(a_run.logits.size(), a_alone.logits.size());
    for (size_t i = 0; i < a_run.logits.size(); ++i) {
      EXPECT_TRUE(test::same_bits(a_run.logits[i], a_alone.logits[i])) << name << " A step " << i;
      EXPECT_TRUE(test::same_bits(b_run.logits[i], b_alone.logits[i])) << name << " B step " << i;
    }
    EXPECT_EQ(a.length(), kPromptA.size() + kSteps);
    EXPECT_EQ(b.length(), kPromptB.size() + kSteps);
    EXPECT_EQ(a.positions_pushed(), kPromptA.size() + kSteps);
    // The model counts every sequence's positions: two alone runs and the interleaved pair.
    EXPECT_EQ(model.positions_pushed(), 2 * (kPromptA.size() + kPromptB.size() + 2 * kSteps));
  }
}

// Calls from two threads are serialized by the model; each sequence still gets its own logits.
TEST(Sequences, TwoThreadsOnOneModelMatchAloneBitwise) {
  const Model model = open_model_alone(tiny("tiny-gqa7"), {.threads = 2});
  const StepLog a_alone = alone(model, kPromptA), b_alone = alone(model, kPromptB);
  StepLog a_run, b_run;
  std::thread other([&] {
    Sequence b = model.new_sequence();
    for (int i = 0; i <= kSteps; ++i) step(model, b, kPromptB, b_run);
  });
  Sequence a = model.new_sequence();
  for (int i = 0; i <= kSteps; ++i) step(model, a, kPromptA, a_run);
  other.join();
  for (size_t i = 0; i < a_alone.logits.size(); ++i) {
    EXPECT_TRUE(test::same_bits(a_run.logits[i], a_alone.logits[i])) << "A step " << i;
    EXPECT_TRUE(test::same_bits(b_run.logits[i], b_alone.logits[i])) << "B step " << i;
  }
}

// A batched decode step streams the weights once for all sequences; each sequence still gets
// bitwise its own logits, whatever the others' lengths.
TEST(Sequences, BatchedDecodeMatchesAloneBitwise) {
  for (const char* name : {"tiny-gqa7", "tiny-bf16"}) {
    const Model model = open_model_alone(tiny(name), {.threads = 2});
    const std::vector<std::vector<int32_t>> prompts = {kPromptA, kPromptB, {7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
    std::vector<StepLog> expected;
    for (const auto& p : prompts) expected.push_back(alone(model, p));

    std::vector<Sequence> seqs;
    std::vector<StepLog> got(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      seqs.push_back(model.new_sequence());
      step(model, seqs[i], prompts[i], got[i]);  // prefills, one by one
    }
    std::vector<Sequence*> batch;
    for (auto& s : seqs) batch.push_back(&s);
    const uint64_t before = model.positions_pushed();
    for (int i = 0; i < kSteps; ++i) {
      std::vector<int32_t> tokens;
      for (const auto& g : got) tokens.push_back(g.next.back());
      model.decode(batch, tokens);
      for (size_t b = 0; b < seqs.size(); ++b) {
        const auto out = seqs[b].logits();
        got[b].logits.emplace_back(out.begin(), out.end());
        got[b].next.push_back(argmax(out));
      }
    }
    EXPECT_EQ(model.positions_pushed() - before, prompts.size() * kSteps);
    for (size_t b = 0; b < prompts.size(); ++b) {
      ASSERT_EQ(got[b].logits.size(), expected[b].logits.size());
      for (size_t i = 0; i < got[b].logits.size(); ++i) {
        EXPECT_TRUE(test::same_bits(got[b].logits[i], expected[b].logits[i])) << name << " seq " << b << " step " << i;
      }
    }
  }
}

// Speculative verification in a batch: each sequence pushes several rows (its pending token
// and drafts) in one step, and every row is bitwise the logits of pushing that token alone
// after the ones before it.
TEST(Sequences, BatchedDecodeOfSeveralRowsPerSequenceMatchesSingleStepsBitwise) {
  for (const char* name : {"tiny-gqa7", "tiny-bf16"}) {
    const Model model = open_model_alone(tiny(name), {.threads = 2});
    const size_t V = model.vocab_size();
    const std::vector<std::vector<int32_t>> prompts = {kPromptA, kPromptB, {7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
    const std::vector<std::vector<int32_t>> rows = {{11, 12, 13}, {14}, {15, 16, 17, 18, 19}, {20, 21}};
    std::vector<Sequence> seqs;
    std::vector<Sequence*> batch;
    std::vector<int32_t> tokens;
    std::vector<size_t> counts;
    for (size_t b = 0; b < prompts.size(); ++b) {
      seqs.push_back(model.new_sequence());
      model.forward(prompts[b], seqs.back());
      tokens.insert(tokens.end(), rows[b].begin(), rows[b].end());
      counts.push_back(rows[b].size());
    }
    for (auto& s : seqs) batch.push_back(&s);
    const uint64_t before = model.positions_pushed();
    model.decode(batch, tokens, counts);
    EXPECT_EQ(model.positions_pushed() - before, tokens.size());
    for (size_t b = 0; b < prompts.size(); ++b) {
      Sequence single = model.new_sequence();
      model.forward(prompts[b], single);
      const std::span<const float> got = seqs[b].logits();
      ASSERT_EQ(got.size(), rows[b].size() * V) << name << " seq " << b;
      EXPECT_EQ(seqs[b].length(), prompts[b].size() + rows[b].size());
      for (size_t r = 0; r < rows[b].size(); ++r) {
        const std::span<const float> want = model.forward({&rows[b][r], 1}, single);
        EXPECT_TRUE(test::same_bits(std::vector<float>(want.begin(), want.end()),
                                    std::vector<float>(got.begin() + static_cast<ptrdiff_t>(r * V),
                                                       got.begin() + static_cast<ptrdiff_t>((r + 1) * V))))
            << name << " seq " << b << " row " << r;
      }
    }
    // Bad counts are refused before any work.
    const std::vector<size_t> short_counts = {1, 1, 1};
    EXPECT_THROW(model.decode(batch, tokens, short_counts), Error);  // 4 sequences, 3 counts
    const std::vector<size_t> zero = {3, 0, 5, 3};
    EXPECT_THROW(model.decode(batch, tokens, zero), Error);
    const std::vector<size_t> too_many = {3, 1, 5, 3};
    EXPECT_THROW(model.decode(batch, tokens, too_many), Error);  // 12 counted, 11 tokens
    EXPECT_EQ(seqs[1].length(), prompts[1].size() + 1);
  }
}

// serve's mixed steps: prompts prefilled a chunk at a time ride in the decode steps of running
// sequences, every step one forward pass. The decoding sequences' logits are bitwise those of
// decoding alone, a prompt's last chunk gives bitwise the logits of its forward alone (its
// other chunks none), and the sequence then decodes on bitwise as after that forward.
TEST(Sequences, MixedStepsOfPromptChunksAndDecodeRowsMatchAloneBitwise) {
  struct Case {
    const char* name;
    std::optional<WeightType> weights;
  };
  for (const Case& c :
       {Case{"tiny-gqa7", std::nullopt}, Case{"tiny-bf16", std::nullopt}, Case{"tiny-gqa7", WeightType::Q8_0}}) {
    const Model model = open_model_alone(tiny(c.name), {.weights = c.weights, .threads = 2});
    const size_t V = model.vocab_size();
    const std::vector<std::vector<int32_t>> decoders = {kPromptA, {7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
    std::vector<int32_t> long_prompt;  // 23 tokens: chunks of 5, 5, 5, 5, 3
    for (int32_t t = 0; t < 23; ++t) long_prompt.push_back((t * 37 + 11) % 90 + 1);
    std::vector<int32_t> late_prompt = kPromptB;  // joins at the third step, chunks of 2
    std::vector<StepLog> expected;
    for (const auto& p : decoders) expected.push_back(alone(model, p));

    std::vector<Sequence> seqs;
    std::vector<StepLog> got(decoders.size());
    for (size_t i = 0; i < decoders.size(); ++i) {
      seqs.push_back(model.new_sequence());
      step(model, seqs[i], decoders[i], got[i]);
    }
    Sequence longer = model.new_sequence(), late = model.new_sequence();
    size_t long_done = 0, late_done = 0, steps = 0, rows = 0;
    const uint64_t passes_before = model.passes(), pushed_before = model.positions_pushed();
    std::vector<float> long_last, late_last;
    for (int i = 0; i < kSteps; ++i) {
      std::vector<Sequence*> batch;
      std::vector<int32_t> tokens;
      std::vector<size_t> counts, outputs;
      for (size_t b = 0; b < seqs.size(); ++b) {
        batch.push_back(&seqs[b]);
        tokens.push_back(got[b].next.back());
        counts.push_back(1);
        outputs.push_back(1);
      }
      // A prompt chunk goes first in some steps (the step then runs in its buffers), last in others.
      const auto add_chunk = [&](Sequence& s, const std::vector<int32_t>& p, size_t& done, size_t chunk, bool front) {
        const size_t n = std::min(chunk, p.size() - done);
        if (n == 0) return;
        const auto at = front ? 0 : batch.size();
        const size_t row = front ? 0 : tokens.size();
        batch.insert(batch.begin() + static_cast<ptrdiff_t>(at), &s);
        tokens.insert(tokens.begin() + static_cast<ptrdiff_t>(row), p.begin() + static_cast<ptrdiff_t>(done),
                      p.begin() + static_cast<ptrdiff_t>(done + n));
        counts.insert(counts.begin() + static_cast<ptrdiff_t>(at), n);
        outputs.insert(outputs.begin() + static_cast<ptrdiff_t>(at), done + n == p.size() ? 1 : 0);
        done += n;
      };
      const size_t long_before = long_done, late_before = late_done;
      add_chunk(longer, long_prompt, long_done, 5, i % 2 == 0);
      if (i >= 2) add_chunk(late, late_prompt, late_done, 2, false);
      model.decode(batch, tokens, counts, outputs);
      ++steps;
      rows += tokens.size();
      for (size_t b = 0; b < seqs.size(); ++b) {
        const auto out = seqs[b].logits();
        ASSERT_EQ(out.size(), V);
        got[b].logits.emplace_back(out.begin(), out.end());
        got[b].next.push_back(argmax(out));
      }
      // Chunks before the last ask for no logits; the last for one row.
      if (long_done > long_before) {
        EXPECT_EQ(longer.logits().size(), long_done == long_prompt.size() ? V : 0u) << c.name << " step " << i;
        if (long_done == long_prompt.size()) long_last.assign(longer.logits().begin(), longer.logits().end());
      }
      if (late_done > late_before && late_done == late_prompt.size()) {
        ASSERT_EQ(late.logits().size(), V);
        late_last.assign(late.logits().begin(), late.logits().end());
      }
    }
    // Work: one pass per step, every row pushed once.
    EXPECT_EQ(model.passes() - passes_before, steps);
    EXPECT_EQ(model.positions_pushed() - pushed_before, rows);
    EXPECT_EQ(rows, decoders.size() * kSteps + long_prompt.size() + late_prompt.size());
    ASSERT_EQ(long_done, long_prompt.size());
    ASSERT_EQ(late_done, late_prompt.size());
    for (size_t b = 0; b < decoders.size(); ++b) {
      ASSERT_EQ(got[b].logits.size(), expected[b].logits.size());
      for (size_t i = 0; i < got[b].logits.size(); ++i) {
        EXPECT_TRUE(test::same_bits(got[b].logits[i], expected[b].logits[i]))
            << c.name << " seq " << b << " step " << i;
      }
    }
    // The prompts' last logits, and a decode step after them, as alone.
    for (auto [seq, prompt, last] :
         {std::tuple{&longer, &long_prompt, &long_last}, std::tuple{&late, &late_prompt, &late_last}}) {
      Sequence single = model.new_sequence();
      const auto want = model.forward(*prompt, single);
      EXPECT_TRUE(test::same_bits(*last, std::vector<float>(want.begin(), want.end())))
          << c.name << " prompt of " << prompt->size();
      const auto next = static_cast<int32_t>(argmax(want));
      const auto a = model.forward({&next, 1}, *seq);
      const std::vector<float> after(a.begin(), a.end());
      const auto b = model.forward({&next, 1}, single);
      EXPECT_TRUE(test::same_bits(after, std::vector<float>(b.begin(), b.end())))
          << c.name << " after the prompt of " << prompt->size();
    }
  }
}

TEST(Sequences, MixedStepsRefuseBadOutputCounts) {
  const Model model = open_model_alone(tiny("tiny-gqa7"), {.threads = 1});
  Sequence a = model.new_sequence(), b = model.new_sequence();
  Sequence* batch[2] = {&a, &b};
  const int32_t tokens[4] = {1, 2, 3, 4};
  const size_t counts[2] = {1, 3};
  const size_t too_many[2] = {1, 4}, too_few[1] = {1};
  EXPECT_THROW(model.decode(batch, tokens, counts, too_many), Error);  // 4 logits rows of 3 tokens
  EXPECT_THROW(model.decode(batch, tokens, counts, too_few), Error);   // 2 sequences, 1 output count
  EXPECT_EQ(a.length() + b.length(), 0u);
  const uint64_t passes = model.passes();
  const size_t none[2] = {0, 0};
  model.decode(batch, tokens, counts, none);  // a step may ask for no logits at all
  EXPECT_EQ(model.passes(), passes + 1);
  EXPECT_EQ(a.length(), 1u);
  EXPECT_EQ(b.length(), 3u);
  EXPECT_TRUE(a.logits().empty());
  EXPECT_TRUE(b.logits().empty());
}

// The last layer carries on only the rows whose logits are wanted (the others' outputs are
// read by nothing): a prompt's logits are bitwise the last row of forward(all_logits), which
// drops nothing, and of a run with a tap set (a tap sees every row, so nothing is dropped). In
// a batched step a part asking for some of its rows, beside one asking for none, gets those
// rows' logits as all_logits does, and both caches are whole (the next step matches).
TEST(Sequences, TheLastLayerRunsOnlyTheRowsWithLogitsBitwise) {
  struct Case {
    const char* name;
    std::optional<WeightType> weights;
  };
  for (const Case& c : {Case{"tiny-gqa7", std::nullopt}, Case{"tiny-bf16", std::nullopt},
                        Case{"tiny-qwen3", std::nullopt}, Case{"tiny-gqa7", WeightType::Q8_0}}) {
    const Model model = open_model_alone(tiny(c.name), {.weights = c.weights, .threads = 2});
    const size_t V = model.vocab_size();
    const auto last_row = [&](std::span<const float> all) { return std::vector<float>(all.end() - V, all.end()); };

    Sequence pruned = model.new_sequence(), whole = model.new_sequence(), tapped = model.new_sequence();
    const auto p = model.forward(kPromptA, pruned);
    const std::vector<float> got(p.begin(), p.end());
    ASSERT_EQ(got.size(), V);
    EXPECT_TRUE(test::same_bits(got, last_row(model.forward(kPromptA, whole, true)))) << c.name;
    size_t events = 0;
    tapped.set_tap([&events](const TapEvent&) { ++events; });
    const auto t = model.forward(kPromptA, tapped);
    EXPECT_TRUE(test::same_bits(got, std::vector<float>(t.begin(), t.end()))) << c.name;
    EXPECT_GT(events, 0u);

    // A batch: 5 tokens of which the last 2 want logits, then 3 that want none.
    const std::vector<int32_t> five = {11, 22, 33, 44, 55}, three = {66, 77, 88};
    Sequence x = model.new_sequence(), y = model.new_sequence();
    Sequence* batch[] = {&x, &y};
    std::vector<int32_t> tokens = five;
    tokens.insert(tokens.end(), three.begin(), three.end());
    const size_t counts[] = {5, 3}, outputs[] = {2, 0};
    model.decode(batch, tokens, counts, outputs);
    const std::vector<float> x_rows(x.logits().begin(), x.logits().end());
    EXPECT_TRUE(y.logits().empty());
    Sequence x_alone = model.new_sequence(), y_alone = model.new_sequence();
    const auto all = model.forward(five, x_alone, true);
    ASSERT_EQ(x_rows.size(), 2 * V);
    EXPECT_TRUE(test::same_bits(x_rows, std::vector<float>(all.end() - 2 * V, all.end()))) << c.name;
    model.forward(three, y_alone);
    const int32_t next = 9;
    for (auto [seq, alone_seq] : {std::pair{&x, &x_alone}, std::pair{&y, &y_alone}}) {
      const auto a = model.forward({&next, 1}, *seq);
      const std::vector<float> after(a.begin(), a.end());
      const auto b = model.forward({&next, 1}, *alone_seq);
      EXPECT_TRUE(test::same_bits(after, std::vector<float>(b.begin(), b.end()))) << c.name;
    }
  }
}

// One named intermediate as a tap saw it, its floats copied.
struct TapRecord {
  std::string name;
  int layer;
  size_t position, n_tokens, dim;
  std::vector<float> data;
  bool operator==(const TapRecord& o) const {
    return name == o.name && layer == o.layer && position == o.position && n_tokens == o.n_tokens && dim == o.dim &&
           test::same_bits(data, o.data);
  }
};

Tap recorder(std::vector<TapRecord>& out) {
  return [&out](const TapEvent& e) {
    out.push_back({std::string(e.name), e.layer, e.position, e.n_tokens, e.dim,
                   std::vector<float>(e.data, e.data + e.n_tokens * e.dim)});
  };
}

// The layer loop is one for prefill chunks and batched steps: in a batch each sequence's tap
// sees its own row of every intermediate, exactly as a forward of that one token shows it.
TEST(Sequences, BatchedDecodeShowsEachTapItsOwnRows) {
  const Model model = open_model_alone(tiny("tiny-gqa7"), {.threads = 2});
  const std::vector<std::vector<int32_t>> prompts = {kPromptA, kPromptB, {7}};
  const std::vector<int32_t> tokens = {11, 12, 13};
  std::vector<std::vector<TapRecord>> expected(prompts.size()), got(prompts.size());
  std::vector<Sequence> seqs;
  std::vector<Sequence*> batch;
  for (size_t b = 0; b < prompts.size(); ++b) {
    Sequence alone_seq = model.new_sequence();
    model.forward(prompts[b], alone_seq);
    alone_seq.set_tap(recorder(expected[b]));
    model.forward({&tokens[b], 1}, alone_seq);
    seqs.push_back(model.new_sequence());
    model.forward(prompts[b], seqs.back());
  }
  for (size_t b = 0; b < seqs.size(); ++b) {
    seqs[b].set_tap(recorder(got[b]));
    batch.push_back(&seqs[b]);
  }
  model.decode(batch, tokens);
  for (size_t b = 0; b < seqs.size(); ++b) {
    ASSERT_EQ(got[b].size(), expected[b].size()) << "seq " << b;
    for (size_t i = 0; i < got[b].size(); ++i) {
      EXPECT_TRUE(got[b][i] == expected[b][i])
          << "seq " << b << ": " << got[b][i].name << " of layer " << got[b][i].layer;
    }
  }
}

// forward_hidden is forward(all_logits) without the head: a tap sees the same intermediates
// bit for bit ("final_norm" for every position), and the sequence then goes on exactly as
// after forward.
TEST(Sequences, ForwardHiddenIsForwardWithoutTheHead) {
  const Model model = open_model_alone(tiny("tiny-gqa7"), {.threads = 2});
  std::vector<TapRecord> with_head, hidden;
  Sequence a = model.new_sequence(), b = model.new_sequence();
  a.set_tap(recorder(with_head));
  b.set_tap(recorder(hidden));
  model.forward(kPromptA, a, true);
  model.forward_hidden(kPromptA, b);
  ASSERT_EQ(hidden.size(), with_head.size());
  for (size_t i = 0; i < hidden.size(); ++i) EXPECT_TRUE(hidden[i] == with_head[i]) << i << ": " << hidden[i].name;
  ASSERT_FALSE(hidden.empty());
  EXPECT_EQ(hidden.back().name, "final_norm");
  EXPECT_EQ(hidden.back().n_tokens, kPromptA.size());
  EXPECT_EQ(b.length(), kPromptA.size());
  a.set_tap({});
  b.set_tap({});
  const int32_t next = 5;
  const auto la = model.forward({&next, 1}, a), lb = model.forward({&next, 1}, b);
  EXPECT_TRUE(test::same_bits(std::vector<float>(la.begin(), la.end()), std::vector<float>(lb.begin(), lb.end())));
}

TEST(Sequences, BatchedDecodeRefusesBadBatchesBeforeAnyWork) {
  const Model model = open_model_alone(tiny("tiny-gqa7"), {.threads = 1});
  Sequence a = model.new_sequence(), full = model.new_sequence(2);
  model.forward(std::vector<int32_t>{1, 2}, full);
  const int32_t t2[2] = {1, 2};
  Sequence* twice[2] = {&a, &a};
  EXPECT_THROW(model.decode(twice, t2), Error);
  Sequence* with_full[2] = {&a, &full};
  EXPECT_THROW(model.decode(with_full, t2), Error);
  Sequence* one[1] = {&a};
  const int32_t bad[1] = {-1};
  EXPECT_THROW(model.decode(one, bad), Error);
  EXPECT_THROW(model.decode(one, t2), Error);  // 1 sequence, 2 tokens
  const size_t three[1] = {3};
  const int32_t t3[3] = {1, 2, 3};
  Sequence* full_one[1] = {&full};
  EXPECT_THROW(model.decode(full_one, t3, three), Error);  // no room for 3 rows
  EXPECT_EQ(a.length(), 0u);
  EXPECT_EQ(full.length(), 2u);
}

TEST(Sequences, ASequenceBelongsToItsModel) {
  const Model m1 = open_model_alone(tiny("tiny-gqa7"), {.threads = 1});
  const Model m2 = open_model_alone(tiny("tiny-gqa7"), {.threads = 1});
  Sequence s = m1.new_sequence();
  try {
    m2.forward(kPromptB, s);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to a different model"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s.length(), 0u);
}

}  // namespace
}  // namespace nanoinfer
