// The work a decode step does, counted exactly: thread-pool barriers (fork-joins), heap
// allocations, and weight bytes streamed. Each expectation is derived from the model's shape
// in the test itself, so a change to the forward pass (fusing products, a new barrier) shows
// up here as a count to re-derive, not as a silently different speed.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include "model/linear.h"
#include "model/ops.h"
#include "nanoinfer/config.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/model.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/synth.h"
#include "nanoinfer/thread_pool.h"
#include "nanoinfer/tokenizer.h"
#include "nanoinfer/weight_type.h"
#include "support/checks.h"
#include "support/files.h"

// ---- counting allocator -----------------------------------------------------------------
// Replaces the global operator new/delete of the test binary. Counting is off except inside
// an AllocationCounter scope; while on, every thread's allocations count (the pool's workers
// included), since the flag and the counter are process-wide.
// These operators pair malloc with free by design; GCC, seeing `delete new T` inlined into
// them, would call that a mismatch.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace {

std::atomic<bool> g_counting{false};
std::atomic<uint64_t> g_allocations{0};

void* allocate(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}

void* allocate_aligned(std::size_t size, std::align_val_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t a = static_cast<std::size_t>(align);
  const std::size_t rounded = (size + a - 1) / a * a;  // aligned_alloc wants a multiple
  return std::aligned_alloc(a, rounded == 0 ? a : rounded);
}

}  // namespace

