// bench tokenize: what tokenizing costs on one thread (src/bench/bench_tokenize.cpp). Load time
// (tokenizer.json parse + tables), then encode of a whole text as one string with a cold piece
// cache (cleared before each run) and a warm one (filled by the previous run), each in wall
// time and in the thread's CPU time (on a shared machine the steadier measure of the work).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "bench_record.h"

namespace nanoinfer::bench {

struct TokenizeMeasure {
  Summary load, cold, warm;              // wall seconds
  Summary load_cpu, cold_cpu, warm_cpu;  // thread CPU seconds
  size_t tokens = 0;
  nlohmann::json record;  // "bench": "tokenize"
};

// `runs` loads of the tokenizer of `model_dir`, each followed by a cold and a warm encode of
// `text` (named `file` in the record). Throws Error when the two encodes differ.
TokenizeMeasure measure_tokenize(const std::string& model_dir, const std::string& file, const std::string& text,
                                 int runs);

}  // namespace nanoinfer::bench
