// bench generate's own measurement (src/bench/bench_generate.cpp): prefill and decode speed of
// a fresh sequence over repeated runs, the work a decode step does, and the pp/tg records.
// Field names are llama-bench's where one exists.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_record.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer::bench {

// The benchmark's prompt: the first n tokens of `prompt_file` (as a user's text is encoded),
// else, when it is empty, the splitmix64 stream of seed 0 over the tokenizer's ids.
std::vector<int32_t> bench_prompt(size_t n, const Tokenizer& tok, const std::string& prompt_file);

// What one extra prefill + decode pass counts beyond the timed runs (attention may join the
// pool only from some context length on, so the decode figures are means over the depths the
// runs decoded).
struct WorkCounts {
  size_t kv_bytes_per_position = 0;
  double barriers_per_token = 0;
  double attention_share_prefill = 0, attention_share_decode = 0;  // of the wall time
  double prefill_flops = 0;                                        // the whole prompt's
  double decode_product_flops = 0, decode_attention_flops = 0;     // per decoded token
  double decode_activation_bytes = 0;                              // read and written by the products
};

struct GenerateOptions {
  int64_t repetitions = 5;    // timed runs, after one warm-up
  Summary bandwidth;          // the read-bandwidth probe's GB/s (a zero median: no probe)
  size_t probe_bytes = 0;     // its buffer (0: no probe)
  double compute_gflops = 0;  // the compute roofline (0: none)
};

// One -p/-n combination on an opened model.
struct GenerateMeasure {
  std::vector<double> pp, tg,
      ttft;  // per timed run: prefill and decode tokens/s, seconds to the first token
  Summary pp_summary, tg_summary, ttft_summary;
  double effective_gbps = 0;  // weight bytes per token at the median decode speed
  double roofline_pct = 0;    // its share of the probe's median (0: no probe)
  double prefill_gflops = 0;  // the prompt's FLOPs at the median prefill speed
  size_t peak_rss = 0;
  WorkCounts work;
  nlohmann::json base;  // the fields every record of this model and run shares ("bench": "generate")
  nlohmann::json pp_record, tg_record;
};

// Greedy runs of a fresh sequence (`prompt`, then exactly n_gen decode steps), one warm-up and
// `options.repetitions` timed; then the extra pass of WorkCounts; then the records.
GenerateMeasure measure_generate(const OpenedModel& m, const std::vector<int32_t>& prompt, size_t n_gen,
                                 const GenerateOptions& options);

}  // namespace nanoinfer::bench