void* operator new(std::size_t size) {
  if (void* p = allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) {
  if (void* p = allocate(size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return allocate(size);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return allocate(size);
}
void* operator new(std::size_t size, std::align_val_t align) {
  if (void* p = allocate_aligned(size, align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size, std::align_val_t align) {
  if (void* p = allocate_aligned(size, align)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, align);
}
void* operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t&) noexcept {
  return allocate_aligned(size, align);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

class AllocationCounter {
 public:
  AllocationCounter() {
    g_allocations.store(0);
    g_counting.store(true);
  }
  ~AllocationCounter() { g_counting.store(false); }
  uint64_t count() const { return g_allocations.load(); }
};

// The counter itself must be able to fail: allocations on the caller and on a worker count.
// (Explicit ::operator new calls: the compiler may drop a `delete new T` pair entirely.)
TEST(WorkCounts, TheAllocationCounterSeesEveryThread) {
  ThreadPool pool(2);
  uint64_t seen = 0;
  {
    AllocationCounter counter;
    ::operator delete(::operator new(100));
    ::operator delete[](::operator new[](100));
    // Every chunk, on whichever thread runs it, allocates once.
    pool.parallel_for(64, 1, [](size_t, size_t) { ::operator delete(::operator new(16)); });
    seen = counter.count();
  }
  EXPECT_EQ(seen, 2u + 8u);  // the two above and the 8 chunks of 64 grains on 2 threads
  {
    AllocationCounter counter;
    EXPECT_EQ(counter.count(), 0u);
  }
}

// ---- a model whose products straddle the split threshold ----------------------------------
// hidden 1024 (8 heads of 128, 2 KV heads: kv_dim 256), intermediate 1536, vocab 512, tied,
// 2 layers, bf16. Per token: q|k|v 1536 x 1024, o 1024 x 1024, gate|up 3072 x 1024 and down
// 1024 x 1536 are above kMinParallelLinearWork; the logits matrix (512 x 1024) is below it
// for one token and above it for 3 tokens at once.
constexpr const char* kSplitConfig = R"({
  "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
  "hidden_size": 1024, "intermediate_size": 1536, "num_hidden_layers": 2,
  "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 512,
  "max_position_embeddings": 512, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
  "torch_dtype": "bfloat16", "use_sliding_window": false, "tie_word_embeddings": true
})";

struct SplitModel {
  test::TempDir dir;
  Model model;
  explicit SplitModel(int threads) : model(make(dir, threads)) {}
  static Model make(const test::TempDir& dir, int threads) {
    test::write_text(dir / "config.json", kSplitConfig);
    write_synthetic_weights(ModelConfig::load(dir / "config.json"), dir / "model.safetensors", {.seed = 7});
    return open_model_alone(dir.path(), {.threads = threads});
  }
};

// Fork-joins of one linear() call: the product is shared iff it has at least
// kMinParallelLinearWork multiply-adds (every matrix here has >= 2 row grains of 16, so a
// shared product is always cut into several chunks).
uint64_t linear_joins(size_t rows, size_t cols, size_t tokens) {
  return rows * cols * tokens >= kMinParallelLinearWork ? 1 : 0;
}
// Fork-joins of one attention() call over n_keys keys for `tokens` queries.
uint64_t attention_joins(const ModelConfig& c, size_t tokens, size_t n_keys) {
  const size_t work = static_cast<size_t>(c.num_attention_heads * c.head_dim()) * tokens * n_keys;
  return work >= kMinParallelAttentionWork ? 1 : 0;
}

// One decode step of B sequences whose caches hold `lengths[b]` positions: per layer the
// q|k|v, o, gate|up and down products over B rows, then one attention call per sequence
// (one query over length + 1 keys); then the logits product over B rows. rmsnorm, RoPE,
// SwiGLU and the residual adds run on the caller and join nothing.
uint64_t expected_step_joins(const ModelConfig& c, const std::vector<size_t>& lengths) {
  const size_t H = c.hidden_size, KV = c.kv_dim(), I = c.intermediate_size, V = c.vocab_size;
  const size_t B = lengths.size();
  // Loading fuses q, k, v into one product of H + 2 KV rows and gate, up into one of 2 I rows
  // (model/linear.h), so a layer has four products: q|k|v, o, gate|up, down.
  uint64_t per_layer =
      linear_joins(H + 2 * KV, H, B) + linear_joins(H, H, B) + linear_joins(2 * I, H, B) + linear_joins(H, I, B);
  for (size_t len : lengths) per_layer += attention_joins(c, 1, len + 1);
  return static_cast<uint64_t>(c.num_hidden_layers) * per_layer + linear_joins(V, H, B);
}

TEST(WorkCounts, BarriersPerDecodeStepFollowTheLayerStructure) {
  SplitModel m(2);
  const ModelConfig& c = m.model.config();
  // The derivation, spelled out for this config: per layer q|k|v, o, gate|up, down = 4 joins,
  // the logits matrix none; attention joins from 384 keys on (8 * 128 * 384 =
  // kMinParallelAttentionWork). So 8 per token at short context, 10 at >= 384 keys.
  ASSERT_EQ(expected_step_joins(c, {8}), 8u);
  ASSERT_EQ(expected_step_joins(c, {400}), 10u);

  for (const size_t prompt : {size_t{8}, size_t{400}}) {
    Sequence seq = m.model.new_sequence();
    std::vector<int32_t> ids(prompt);
    for (size_t i = 0; i < prompt; ++i) ids[i] = static_cast<int32_t>((i * 37) % 512);
    m.model.forward(ids, seq);
    const uint64_t before = m.model.barriers();
    const int32_t next = 5;
    m.model.forward({&next, 1}, seq);
    EXPECT_EQ(m.model.barriers() - before, expected_step_joins(c, {prompt})) << "prompt " << prompt;
    // Model::decode of one sequence performs the same joins as forward.
    Sequence* one[] = {&seq};
    const uint64_t before_decode = m.model.barriers();
    m.model.decode(one, std::vector<int32_t>{9});
    EXPECT_EQ(m.model.barriers() - before_decode, expected_step_joins(c, {prompt + 1})) << "prompt " << prompt;
  }

  // A batch of 3: the logits (3 x 524,288) are now shared too; attention over 2 keys is not.
  std::vector<Sequence> seqs;
  std::vector<Sequence*> ptrs;
  for (int b = 0; b < 3; ++b) seqs.push_back(m.model.new_sequence());
  for (auto& s : seqs) {
    const int32_t t = 3;
    m.model.forward({&t, 1}, s);
    ptrs.push_back(&s);
  }
  ASSERT_EQ(expected_step_joins(c, {1, 1, 1}), 2u * 4 + 1);
  const uint64_t before = m.model.barriers();
  m.model.decode(ptrs, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(m.model.barriers() - before, expected_step_joins(c, {1, 1, 1}));

  // One thread: nothing is ever joined.
  SplitModel single(1);
  Sequence s1 = single.model.new_sequence();
  const int32_t t = 4;
  single.model.forward({&t, 1}, s1);
  EXPECT_EQ(single.model.barriers(), 0u);
}

// ---- FLOPs and activation bytes per token --------------------------------------------------
// Derived by hand from kSplitConfig: H = 1024, q_dim = 8 x 128 = 1024, KV = 2 x 128 = 256,
// I = 1536, V = 512, L = 2. Per token each layer runs q|k|v (H + 2 KV = 1536 rows x H),
// o (H x q_dim), gate|up (2 I = 3072 rows x H) and down (H x I); the logits product (V x H)
// runs for the rows whose logits are asked for. A product costs 2 rows cols FLOPs per token,
// and reads its f32 input row (cols) and writes its output row (rows): 4 (cols + rows) bytes.
// Attention costs 4 head_dim FLOPs per (query head, visible key) pair.
TEST(WorkCounts, FlopsAndActivationBytesPerTokenFromTheConfig) {
  SplitModel m(2);
  constexpr uint64_t H = 1024, Q = 1024, KV = 256, I = 1536, V = 512, L = 2, heads = 8, hd = 128;
  constexpr uint64_t layer_flops = 2 * ((H + 2 * KV) * H + H * Q + 2 * I * H + H * I);
  static_assert(layer_flops == 2 * (1536 * 1024 + 1024 * 1024 + 3072 * 1024 + 1024 * 1536));
  constexpr uint64_t logits_flops = 2 * V * H;
  constexpr uint64_t layer_bytes = 4 * ((H + (H + 2 * KV)) + (Q + H) + (H + 2 * I) + (I + H));
  constexpr uint64_t logits_bytes = 4 * (H + V);
  const auto attention_flops = [&](uint64_t pairs) { return L * 4 * heads * hd * pairs; };
  constexpr uint64_t qkv_flops = 2 * (H + 2 * KV) * H, qkv_bytes = 4 * (H + (H + 2 * KV));

  // A prompt of 8: every product over 8 rows but the logits (the last row only) and the last
  // layer's, whose q|k|v runs over 8 rows (for the cache) and the rest over the last row only;
  // query t sees t + 1 keys, 36 pairs per head in the first layer, 8 in the last.
  Sequence seq = m.model.new_sequence();
  std::vector<int32_t> ids(8);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i * 11 + 1);
  uint64_t flops = m.model.product_flops(), bytes = m.model.activation_bytes();
  ASSERT_EQ(flops, 0u);  // loading multiplies nothing
  m.model.forward(ids, seq);
  static_assert(L == 2);
  EXPECT_EQ(m.model.product_flops() - flops,
            8 * layer_flops + 8 * qkv_flops + (layer_flops - qkv_flops) + logits_flops);
  EXPECT_EQ(m.model.activation_bytes() - bytes,
            8 * layer_bytes + 8 * qkv_bytes + (layer_bytes - qkv_bytes) + logits_bytes);
  EXPECT_EQ(seq.attention_flops(), 4 * heads * hd * (36 + 8));

  // One decode step at depth 8: one row everywhere, 9 keys.
  flops = m.model.product_flops(), bytes = m.model.activation_bytes();
  uint64_t att = seq.attention_flops();
  const int32_t next = 5;
  m.model.forward({&next, 1}, seq);
  EXPECT_EQ(m.model.product_flops() - flops, L * layer_flops + logits_flops);
  EXPECT_EQ(m.model.product_flops() - flops, 30'408'704u);  // the same, multiplied out
  EXPECT_EQ(m.model.activation_bytes() - bytes, L * layer_bytes + logits_bytes);
  EXPECT_EQ(m.model.activation_bytes() - bytes, 96'256u);
  EXPECT_EQ(seq.attention_flops() - att, attention_flops(9));

  // A batched step of two sequences: products twice, attention each over its own keys.
  Sequence other = m.model.new_sequence();
  m.model.forward({&next, 1}, other);  // depth 1
  Sequence* both[] = {&seq, &other};
  flops = m.model.product_flops(), bytes = m.model.activation_bytes();
  att = seq.attention_flops();
  const uint64_t att_other = other.attention_flops();
  m.model.decode(both, std::vector<int32_t>{6, 7});
  EXPECT_EQ(m.model.product_flops() - flops, 2 * (L * layer_flops + logits_flops));
  EXPECT_EQ(m.model.activation_bytes() - bytes, 2 * (L * layer_bytes + logits_bytes));
  EXPECT_EQ(seq.attention_flops() - att, attention_flops(10));
  EXPECT_EQ(other.attention_flops() - att_other, attention_flops(2));
}

// The default model's 256-wide products are below the threshold: decoding it joins nothing.
TEST(WorkCounts, TheDefaultModelIsNotSplit) {
  const Model model = open_model_alone(fs::path(NANOINFER_SOURCE_DIR) / "data/default-model", {.threads = 2});
  const ModelConfig& c = model.config();
  Sequence seq = model.new_sequence();
  std::vector<int32_t> ids(200, 7);
  model.forward(ids, seq);
  const uint64_t before = model.barriers();
  for (int i = 0; i < 50; ++i) {
    const int32_t next = 11;
    model.forward({&next, 1}, seq);
  }
  EXPECT_EQ(expected_step_joins(c, {static_cast<size_t>(c.max_position_embeddings) - 1}), 0u);
  EXPECT_EQ(model.barriers() - before, 0u);
}

// ---- zero allocations per decode step -----------------------------------------------------

// After one warm-up step of each kind, neither forward() of one token nor decode() of a
// batch allocates, on any thread.
void expect_steps_allocate_nothing(const Model& model) {
  std::vector<Sequence> seqs;
  for (int b = 0; b < 3; ++b) seqs.push_back(model.new_sequence());
  std::vector<Sequence*> ptrs;
  for (auto& s : seqs) ptrs.push_back(&s);
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  for (auto& s : seqs) model.forward(prompt, s);
  const std::vector<int32_t> tokens = {5, 6, 7};
  const int32_t token = 8;
  model.forward({&token, 1}, seqs[0]);  // warm-up
  model.decode(ptrs, tokens);
  for (int step = 0; step < 3; ++step) {
    {
      AllocationCounter counter;
      model.forward({&token, 1}, seqs[0]);
      EXPECT_EQ(counter.count(), 0u) << "forward, step " << step;
    }
    {
      AllocationCounter counter;
      model.decode(ptrs, tokens);
      EXPECT_EQ(counter.count(), 0u) << "decode, step " << step;
    }
  }
}

TEST(WorkCounts, ADecodeStepAllocatesNothing) {
  // f32 and bf16 files, a tied and an untied head, 1 and 2 threads.
  for (const char* name : {"tiny-untied", "tiny-bf16", "tiny-gqa7"}) {
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(std::string(name) + ", " + std::to_string(threads) + " threads");
      expect_steps_allocate_nothing(open_model_alone(test::tiny_models_dir() / name, {.threads = threads}));
    }
  }
  // The quantized types: their kernels keep per-thread activation buffers, grown once. On
  // these models no product is shared, so only the caller's buffers are used.
  for (const WeightTypeInfo& info : all_weight_types()) {
    if (!info.quantized) continue;
    SCOPED_TRACE(std::string(info.name));
    if (!info.scaled_blocks()) {  // super-blocks of 256: the default model's matrices are whole ones
      expect_steps_allocate_nothing(open_model_alone(fs::path(NANOINFER_SOURCE_DIR) / "data/default-model",
                                                     {.weights = info.type, .threads = 2}));
      continue;
    }
    expect_steps_allocate_nothing(
        open_model_alone(test::tiny_models_dir() / "tiny-untied", {.weights = info.type, .threads = 2}));
  }
  // Shared products: the workers run chunks too (and would count).
  SCOPED_TRACE("split model");
  SplitModel m(2);
  expect_steps_allocate_nothing(m.model);
}

// ---- weight bytes per token -----------------------------------------------------------------

// Hand computation for tiny-untied (hidden 128, intermediate 256, 4 heads of 32, 2 KV heads:
// kv_dim 64, vocab 300, 3 layers, untied head) quantized at load. A step reads every layer
// matrix, the norms and biases (f32), the lm_head and one row of the embedding table.
// int8 = Q8_0 (34 bytes per 32 weights); int4 = Q4_0 (18 bytes per 32) for the layers and
// the input embedding, with the logits matrix (lm_head) in Q8_0 (model/quant_scheme.h).
TEST(WorkCounts, BytesPerTokenOfTheQuantizedFormats) {
  const size_t H = 128, I = 256, KV = 64, V = 300, L = 3;
  const size_t vectors = 4 * (H + L * (2 * H + H + 2 * KV));  // final norm; 2 norms, q/k/v biases
  const auto q8 = [](size_t cols) { return cols / 32 * 34; };
  const auto q4 = [](size_t cols) { return cols / 32 * 18; };
  const auto layers = [&](auto row_bytes) { return L * ((H + KV + KV + H + I + I) * row_bytes(H) + H * row_bytes(I)); };
  const size_t int8 = layers(q8) + V * q8(H) + q8(H) + vectors;
  const size_t int4 = layers(q4) + V * q8(H) + q4(H) + vectors;
  // The same sums with the numbers written out: 3 * (896 * 136 + 128 * 272) + 300 * 136 +
  // 136 + 6656, and 3 * (896 * 72 + 128 * 144) + 300 * 136 + 72 + 6656.
  EXPECT_EQ(int8, 517608u);
  EXPECT_EQ(int4, 296360u);

  const fs::path dir = test::tiny_models_dir() / "tiny-untied";
  const Model m8 = open_model_alone(dir, {.weights = WeightType::Q8_0, .threads = 1});
  const Model m4 = open_model_alone(dir, {.weights = WeightType::Q4_0, .threads = 1});
  ASSERT_EQ(m8.config().hidden_size, 128);
  ASSERT_EQ(m8.config().intermediate_size, 256);
  ASSERT_EQ(m8.config().kv_dim(), 64);
  ASSERT_EQ(m8.config().vocab_size, 300);
  ASSERT_EQ(m8.config().num_hidden_layers, 3);
  ASSERT_FALSE(m8.config().tie_word_embeddings);
  EXPECT_EQ(m8.bytes_per_token(), int8);
  EXPECT_EQ(m4.bytes_per_token(), int4);
}

// ---- the grammar mask ----------------------------------------------------------------------
// On Qwen2.5's vocabulary (151,665 tokens), along a document of a schema with bounded and free
// strings, escapes, numbers, an enum and a pattern.

std::shared_ptr<const VocabTrie> qwen25_trie() {
  const fs::path dir = fs::path(NANOINFER_SOURCE_DIR) / ".deps/qwen-tokenizer";
  if (!fs::exists(dir / "tokenizer.json")) return nullptr;
  return VocabTrie::of(Tokenizer::load(dir));
}

const char* const kMaskSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 12}, "note": {"type": "string"},
  "n": {"type": "integer", "minimum": 0, "maximum": 100000}, "x": {"type": "number"},
  "color": {"enum": ["red", "green", "blue"]}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
  "required": ["name", "note", "n", "x", "color", "zip"], "additionalProperties": false})";
