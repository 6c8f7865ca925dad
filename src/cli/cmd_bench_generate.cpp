// `nanoinfer bench generate`: prefill and decode speed over -r runs of a fresh sequence (a
// prompt of -p pseudo-random tokens, then -n greedy decode steps), after one warm-up run.
// -p, -n and -t take comma-separated lists, as llama-bench's: every combination is measured
// (the model is opened once per thread count). Each combination gives one "pp" record and
// one "tg" record (decoding after the prompt: llama-bench's "tg N @ d P", n_depth = P), field
// names as llama-bench's where one exists. -o picks what stdout shows (md, csv, json, jsonl);
// the records are appended as JSON lines to --results FILE, by default bench/results.jsonl
// when ./bench exists (inside the repository), else nowhere.
//
// Decode's work counts and roofline: the weight bytes one decode step streams
// (Model::bytes_per_token), the thread-pool barriers per decoded token (counted over -n
// extra decode steps after the runs), and, from a read-bandwidth probe run with the same
// thread count (`bench bandwidth`, --probe-mib), the share of the read roofline reached:
// bytes per token x median decode tokens/s / median probe GB/s.
//
// --cache-ab adds the KV cache A/B: the same greedy decode once with the cache and once by
// recomputing the whole sequence for every token, alternating, asserting identical tokens and
// the positions each path pushed; tokens/s, time to first token and ms per later step per path.
//
// --lookup / --draft / --draft-self (as generate's) add the speculative A/B: plain and
// speculative greedy decoding alternating, identical tokens asserted, with the acceptance rate,
// tokens per verification pass and the drafter's share of the time. --prompt-file takes the
// prompt's first -p tokens from a text file instead of pseudo-random ids (prompt lookup needs
// text that repeats itself to draft anything). --draft-oracle P drafts the plain continuation,
// right at each position with probability P: the A/B at a chosen acceptance.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>

#include "command.h"
#include "common_options.h"
#include "nanoinfer/viz_trace.h"
#include "bench_constrained.h"
#include "bench_speculation.h"
#include "bench_step_curve.h"
#include "bench_compare.h"
#include "bench_record.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/splitmix64.h"
#include "speculation_options.h"
#include "nanoinfer/generator.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct BenchFlags {
  ModelFlags model;
  std::vector<int64_t> n_prompt{64};
  std::vector<int64_t> n_gen{32};
  std::vector<int64_t> threads;  // empty: NANOINFER_THREADS (a list too), else {0}
  int64_t repetitions = 5;
  bool cache_ab = false;
  bool compare = false;
  int64_t probe_mib = 1024;
  double compute_gflops = 0;  // the compute probe's figure, for prefill's share of it (0: none)
  std::string format = "md";
  std::string results;  // empty: bench/results.jsonl if ./bench exists, else none
  SpeculationFlags speculation;
  std::optional<double> oracle_rate;  // --draft-oracle
  std::string prompt_file;  // empty: pseudo-random prompt ids
  GrammarFlags grammar;     // --json, --json-schema, --grammar: the constrained A/B
  int64_t step_curve = 0;   // --step-curve B: serve's mixed step cost curve with B decoders
};

// What stdout shows, as llama-bench's -o.
enum class Format { Md, Csv, Json, Jsonl };
Format format_of(const std::string& name) {
  if (name == "md") return Format::Md;
  if (name == "csv") return Format::Csv;
  if (name == "json") return Format::Json;
  if (name == "jsonl") return Format::Jsonl;
  fail("-o takes the output format md, csv, json or jsonl (as llama-bench's), got '{}'; the records' file is "
       "--results FILE", name);
}

// Deterministic prompt: the first n tokens of --prompt-file, else the splitmix64 stream of
// seed 0 over the tokenizer's ids.
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

