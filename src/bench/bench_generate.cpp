// bench generate's own measurement (src/bench/bench_generate.h).
#include "bench_generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/splitmix64.h"

namespace nanoinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_of(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// The warm-up and the timed runs: each a fresh sequence, prefill then n_gen decode steps.
void time_runs(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen, int64_t repetitions,
               GenerateMeasure& out) {
  Generator generator(m.model, m.tokenizer, {.temperature = 0.0});
  // No end-of-sequence ids: every run decodes exactly n_gen steps (n_gen + 1 tokens sampled,
  // the first from the prefill's logits).
  const StopRules options{.max_new_tokens = static_cast<int64_t>(n_gen) + 1};
  const TextSink discard = [](std::string_view) {};
  for (int64_t r = -1; r < repetitions; ++r) {  // r = -1 is the warm-up
    generator.reset();
    const GenerationStats s = generator.generate(prompt, options, discard);
    if (s.decode_steps != n_gen) fail("bench: expected {} decode steps, ran {}", n_gen, s.decode_steps);
    if (r < 0) continue;
    out.pp.push_back(s.prefill_tokens_per_second());
    out.tg.push_back(s.decode_tokens_per_second());
    out.ttft.push_back(s.first_token_seconds);
  }
}

// The extra pass: the same prompt, then n_gen decode steps on the model directly, counting the
// barriers, FLOPs and activation bytes, and timing attention's share of each phase.
WorkCounts count_work(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen) {
  const Model& model = m.model;
  WorkCounts w;
  Sequence seq = model.new_sequence();
  w.kv_bytes_per_position = seq.cache().bytes_per_position();
  const uint64_t flops0 = model.product_flops();
  const auto t0 = Clock::now();
  model.forward(prompt, seq);
  const auto t1 = Clock::now();
  const double prefill_attention = seq.attention_seconds();
  const uint64_t barriers1 = model.barriers();
  const uint64_t flops1 = model.product_flops(), bytes1 = model.activation_bytes();
  const uint64_t attention1 = seq.attention_flops();
  w.prefill_flops = static_cast<double>(flops1 - flops0 + attention1);
  for (size_t i = 0; i < n_gen; ++i) {
    const int32_t token = prompt[i % prompt.size()];
    model.forward({&token, 1}, seq);
  }
  const auto t2 = Clock::now();
  const double steps = static_cast<double>(n_gen);
  w.barriers_per_token = static_cast<double>(model.barriers() - barriers1) / steps;
  w.decode_product_flops = static_cast<double>(model.product_flops() - flops1) / steps;
  w.decode_attention_flops = static_cast<double>(seq.attention_flops() - attention1) / steps;
  w.decode_activation_bytes = static_cast<double>(model.activation_bytes() - bytes1) / steps;
  w.attention_share_prefill = prefill_attention / std::max(seconds_of(t1 - t0), 1e-9);
  w.attention_share_decode = (seq.attention_seconds() - prefill_attention) / std::max(seconds_of(t2 - t1), 1e-9);
  return w;
}

// The fields the pp, tg and A/B records of this model and run share.
nlohmann::json base_record(const OpenedModel& m, const GenerateMeasure& g) {
  const Model& model = m.model;
  const int threads = model.options().threads;
  const uint64_t n_params = model.config().parameter_count();
  const std::string dtype(weight_type_name(model.weight_type()));
  nlohmann::json base = bench_context(threads, model.isa());
  base["cpu_info"] = base["cpu"];
  base["build_commit"] = base["commit"];
  base["test_time"] = base["timestamp"];
  base["n_threads"] = threads;
  base["n_ctx"] = model.max_context();
  base["type_k"] = kv_type_name(model.options().kv_type);
  base["type_v"] = kv_type_name(model.options().kv_type);
  base["kv_bytes_per_position"] = g.work.kv_bytes_per_position;
  base["attention_share_prefill"] = g.work.attention_share_prefill;
  base["attention_share_decode"] = g.work.attention_share_decode;
  base["model_filename"] = m.dir.string();
  base["model_type"] =
      fmt::format("{} {:.1f}M {}", model.config().model_type, static_cast<double>(n_params) / 1e6, dtype);
  base["model_size"] = model.weight_bytes();
  base["model_n_params"] = n_params;
  base["dtype"] = dtype;
  base["bench"] = "generate";
  base["peak_rss_bytes"] = g.peak_rss;
  base["bytes_per_token"] = model.bytes_per_token();
  // Present only when the products ran under the tuning cache's rules (not with --no-tune, nor
  // without a cache), so `bench compare` sets tuned runs against tuned runs only.
  if (m.tuning.tuning != nullptr) {
    base["tuned"] = true;
    base["tuned_rules"] = m.tuning.tuning->rules.size();
    base["tuning_file"] = m.tuning.file.string();
  }
  return base;
}

// A pp or tg record: llama-bench's test (n_prompt, n_gen, n_depth) and its rate's spread.
nlohmann::json rate_record(const nlohmann::json& base, size_t n_prompt, size_t n_gen, size_t depth,
                           const std::vector<double>& ts, const Summary& s) {
  nlohmann::json j = base;
  j["n_prompt"] = n_prompt;
  j["n_gen"] = n_gen;
  j["n_depth"] = depth;
  j["samples_ts"] = ts;
  j["avg_ts"] = s.mean;
  j["stddev_ts"] = s.stddev;
  put_rates(j, "", s);
  return j;
}

// Prefill's record ("pp"): the prompt alone, its time to first token and FLOP rate.
nlohmann::json prefill_record(const GenerateMeasure& g, size_t n_prompt, const GenerateOptions& options) {
  nlohmann::json pp = rate_record(g.base, n_prompt, 0, 0, g.pp, g.pp_summary);
  pp["ttft_ms_median"] = g.ttft_summary.median * 1e3;
  pp["flops_per_prompt_token"] = g.work.prefill_flops / static_cast<double>(n_prompt);
  pp["prefill_gflops"] = g.prefill_gflops;
  if (options.compute_gflops > 0) {
    pp["compute_gflops"] = options.compute_gflops;
    pp["compute_roofline_pct"] = 100.0 * g.prefill_gflops / options.compute_gflops;
  }
  return pp;
}

// Decoding after the prompt ("tg"): llama-bench's "tg n_gen @ d n_prompt", with the work per
// token and the read roofline.
nlohmann::json decode_record(const GenerateMeasure& g, size_t n_prompt, size_t n_gen, const GenerateOptions& options) {
  nlohmann::json tg = rate_record(g.base, 0, n_gen, n_prompt, g.tg, g.tg_summary);
  tg["effective_gbps"] = g.effective_gbps;
  tg["barriers_per_token"] = g.work.barriers_per_token;
  tg["product_flops_per_token"] = g.work.decode_product_flops;
  tg["attention_flops_per_token"] = g.work.decode_attention_flops;
  tg["activation_bytes_per_token"] = g.work.decode_activation_bytes;
  if (options.probe_bytes > 0) {
    tg["read_bandwidth_gbps"] = options.bandwidth.median;
    tg["read_bandwidth_min_gbps"] = options.bandwidth.min;
    tg["read_bandwidth_probe_bytes"] = options.probe_bytes;
    tg["roofline_pct"] = g.roofline_pct;
  }
  return tg;
}

}  // namespace