const char* const kMaskDoc =
    "{\"name\":\"Zo\xc3\xab \\\"q\\\"\",\"note\":\"line\\nnext \xe4\xbd\xa0\xe5\xa5\xbd\",\"n\":420,"
    "\"x\":-3.5e2,\"color\":\"blue\",\"zip\":\"01234\"}";

// Once the masker has met a mask's parser states, the mask allocates nothing: the automaton's
// transitions and the content depths are tables, the walk's buffers are kept.
TEST(WorkCounts, AGrammarMaskAllocatesNothingOnceItsStatesAreKnown) {
  const auto trie = qwen25_trie();
  ASSERT_NE(trie, nullptr) << "run `bash scripts/fetch-test-assets.sh`";
  const Grammar g = Grammar::from_gbnf(json_schema_to_gbnf(kMaskSchema));
  std::vector<GrammarState> states;
  GrammarState state(g);
  const std::string_view doc = kMaskDoc;
  for (size_t i = 0; i < doc.size(); ++i) {
    states.push_back(state);
    ASSERT_TRUE(state.advance(static_cast<uint8_t>(doc[i])));
  }
  TokenMasker masker(g, *trie);
  std::vector<uint8_t> mask;
  for (const GrammarState& s : states) masker.mask(s, mask);  // learns the states
  uint64_t allocations = 0;
  for (const GrammarState& s : states) {
    AllocationCounter counter;
    masker.mask(s, mask);
    allocations += counter.count();
  }
  EXPECT_EQ(allocations, 0u);
  // The counter sees a masker that meets new states.
  AllocationCounter counter;
  TokenMasker fresh(g, *trie);
  fresh.mask(states[20], mask);
  EXPECT_GT(counter.count(), 0u);
}