// Plain and speculative greedy decoding of the same prompt, alternating so drift in machine
// load hits both alike; the tokens must be identical. Returns the record and its note.
std::pair<nlohmann::json, std::string> measure_speculation(const BenchFlags& f, const Speculation& speculation,
                                                           OpenedModel& m, const std::vector<int32_t>& prompt,
                                                           size_t n_gen, nlohmann::json record) {
  Generator plain(m.model, m.tokenizer, {.temperature = 0.0});
  Generator spec(m.model, m.tokenizer, {.temperature = 0.0});
  const StopRules rules{.max_new_tokens = static_cast<int64_t>(n_gen) + 1};
  const TextSink discard = [](std::string_view) {};
  std::string described = speculation.describe(/*timed=*/true);
  if (f.oracle_rate && speculation.enabled()) {
    // The draft model works as usual; the oracle decides which of its drafts are right.
    plain.generate(prompt, rules, discard);
    std::vector<int32_t> truth(plain.tokens().begin(), plain.tokens().end());
    const double rate = *f.oracle_rate;
    const int32_t vocab = m.tokenizer.vocab_size();
    speculation.attach(spec, m, {.temperature = 0.0}, [truth = std::move(truth), rate, vocab](size_t i, int32_t drafted) {
      return oracle_choice(truth, rate, vocab, i, drafted);
    });
    described = fmt::format("{}; its drafts right with p = {:.2f} (the oracle's choice, the draft model's cost)",
                            described, rate);
  } else if (f.oracle_rate) {
    plain.generate(prompt, rules, discard);
    const std::vector<int32_t> truth(plain.tokens().begin(), plain.tokens().end());
    const std::optional<int64_t> k = f.speculation.draft_max;
    spec.set_drafter(make_oracle_drafter(truth, *f.oracle_rate, m.tokenizer.vocab_size()),
                     k ? DraftLength::fixed(static_cast<size_t>(*k))
                       : DraftLength::adaptive(DraftLength::kDefaultMax, /*timed=*/true));
    described = fmt::format("oracle drafts right with p = {:.2f}, {}", *f.oracle_rate,
                            k ? fmt::format("k = {}", *k)
                              : fmt::format("adaptive timed k <= {}", DraftLength::kDefaultMax));
  } else {
    speculation.attach(spec, m, {.temperature = 0.0});
  }
  std::vector<double> plain_ts, spec_ts, draft_share;
  GenerationStats last;
  for (int64_t r = -1; r < f.repetitions; ++r) {  // r = -1 is the warm-up
    plain.reset();
    spec.reset();
    const GenerationStats p = plain.generate(prompt, rules, discard);
    last = spec.generate(prompt, rules, discard);
    if (!std::ranges::equal(plain.tokens(), spec.tokens())) {
      fail("speculative A/B: speculative and plain greedy decoding differ (run {})", r);
    }
    if (last.decode_tokens != n_gen) fail("bench: expected {} decoded tokens, got {}", n_gen, last.decode_tokens);
    if (r < 0) continue;
    plain_ts.push_back(p.decode_tokens_per_second());
    spec_ts.push_back(last.decode_tokens_per_second());
    draft_share.push_back(last.decode_seconds > 0 ? last.draft_seconds / last.decode_seconds : 0.0);
  }
  const Summary a = summarize(plain_ts), b = summarize(spec_ts), d = summarize(draft_share);
  record["bench"] = "generate-speculative";
  record["n_prompt"] = prompt.size();
  record["n_gen"] = n_gen;
  record["speculation"] = described;
  record["plain_median_ts"] = a.median;
  record["speculative_median_ts"] = b.median;
  record["plain_min_ts"] = a.min;
  record["plain_max_ts"] = a.max;
  record["speculative_min_ts"] = b.min;
  record["speculative_max_ts"] = b.max;
  record["speedup"] = a.median > 0 ? b.median / a.median : 0.0;
  record["drafted"] = last.drafted_tokens;
  record["accepted"] = last.accepted_tokens;
  record["acceptance_rate"] = last.acceptance_rate();
  record["verify_passes"] = last.verify_passes;
  record["tokens_per_verify_pass"] = last.tokens_per_verify_pass();
  record["target_passes"] = last.decode_steps;
  record["draft_time_share"] = d.median;
  record["identical_output"] = true;
  const std::vector<double> curve = pass_cost_curve(m, prompt, f.repetitions);
  record["pass_cost_relative"] = curve;
  std::string curve_text;
  for (size_t i = 0; i < curve.size(); ++i) curve_text += fmt::format("{}{}: {:.2f}", i ? ", " : "", i + 1, curve[i]);
  std::string note = fmt::format(
      "speculative A/B ({}; {} runs, {} tokens after a {}-token prompt, identical tokens): plain {:.2f} tok/s, "
      "speculative {:.2f} tok/s (x{:.2f}); acceptance {:.1f}% ({} of {} drafted), {:.2f} tokens per verification "
      "pass, {} target passes for {} tokens, drafting {:.1f}% of the decode time",
      described, f.repetitions, n_gen, prompt.size(), a.median, b.median,
      a.median > 0 ? b.median / a.median : 0.0, 100.0 * last.acceptance_rate(), last.accepted_tokens,
      last.drafted_tokens, last.tokens_per_verify_pass(), last.decode_steps, last.decode_tokens, 100.0 * d.median);
  note += fmt::format("; a pass of n tokens costs, relative to one decode step: {}", curve_text);
  return {std::move(record), std::move(note)};
}

