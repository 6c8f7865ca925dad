// linear() throughput on the Qwen2.5-0.5B shapes, per ISA, weight type (f32, bf16, int8 =
// Q8_0, int4 = Q4_0) and thread count.
//   decode  (n_tokens = 1): GB/s of weight bytes streamed (memory-bound; the figure to
//           compare with the machine's read bandwidth; int8 streams 34 bytes per 32 weights,
//           int4 18).
//   prefill (n_tokens = 64): GFLOP/s, 2 * rows * cols * tokens per call.
// layout 1: int8/int4 in the packed layout (kernels/quant_blocks.h), which a model opened on
// a tier with a packed product (avx512-vnni and up) runs; layout 0 the plain row layout.
// Run: nanoinfer_microbench --benchmark_filter=Linear --benchmark_repetitions=5
//        --benchmark_report_aggregates_only=true
//      (one weight type: --benchmark_filter='Linear/.*/type:2/' for int8)
// tools/bench/kernel-tiers runs it for every tier and records the ratios (bench/kernels.jsonl).
// Decode must stream weights from DRAM as the model does (its ~1 GB of weights never fit in
// cache), so each benchmark cycles through enough copies of its matrix to exceed any
// last-level cache (>= 256 MB in total).
#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "model/linear.h"
#include "model/ops.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer {
namespace {

struct Shape {
  const char* name;
  size_t rows, cols;
};
constexpr Shape kShapes[] = {
    {"q_o_896x896", 896, 896},    {"kv_128x896", 128, 896},           {"gate_up_4864x896", 4864, 896},
    {"down_896x4864", 896, 4864}, {"logits_151936x896", 151936, 896},
};

ThreadPool& pool_of(int threads) {
  static std::unique_ptr<ThreadPool> pools[4];
  if (!pools[threads]) pools[threads] = std::make_unique<ThreadPool>(threads);
  return *pools[threads];
}

// The fastest repetition: on a shared machine the least disturbed run is the best estimate
// of what the code can do; the median says what to expect.
void add_min(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

// Copies of one random matrix, >= 256 MB in total, kept while consecutive benchmarks (and
// repetitions) use the same shape and weight type: filling them dominates the run time otherwise.
struct WeightCopies {
  int64_t shape = -1;
  WeightType type = WeightType::F32;
  bool packed = false;
  std::vector<std::byte> bytes;
  std::vector<Weight> weights;
};

// `copies` copies of one rows x cols matrix of random weights in [-1, 1) (seeded), laid out as a
// model loads it: packed or not.
std::vector<std::byte> random_weights(WeightType type, size_t rows, size_t cols, bool packed, size_t copies,
                                      unsigned seed) {
  const size_t row_bytes = weight_row_bytes(type, cols), bytes = rows * row_bytes;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<std::byte> data(bytes * copies);
  std::vector<float> row(cols);
  for (size_t r = 0; r < rows; ++r) {
    for (float& v : row) v = dist(rng);
    quantize_row(type, row.data(), data.data() + r * row_bytes, cols);
  }
  if (packed && (type == WeightType::F32 || type == WeightType::BF16))
    kernels::pack_float(data.data(), rows, row_bytes);
  else if (packed)
    kernels::pack_quantized(type, data.data(), rows, cols);
  for (size_t c = 1; c < copies; ++c)
    std::copy_n(data.begin(), bytes, data.begin() + static_cast<ptrdiff_t>(c * bytes));
  return data;
}

// Copies enough that they do not fit in any cache: >= 256 MB in all.
size_t streamed_copies(size_t bytes) {
  return ((size_t{256} << 20) + bytes - 1) / bytes;
}

const WeightCopies& weight_copies(int64_t shape_index, WeightType type, bool packed) {
  static WeightCopies cache;
  if (cache.shape == shape_index && cache.type == type && cache.packed == packed) return cache;
  cache = WeightCopies{shape_index, type, packed};
  const Shape& shape = kShapes[shape_index];
  const size_t row_bytes = weight_row_bytes(type, shape.cols), bytes = shape.rows * row_bytes;
  const size_t copies = streamed_copies(bytes);
  cache.bytes = random_weights(type, shape.rows, shape.cols, packed, copies, 1);
  for (size_t c = 0; c < copies; ++c)
    cache.weights.push_back({type, cache.bytes.data() + c * bytes, shape.rows, shape.cols, row_bytes, packed});
  return cache;
}

// args: shape index, isa (index in all_isas()), weight type, threads, n_tokens, layout
void BM_Linear(benchmark::State& state) {
  const Shape& shape = kShapes[state.range(0)];
  const Isa isa = all_isas().at(static_cast<size_t>(state.range(1)));
  const auto type = static_cast<WeightType>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  const size_t n_tokens = static_cast<size_t>(state.range(4));
  const bool packed = state.range(5) == 1;
  if (!isa_supported(isa)) {
    state.SkipWithError("ISA not supported here");
    return;
  }
  const kernels::Kernels& table = kernels::table(isa);
  if (packed && table.matmul_packed_for(type) == nullptr) {
    state.SkipWithError("no packed product for this type on this ISA");
    return;
  }

  const size_t n = shape.rows * shape.cols;
  const size_t bytes_per_copy = shape.rows * weight_row_bytes(type, shape.cols);
  const WeightCopies& copies = weight_copies(state.range(0), type, packed);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n_tokens * shape.cols), bias(shape.rows), y(n_tokens * shape.rows);
  for (float& v : x) v = dist(rng);
  for (float& v : bias) v = dist(rng);
  const Compute compute{&pool_of(threads), &table};

  size_t next = 0;
  for (auto _ : state) {
    linear(compute, copies.weights[next], bias.data(), x.data(), y.data(), n_tokens);
    next = next + 1 == copies.weights.size() ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(bytes_per_copy);
  state.counters["GB/s"] =
      benchmark::Counter(bytes * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(n * n_tokens) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(std::string(shape.name) + " " + std::string(isa_name(isa)) + " " +
                 std::string(weight_type_name(type)) + " t" + std::to_string(threads) + " tok" +
                 std::to_string(n_tokens) + (packed ? " packed" : ""));
}

void linear_args(benchmark::internal::Benchmark* b) {
  // Shape and weight type outermost, so that consecutive benchmarks share their weight copies.
  const int64_t n_isas = static_cast<int64_t>(all_isas().size());
  for (int64_t shape = 0; shape < static_cast<int64_t>(std::size(kShapes)); ++shape)
    for (int64_t type : {1, 0, 2, 3})  // bf16, f32, int8, int4
      for (int64_t isa = 0; isa < n_isas; ++isa)
        for (int64_t threads : {1, 2})
          for (int64_t tokens : {1, 64})
            for (int64_t layout : {0, 1}) {
              if (tokens == 64 && shape == 4) continue;  // prefill never multiplies the logits by 64 tokens
              if (isa == 0 && (tokens == 64 || shape == 4)) continue;  // the scalar reference: decode, small shapes
              if (layout == 1 && type < 2) continue;                   // only int8 and int4 are packed
              b->Args({shape, isa, type, threads, tokens, layout});
            }
  b->ArgNames({"shape", "isa", "type", "threads", "tokens", "layout"});
  b->UseRealTime();
  b->MinTime(0.3);
  add_min(b);
}
BENCHMARK(BM_Linear)->Apply(linear_args);

// A pass of a few tokens (speculative verification, serve's batched decode) against a decode
// step, per weight type as a model loads it (packed where the best ISA's table packs it): what the
// products cost when their weights are in cache (mode 0: one 128 x 1024 matrix on one thread, a
// core's compute alone) and when they stream from memory (modes 1 and 2: copies of a 3072 x 1024
// matrix, >= 256 MB, as decode reads them, on 1 or 2 threads). Counter block: a core's time per
// 512 weights (a packed group's 16 rows by one 32-weight block) for the whole pass, all its tokens
// (the time x threads / blocks). A pass of n tokens can cost what a decode step costs only while
// mode 0's n-token figure stays under the one-token figure of the stream at the model's thread
// count: their ratio is the share of the stream's time the products take, before any overlap.
// Run: nanoinfer_microbench --benchmark_filter=SmallBatch --benchmark_repetitions=3
//        --benchmark_report_aggregates_only=true
void BM_SmallBatch(benchmark::State& state) {
  const auto type = static_cast<WeightType>(state.range(0));
  const size_t n_tokens = static_cast<size_t>(state.range(1));
  const int mode = static_cast<int>(state.range(2)), threads = mode == 2 ? 2 : 1;
  const size_t rows = mode == 0 ? 128 : 3072, cols = 1024;
  const kernels::Kernels& table = kernels::table(best_isa());
  const size_t row_bytes = weight_row_bytes(type, cols), bytes = rows * row_bytes;
  const size_t copies = mode == 0 ? 1 : streamed_copies(bytes);
  const bool packed = table.packs(type, rows, cols);
  const std::vector<std::byte> data = random_weights(type, rows, cols, packed, copies, 3);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n_tokens * cols), y(n_tokens * rows);
  for (float& v : x) v = dist(rng);
  const Compute compute{&pool_of(threads), &table};
  size_t next = 0;
  for (auto _ : state) {
    const Weight w{type, data.data() + next * bytes, rows, cols, row_bytes, packed};
    linear(compute, w, nullptr, x.data(), y.data(), n_tokens);
    next = next + 1 == copies ? 0 : next + 1;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double blocks = static_cast<double>(rows / 16) * static_cast<double>(cols / 32) / threads;
  state.counters["block"] = benchmark::Counter(blocks * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(std::string(weight_type_name(type)) + " " + std::string(isa_name(best_isa())) + " tok" +
                 std::to_string(n_tokens) + (mode == 0 ? " in cache" : " streamed t" + std::to_string(threads)) +
                 (packed ? " packed" : ""));
}
BENCHMARK(BM_SmallBatch)
    ->ArgsProduct({{static_cast<int64_t>(WeightType::F32), static_cast<int64_t>(WeightType::BF16),
                    static_cast<int64_t>(WeightType::Q8_0), static_cast<int64_t>(WeightType::Q4_0),
                    static_cast<int64_t>(WeightType::Q4_K), static_cast<int64_t>(WeightType::Q6_K),
                    static_cast<int64_t>(WeightType::Q3_K)},
                   {1, 2, 4, 8},
                   {0, 1, 2}})
    ->ArgNames({"type", "tokens", "mode"})
    ->UseRealTime()
    ->MinTime(0.2)
    ->Apply(add_min);

// The read-bandwidth ceiling at the moment of measurement, to set the decode figures against:
// a dot product over two 128 MiB arrays split across the pool (the attention kernel's, one row
// per call), the simplest streaming loop there is.
void BM_StreamReadCeiling(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const size_t n = (size_t{128} << 20) / sizeof(float);
  std::vector<float> a(n, 1.0f), b(n, 0.5f);
  ThreadPool& pool = pool_of(threads);
  const kernels::Kernels& k = kernels::table(best_isa());
  float partial[4] = {};
  for (auto _ : state) {
    pool.parallel_for(n, 4096, [&](size_t begin, size_t end) {
      k.dot_rows_f32(a.data() + begin, b.data() + begin, 0, 1, end - begin, 1.0f, &partial[begin * 4 / n]);
    });
    benchmark::DoNotOptimize(partial);
  }
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * static_cast<double>(n * sizeof(float)) * 1e-9 * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_StreamReadCeiling)->Arg(1)->Arg(2)->ArgName("threads")->UseRealTime()->MinTime(0.3)->Apply(add_min);

// Attention of one layer of Qwen2.5-0.5B (14 heads of 64, 2 KV heads) on the best ISA:
// the last 512-token chunk of a 4,096-token prefill (pos0 3,584) and a decode step at depth
// 4,096. mode 0: the exact path attention had before tiling (f32 cache, a scores buffer,
// std::exp); 1: tiled, f32 cache; 2: tiled, f16 cache; 3: tiled, f16 cache, each iteration
// another of 64 layers' caches (128 MiB at depth 4,096), so the K/V rows come from memory as
// in a model's decode step, not from the caches; 4: as 3 on memory advised to 2 MiB
// transparent huge pages (as a model's KV cache, KvCache::Pages::huge). Items = query tokens.
// Run: nanoinfer_microbench --benchmark_filter=Attention --benchmark_repetitions=5
void BM_Attention(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)), mode = static_cast<size_t>(state.range(1));
  const size_t pos0 = 4096 - n + (n == 1 ? 1 : 0);
  const AttentionShape shape{14, 2, 64};
  const size_t keys = pos0 + n, kv_dim = 128, q_dim = 896;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(n * q_dim), k(keys * kv_dim), v(keys * kv_dim), out(n * q_dim), scores(14 * keys);
  for (float& x : q) x = dist(rng);
  for (float& x : k) x = dist(rng);
  for (float& x : v) x = dist(rng);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = f32_to_f16(k[i]);
    v16[i] = f32_to_f16(v[i]);
  }
  // modes 3 and 4: 64 copies of the f16 cache, one per "layer", visited in turn.
  constexpr size_t kColdLayers = 64;
  std::vector<uint16_t> k_cold_v, v_cold_v;
  std::span<uint16_t> k_cold, v_cold;
  void* huge_map = nullptr;
  size_t huge_bytes = 0;
  if (mode == 3 || mode == 4) {
    if (mode == 3) {
      k_cold_v.resize(kColdLayers * k16.size());
      v_cold_v.resize(kColdLayers * v16.size());
      k_cold = k_cold_v;
      v_cold = v_cold_v;
    } else {
      huge_bytes = 2 * kColdLayers * k16.size() * sizeof(uint16_t);
      void* pk = ::mmap(nullptr, huge_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (pk == MAP_FAILED) {
        state.SkipWithError("cannot map the cold caches");
        return;
      }
      huge_map = pk;
      (void)::madvise(pk, huge_bytes, MADV_HUGEPAGE);
      k_cold = std::span<uint16_t>(static_cast<uint16_t*>(pk), kColdLayers * k16.size());
      v_cold = std::span<uint16_t>(static_cast<uint16_t*>(pk) + kColdLayers * k16.size(), kColdLayers * k16.size());
    }
    for (size_t l = 0; l < kColdLayers; ++l) {
      std::copy(k16.begin(), k16.end(), k_cold.begin() + static_cast<std::ptrdiff_t>(l * k16.size()));
      std::copy(v16.begin(), v16.end(), v_cold.begin() + static_cast<std::ptrdiff_t>(l * v16.size()));
    }
  }
  size_t layer = 0;
  const Compute c{&pool_of(2), &kernels::table(best_isa())};
  AttentionWork work;
  for (auto _ : state) {
    if (mode == 0) {
      attention_exact(c, shape, q.data(), k.data(), v.data(), out.data(), n, pos0, scores.data());
    } else if (mode == 1) {
      attention(c, shape, q.data(), KvView{k.data(), v.data(), DType::F32, kv_dim}, out.data(), n, pos0, &work);
    } else if (mode == 2) {
      attention(c, shape, q.data(), KvView{k16.data(), v16.data(), DType::F16, kv_dim}, out.data(), n, pos0, &work);
    } else {
      attention(c, shape, q.data(),
                KvView{k_cold.data() + layer * k16.size(), v_cold.data() + layer * v16.size(), DType::F16, kv_dim},
                out.data(), n, pos0, &work);
      layer = (layer + 1) % kColdLayers;
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  if (huge_map != nullptr) ::munmap(huge_map, huge_bytes);
}
BENCHMARK(BM_Attention)->ArgsProduct({{512, 1}, {0, 1, 2, 3, 4}})->ArgNames({"n", "mode"})->UseRealTime();

}  // namespace
}  // namespace nanoinfer