// Inside a string the walk steps through a small part of the trie: the subtrees of pure string
// content short enough for the state are marked without a step. Counted against the same
// masks with the shortcut off (in a bounded string the tokens longer than what is left are
// still walked: a quarter of the trie at most here).
TEST(WorkCounts, TheMaskSkipsStringContentSubtrees) {
  const auto trie = qwen25_trie();
  ASSERT_NE(trie, nullptr) << "run `bash scripts/fetch-test-assets.sh`";
  const Grammar g = Grammar::from_gbnf(json_schema_to_gbnf(kMaskSchema));
  TokenMasker fast(g, *trie);
  TokenMasker walk(g, *trie, {.content_shortcut = false});
  std::vector<uint8_t> a, b;
  for (const char* prefix :
       {"{\"name\":\"", "{\"name\":\"Zo", "{\"name\":\"a\",\"note\":\"", "{\"name\":\"a\",\"note\":\"x\\n"}) {
    GrammarState s(g);
    ASSERT_TRUE(s.advance(std::string_view(prefix)));
    const TokenMasker::Work f0 = fast.work(), w0 = walk.work();
    fast.mask(s, a);
    walk.mask(s, b);
    EXPECT_EQ(a, b) << prefix;
    const uint64_t fast_nodes = fast.work().nodes_walked - f0.nodes_walked;
    const uint64_t walk_nodes = walk.work().nodes_walked - w0.nodes_walked;
    EXPECT_GT(fast.work().content_tokens - f0.content_tokens, 100000u) << prefix;
    EXPECT_LT(fast_nodes * 4, walk_nodes) << prefix << ": " << fast_nodes << " of " << walk_nodes << " nodes stepped";
  }
}

}  // namespace
}  // namespace nanoinfer