// One -p/-n combination on an opened model: its records (pp, tg, and the cache A/B's with
// --cache-ab), and the markdown lines shown after the table.
struct Measured {
  std::vector<nlohmann::json> records;
  std::vector<std::string> notes;
};

Measured measure(const BenchFlags& f, OpenedModel& m, size_t n_prompt, size_t n_gen, const Summary& bandwidth,
                 const Speculation& speculation) {
  Measured out;
  const std::vector<int32_t> prompt = bench_prompt(n_prompt, m.tokenizer, f.prompt_file);
  Generator generator(m.model, m.tokenizer, {.temperature = 0.0});
  // No end-of-sequence ids: every run decodes exactly n_gen steps (n_gen + 1 tokens sampled,
  // the first from the prefill's logits).
  const StopRules options{.max_new_tokens = static_cast<int64_t>(n_gen) + 1};
  const TextSink discard = [](std::string_view) {};

  std::vector<double> pp, tg, ttft;
  for (int64_t r = -1; r < f.repetitions; ++r) {  // r = -1 is the warm-up
    generator.reset();
    const GenerationStats s = generator.generate(prompt, options, discard);
    if (s.decode_steps != n_gen) fail("bench: expected {} decode steps, ran {}", n_gen, s.decode_steps);
    if (r < 0) continue;
    pp.push_back(s.prefill_tokens_per_second());
    tg.push_back(s.decode_tokens_per_second());
    ttft.push_back(s.first_token_seconds);
  }
  const Summary pps = summarize(pp), tgs = summarize(tg), ttfts = summarize(ttft);
  const double gbps = static_cast<double>(m.model.bytes_per_token()) * tgs.median / 1e9;
  const size_t peak_rss = peak_rss_bytes();  // before the probe's buffer

  // Barriers per decoded token: n_gen steps after the same prompt (attention may join only
  // from some context length on, so this is the mean over the positions the runs decoded).
  // The same pass gives attention's share of the prefill's and the decode steps' wall time.
  double barriers_per_token = 0;
  size_t kv_bytes_per_position = 0;
  double attention_share_prefill = 0, attention_share_decode = 0;
  // Work beyond the weights, counted in the same pass: the prompt's FLOPs (products and
  // attention) and the decode steps' per token (attention's grows with the depth: a mean),
  // and the activation bytes the products read and write per token.
  double prefill_flops = 0, decode_product_flops = 0, decode_attention_flops = 0, decode_activation_bytes = 0;
  {
    using Clock = std::chrono::steady_clock;
    const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    Sequence seq = m.model.new_sequence();
    kv_bytes_per_position = seq.cache().bytes_per_position();
    const uint64_t flops0 = m.model.product_flops();
    const auto t0 = Clock::now();
    m.model.forward(prompt, seq);
    const auto t1 = Clock::now();
    const double prefill_attention = seq.attention_seconds();
    const uint64_t before = m.model.barriers();
    const uint64_t flops1 = m.model.product_flops(), bytes1 = m.model.activation_bytes();
    const uint64_t attention1 = seq.attention_flops();
    prefill_flops = static_cast<double>(flops1 - flops0 + attention1);
    for (size_t i = 0; i < n_gen; ++i) {
      const int32_t token = prompt[i % n_prompt];
      m.model.forward({&token, 1}, seq);
    }
    const auto t2 = Clock::now();
    barriers_per_token = static_cast<double>(m.model.barriers() - before) / static_cast<double>(n_gen);
    const double steps = static_cast<double>(n_gen);
    decode_product_flops = static_cast<double>(m.model.product_flops() - flops1) / steps;
    decode_attention_flops = static_cast<double>(seq.attention_flops() - attention1) / steps;
    decode_activation_bytes = static_cast<double>(m.model.activation_bytes() - bytes1) / steps;
    attention_share_prefill = prefill_attention / std::max(seconds(t1 - t0), 1e-9);
    attention_share_decode = (seq.attention_seconds() - prefill_attention) / std::max(seconds(t2 - t1), 1e-9);
  }
  const double roofline_pct = bandwidth.median > 0 ? 100.0 * gbps / bandwidth.median : 0.0;
  // Prefill's arithmetic rate: the prompt's FLOPs at the median prefill speed.
  const double prefill_gflops = prefill_flops / static_cast<double>(n_prompt) * pps.median / 1e9;

  const ModelConfig& cfg = m.model.config();
  const uint64_t n_params = cfg.parameter_count();
  const std::string dtype(weight_type_name(m.model.weight_type()));
  const int threads = m.model.options().threads;

  std::string note = fmt::format(
      "pp{} tg{} t{}: time to first token {:.1f} ms (median of {}), decode {:.1f} GB/s effective ({} per token), "
      "peak RSS {}; KV cache {}, {} bytes per position; attention {:.1f}% of the prefill's time, {:.1f}% of the "
      "decode steps' (one extra pass); decode work: {} bytes and {:.1f} barriers per token, {:.2f} MFLOP in the "
      "products + {:.2f} MFLOP in attention (mean over depths {}..{}), {:.1f} KiB of activations read and written by "
      "the products; prefill: {:.2f} MFLOP per prompt token, {:.1f} GFLOP/s at the median",
      n_prompt, n_gen, threads, ttfts.median * 1e3, f.repetitions, gbps,
      format_bytes(static_cast<double>(m.model.bytes_per_token())), format_bytes(static_cast<double>(peak_rss)),
      kv_type_name(m.model.options().kv_type), kv_bytes_per_position, 100.0 * attention_share_prefill,
      100.0 * attention_share_decode, m.model.bytes_per_token(), barriers_per_token, decode_product_flops / 1e6,
      decode_attention_flops / 1e6, n_prompt, n_prompt + n_gen - 1, decode_activation_bytes / 1024,
      prefill_flops / static_cast<double>(n_prompt) / 1e6, prefill_gflops);
  if (f.compute_gflops > 0) {
    note += fmt::format(" = {:.1f}% of the compute roofline ({:.1f} GFLOP/s, --compute-gflops)",
                        100.0 * prefill_gflops / f.compute_gflops, f.compute_gflops);
  }
  if (f.probe_mib > 0) {
    note += fmt::format("; read bandwidth {:.1f} GB/s median ({:.1f} min, {} MiB, {} threads): {:.1f}% of the roofline",
                        bandwidth.median, bandwidth.min, f.probe_mib, threads, roofline_pct);
  } else {
    note += " (no bandwidth probe)";
  }
  out.notes.push_back(std::move(note));

  nlohmann::json base = bench_context(threads, m.model.isa());
  base["cpu_info"] = base["cpu"];
  base["build_commit"] = base["commit"];
  base["test_time"] = base["timestamp"];
  base["n_threads"] = threads;
  base["n_ctx"] = m.model.max_context();
  base["type_k"] = kv_type_name(m.model.options().kv_type);
  base["type_v"] = kv_type_name(m.model.options().kv_type);
  base["kv_bytes_per_position"] = kv_bytes_per_position;
  base["attention_share_prefill"] = attention_share_prefill;
  base["attention_share_decode"] = attention_share_decode;
  base["model_filename"] = m.dir.string();
  base["model_type"] = fmt::format("{} {:.1f}M {}", m.model.config().model_type, static_cast<double>(n_params) / 1e6, dtype);
  base["model_size"] = m.model.weight_bytes();
  base["model_n_params"] = n_params;
  base["dtype"] = dtype;
  base["bench"] = "generate";
  base["peak_rss_bytes"] = peak_rss;
  base["bytes_per_token"] = m.model.bytes_per_token();
  // Present only when the products ran under the tuning cache's rules (not with --no-tune, nor
  // without a cache), so `bench compare` sets tuned runs against tuned runs only.
  if (m.tuning.tuning != nullptr) {
    base["tuned"] = true;
    base["tuned_rules"] = m.tuning.tuning->rules.size();
    base["tuning_file"] = m.tuning.file.string();
  }
  auto record = [&](size_t prompt_n, size_t gen_n, size_t depth, const std::vector<double>& ts, const Summary& s) {
    nlohmann::json j = base;
    j["n_prompt"] = prompt_n;
    j["n_gen"] = gen_n;
    j["n_depth"] = depth;
    j["samples_ts"] = ts;
    j["avg_ts"] = s.mean;
    j["stddev_ts"] = s.stddev;
    j["median_ts"] = s.median;
    j["min_ts"] = s.min;
    j["max_ts"] = s.max;
    return j;
  };
  nlohmann::json pp_record = record(n_prompt, 0, 0, pp, pps);
  pp_record["ttft_ms_median"] = ttfts.median * 1e3;
  pp_record["flops_per_prompt_token"] = prefill_flops / static_cast<double>(n_prompt);
  pp_record["prefill_gflops"] = prefill_gflops;
  if (f.compute_gflops > 0) {
    pp_record["compute_gflops"] = f.compute_gflops;
    pp_record["compute_roofline_pct"] = 100.0 * prefill_gflops / f.compute_gflops;
  }
  // Decoding after the prompt: llama-bench's "tg n_gen @ d n_prompt".
  nlohmann::json tg_record = record(0, n_gen, n_prompt, tg, tgs);
  tg_record["effective_gbps"] = gbps;
  tg_record["barriers_per_token"] = barriers_per_token;
  tg_record["product_flops_per_token"] = decode_product_flops;
  tg_record["attention_flops_per_token"] = decode_attention_flops;
  tg_record["activation_bytes_per_token"] = decode_activation_bytes;
  if (f.probe_mib > 0) {
    tg_record["read_bandwidth_gbps"] = bandwidth.median;
    tg_record["read_bandwidth_min_gbps"] = bandwidth.min;
    tg_record["read_bandwidth_probe_bytes"] = static_cast<size_t>(f.probe_mib) << 20;
    tg_record["roofline_pct"] = roofline_pct;
  }
  out.records.push_back(std::move(pp_record));
  out.records.push_back(std::move(tg_record));

  if (f.cache_ab) {
    // The same harness times both paths (run_timed_steps, as viz's race): step 0 pushes the
    // prompt, each later step either one position (cached) or the whole context again from an
    // empty cache (recomputed). Alternated so drift in machine load hits both alike; the
    // tokens must agree and the positions pushed are counted, not assumed.
    struct Path {
      const char* name;
      bool cached;
      std::vector<double> ts, ttft_ms, step_ms;
      uint64_t positions = 0;
    };
    Path paths[2] = {{"cached", true, {}, {}, {}}, {"uncached", false, {}, {}, {}}};
    for (int64_t r = 0; r < f.repetitions; ++r) {
      std::vector<int32_t> tokens[2];
      for (int i = 0; i < 2; ++i) {
        Path& path = paths[i];
        const std::vector<TimedStep> steps =
            run_timed_steps(m.model, m.tokenizer, prompt, n_gen, {.temperature = 0.0}, path.cached);
        if (steps.size() != n_gen) fail("cache A/B: expected {} steps, ran {}", n_gen, steps.size());
        double seconds = 0, later = 0;
        path.positions = 0;
        for (size_t k = 0; k < steps.size(); ++k) {
          tokens[i].push_back(steps[k].token);
          seconds += steps[k].seconds;
          if (k > 0) later += steps[k].seconds;
          path.positions += steps[k].positions;
        }
        path.ts.push_back(static_cast<double>(n_gen) / seconds);
        path.ttft_ms.push_back(steps[0].seconds * 1e3);
        if (n_gen > 1) path.step_ms.push_back(later * 1e3 / static_cast<double>(n_gen - 1));
      }
      if (tokens[0] != tokens[1]) {
        fail("cache A/B: cached and uncached greedy decoding differ (run {}); the KV cache is wrong", r);
      }
    }
    // The work each path must have done: the prompt, then one position per step (cached) or
    // the whole context per step (recomputed: n_prompt + k positions at step k).
    const uint64_t want_cached = n_prompt + (n_gen - 1);
    const uint64_t want_uncached = n_gen * n_prompt + n_gen * (n_gen - 1) / 2;
    if (paths[0].positions != want_cached || paths[1].positions != want_uncached) {
      fail("cache A/B: pushed {} (cached) and {} (uncached) positions, expected {} and {}", paths[0].positions,
           paths[1].positions, want_cached, want_uncached);
    }
    nlohmann::json ab = base;
    ab["bench"] = "generate-cache-ab";
    ab["n_prompt"] = n_prompt;
    ab["n_gen"] = n_gen;
    ab["identical_output"] = true;
    std::string parts;
    for (const Path& path : paths) {
      const Summary t = summarize(path.ts), first = summarize(path.ttft_ms);
      const std::string p = path.name;
      ab[p + "_samples_ts"] = path.ts;
      ab[p + "_median_ts"] = t.median;
      ab[p + "_min_ts"] = t.min;
      ab[p + "_max_ts"] = t.max;
      ab[p + "_ttft_ms_median"] = first.median;
      ab[p + "_positions"] = path.positions;
      parts += fmt::format("{}{} {:.2f} tok/s, TTFT {:.1f} ms", parts.empty() ? "" : "; ", p, t.median, first.median);
      if (!path.step_ms.empty()) {
        const Summary step = summarize(path.step_ms);
        ab[p + "_step_ms_median"] = step.median;
        ab[p + "_step_ms_min"] = step.min;
        parts += fmt::format(", {:.2f} ms per later step", step.median);
      }
      parts += fmt::format(", {} positions pushed", path.positions);
    }
    const double speedup = summarize(paths[0].ts).median / summarize(paths[1].ts).median;
    out.notes.push_back(fmt::format("cache A/B ({} runs alternated, {} tokens after a {}-token prompt, identical "
                                    "tokens): {} (cached x{:.2f})",
                                    f.repetitions, n_gen, n_prompt, parts, speedup));
    out.records.push_back(std::move(ab));
  }
  if (grammar_requested(f.grammar)) {
    auto [c_record, c_note] = measure_constrained(f.grammar, m, prompt, n_gen, f.repetitions, base);
    out.records.push_back(std::move(c_record));
    out.notes.push_back(std::move(c_note));
  }
  if (f.step_curve > 0) {
    auto [step_record, step_note] = measure_step_curve(m, prompt, static_cast<size_t>(f.step_curve), f.repetitions, base);
    out.records.push_back(std::move(step_record));
    out.notes.push_back(std::move(step_note));
  }
  if (speculation.enabled() || f.oracle_rate) {
    auto [spec_record, spec_note] = measure_speculation(f, speculation, m, prompt, n_gen, base);
    out.records.push_back(std::move(spec_record));
    out.notes.push_back(std::move(spec_note));
  }
  return out;
}