std::vector<int32_t> bench_prompt(size_t n, const Tokenizer& tok, const std::string& prompt_file) {
  if (!prompt_file.empty()) {
    std::vector<int32_t> ids = encode_raw_prompt(tok, read_file(prompt_file, 64u << 20));
    if (ids.size() < n) fail("--prompt-file {} has {} tokens, fewer than -p {}", prompt_file, ids.size(), n);
    ids.resize(n);
    return ids;
  }
  std::vector<int32_t> ids(n);
  SplitMix64 mix{0};
  const auto vocab = static_cast<uint64_t>(tok.vocab_size());
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>(mix.next() % vocab);
  return ids;
}

GenerateMeasure measure_generate(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen,
                                 const GenerateOptions& options) {
  const size_t n_prompt = prompt.size();
  GenerateMeasure g;
  time_runs(m, prompt, n_gen, options.repetitions, g);
  g.pp_summary = summarize(g.pp);
  g.tg_summary = summarize(g.tg);
  g.ttft_summary = summarize(g.ttft);
  g.effective_gbps = static_cast<double>(m.model.bytes_per_token()) * g.tg_summary.median / 1e9;
  g.peak_rss = peak_rss_bytes();
  g.work = count_work(m, prompt, n_gen);
  g.roofline_pct = options.bandwidth.median > 0 ? 100.0 * g.effective_gbps / options.bandwidth.median : 0.0;
  g.prefill_gflops = g.work.prefill_flops / static_cast<double>(n_prompt) * g.pp_summary.median / 1e9;
  g.base = base_record(m, g);
  g.pp_record = prefill_record(g, n_prompt, options);
  g.tg_record = decode_record(g, n_prompt, n_gen, options);
  return g;
}

}  // namespace nanoinfer::bench