// The markdown table's row of a pp or tg record, as llama-bench names the tests.
std::string md_row(const nlohmann::json& r) {
  const uint64_t depth = r["n_depth"].get<uint64_t>();
  const std::string test = r["n_gen"].get<uint64_t>() == 0
                               ? fmt::format("pp{}", r["n_prompt"].get<uint64_t>())
                               : fmt::format("tg{}{}", r["n_gen"].get<uint64_t>(), depth ? fmt::format(" @ d{}", depth) : "");
  const double median = r["median_ts"], min = r["min_ts"], max = r["max_ts"];
  return fmt::format("| {} | {} | {:.1f} M | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.1f}% |",
                     std::filesystem::path(r["model_filename"].get<std::string>()).filename().string(),
                     format_bytes(r["model_size"].get<double>()), r["model_n_params"].get<double>() / 1e6,
                     r["dtype"].get<std::string>(), r["isa"].get<std::string>(), r["n_threads"].get<int>(), test, median,
                     min, median > 0 ? 100.0 * (max - min) / median : 0.0);
}

constexpr const char* kCsvColumns[] = {"model_filename", "dtype", "isa", "n_threads", "n_prompt", "n_gen", "n_depth",
                                       "avg_ts", "stddev_ts", "median_ts", "min_ts", "max_ts", "build_commit", "cpu_info"};

std::string csv_field(const nlohmann::json& v) {
  std::string text = v.is_string() ? v.get<std::string>() : v.dump();
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void run(const BenchFlags& f) {
  const Format format = format_of(f.format);
  for (int64_t p : f.n_prompt) if (p < 1) fail("-p must be >= 1, got {}", p);
  for (int64_t n : f.n_gen) if (n < 1) fail("-n must be >= 1, got {}", n);
  for (int64_t t : f.threads) if (t < 0) fail("-t must be >= 0 (0 = one per physical core), got {}", t);
  std::vector<int64_t> thread_counts = f.threads;
  if (thread_counts.empty()) {
    for (int t : threads_from_env(/*list=*/true)) thread_counts.push_back(t);
    if (thread_counts.empty()) thread_counts.push_back(0);
  }
  if (f.repetitions < 1) fail("-r must be >= 1, got {}", f.repetitions);
  if (f.step_curve < 0 || f.step_curve > 64) fail("--step-curve takes 1..64 decoding sequences, got {}", f.step_curve);
  if (f.probe_mib < 0) fail("--probe-mib must be >= 0 (0 = no bandwidth probe), got {}", f.probe_mib);
  if (!(f.compute_gflops >= 0)) fail("--compute-gflops must be >= 0 (0 = none), got {}", f.compute_gflops);
  (void)grammar_requested(f.grammar);  // --json, --json-schema, --grammar: at most one, before any run
  // Inside the repository the records go to bench/results.jsonl unless told otherwise; outside
  // it (no ./bench) nowhere but stdout.
  std::string results = f.results;
  if (results.empty() && std::filesystem::is_directory("bench")) results = "bench/results.jsonl";
  if (!results.empty()) check_bench_results_path(results);  // before the runs, not after them
  if (f.compare && results.empty()) fail("--compare needs a results file (--results FILE, or ./bench)");
  // The history the run is compared with: the file as it was before this run's records.
  std::vector<nlohmann::json> history;
  if (f.compare && std::filesystem::exists(results)) history = read_bench_records(results);

  // --draft-max also sets the oracle's k (Speculation refuses it without a drafter of its own).
  const bool oracle_alone = f.oracle_rate && f.speculation.lookup == std::nullopt && f.speculation.draft.empty() &&
                            f.speculation.draft_self.empty();
  SpeculationFlags own = f.speculation;
  if (oracle_alone) own.draft_max.reset();
  Speculation speculation(own);
  if (f.oracle_rate) {
    if (f.speculation.draft_max && (*f.speculation.draft_max < 0 || *f.speculation.draft_max > 64)) {
      fail("--draft-max must be 0 to 64, got {}", *f.speculation.draft_max);
    }
    if (!(*f.oracle_rate >= 0 && *f.oracle_rate <= 1)) fail("--draft-oracle must be 0 to 1, got {}", *f.oracle_rate);
    if (f.speculation.lookup) fail("--draft-oracle excludes --lookup (it overrides a draft model's choices, with --draft or --draft-self)");
  }
  std::vector<nlohmann::json> records;
  std::vector<std::string> notes;
  for (int64_t t : thread_counts) {
    ModelFlags flags = f.model;
    flags.threads = static_cast<int>(t);
    OpenedModel m = load_model(flags);
    speculation.load(flags, m);
    for (int64_t p : f.n_prompt) {
      for (int64_t n : f.n_gen) {
        if (static_cast<size_t>(p + n) > m.model.max_context()) {
          fail("-p {} + -n {} exceed the context of {} positions", p, n, m.model.max_context());
        }
      }
    }
    // The read roofline, measured with the model's thread count (its pool sleeps meanwhile).
    Summary bandwidth;
    if (f.probe_mib > 0) {
      ThreadPool probe_pool(m.model.threads());
      bandwidth = summarize(measure_read_bandwidth(probe_pool, static_cast<size_t>(f.probe_mib) << 20, 5));
    }
    for (int64_t p : f.n_prompt) {
      for (int64_t n : f.n_gen) {
        Measured one = measure(f, m, static_cast<size_t>(p), static_cast<size_t>(n), bandwidth, speculation);
        for (auto& r : one.records) records.push_back(std::move(r));
        for (auto& line : one.notes) notes.push_back(std::move(line));
      }
    }
  }
  for (const nlohmann::json& r : records) {
    if (!results.empty()) append_bench_record(r, results);
  }

  switch (format) {
    case Format::Md:
      fmt::print("| model | size | params | dtype | isa | threads | test | t/s median | t/s min | spread |\n");
      fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
      for (const nlohmann::json& r : records) {
        if (r["bench"] == "generate") fmt::print("{}\n", md_row(r));
      }
      fmt::print("\n");
      for (const std::string& line : notes) fmt::print("{}\n", line);
      break;
    case Format::Csv: {
      std::string line;
      for (const char* c : kCsvColumns) line += (line.empty() ? "" : ",") + std::string(c);
      fmt::print("{}\n", line);
      for (const nlohmann::json& r : records) {
        if (r["bench"] != "generate") continue;
        line.clear();
        for (const char* c : kCsvColumns) line += (line.empty() ? "" : ",") + csv_field(r[c]);
        fmt::print("{}\n", line);
      }
      break;
    }
    case Format::Json:
      fmt::print("{}\n", nlohmann::json(records).dump(2));
      break;
    case Format::Jsonl:
      for (const nlohmann::json& r : records) fmt::print("{}\n", r.dump());
      break;
  }
  if (!results.empty()) fmt::print(stderr, "nanoinfer: {} records appended to {}\n", records.size(), results);
  if (f.compare) {
    const std::vector<FigureVerdict> verdicts = compare_records(history, records);
    fmt::print(stderr, "{}", format_verdicts(verdicts));
    for (const FigureVerdict& v : verdicts) {
      if (v.regression) throw CLI::RuntimeError(3);  // as bench compare's exit status
    }
  }
}

void setup_bench_generate(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  add_model_flags(app, f->model);
  // -t takes a list here, as llama-bench's.
  app.remove_option(app.get_option("--threads"));
  app.add_option("-t,--threads", f->threads,
                 "Thread counts, comma-separated (0 = one per physical core; default: $NANOINFER_THREADS when set, "
                 "a list too, else 0)")
      ->delimiter(',');
  app.add_option("-p,--n-prompt", f->n_prompt, "Prompt lengths to prefill, comma-separated (default 64)")->delimiter(',');
  app.add_option("-n,--n-gen", f->n_gen, "Tokens to decode after the prompt, comma-separated (default 32)")->delimiter(',');
  app.add_option("-r,--repetitions", f->repetitions, "Measured runs after one warm-up (default 5)");
  app.add_option("--step-curve", f->step_curve,
                 "Also time serve's mixed step: B sequences decoding plus 0..64 rows of a prompt at depth -p, in one "
                 "pass, alternated (what serve --step-tokens trades)");
  app.add_flag("--cache-ab", f->cache_ab,
               "Also time cached against uncached (full recompute) decoding, asserting equal tokens");
  app.add_option("--compute-gflops", f->compute_gflops,
                 "The compute roofline in GFLOP/s (the compute probe of tools/bench/kernel-tiers, a \"compute\" "
                 "record of bench/kernels.jsonl): prefill's FLOP rate is also printed as a share of it");
  app.add_option("--probe-mib", f->probe_mib,
                 "Buffer of the read-bandwidth probe the roofline share is computed from, in MiB "
                 "(default 1024; 0 = no probe)");
  add_speculation_flags(app, f->speculation);
  app.add_option("--draft-oracle", f->oracle_rate,
                 "Speculative A/B with drafts that know the plain greedy continuation, each position's draft "
                 "right with probability P (0 to 1): what verification costs at that acceptance, drafting for free; "
                 "with --draft or --draft-self the draft model drafts as usual (its cost) and the oracle overrides "
                 "which of its tokens are right")
      ->type_name("P");
  add_grammar_flags(app, f->grammar);  // the constrained A/B: mask and compile costs too
  app.add_option("--prompt-file", f->prompt_file,
                 "Take the prompt's first -p tokens from this text file (default: pseudo-random token ids)");
  app.add_option("-o,--output", f->format, "What stdout shows: md (default), csv, json or jsonl, as llama-bench's -o");
  app.add_flag("--compare", f->compare,
               "Compare this run's records with the results file's earlier ones of this machine and test (as "
               "bench compare; the report on stderr); exit 3 on a regression");
  app.add_option("--results", f->results,
                 "JSON-lines file the records are appended to (default: bench/results.jsonl when ./bench exists, "
                 "else none)");
  app.callback([f] { run(*f); });
}

const bool registered_bench_generate = register_command(
    {"bench", "generate",
     "Prefill/decode tokens per second, time to first token, peak RSS; bytes and barriers per token, % of the read roofline",
     setup_bench_generate});

}  // namespace
}  // namespace nanoinfer::cli
