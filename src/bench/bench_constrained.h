// bench generate --json / --json-schema FILE / --grammar FILE: what constrained decoding costs
// (src/bench/bench_constrained.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nanoinfer/logit_processor.h"
#include "nanoinfer/open_model.h"

namespace nanoinfer {
class VocabTrie;  // nanoinfer/grammar.h
}  // namespace nanoinfer

namespace nanoinfer::bench {

// The grammar under test: its name in the record ("json_object", "json_schema:FILE",
// "gbnf:FILE") and how a request compiles it into a processor that ends at `eos_ids`, over the
// vocabulary trie built once beforehand.
struct GrammarUnderTest {
  std::string name;
  std::function<std::unique_ptr<LogitProcessor>(const std::vector<int32_t>& eos_ids,
                                                std::shared_ptr<const VocabTrie> trie)>
      compile;
};

// Greedy decoding of `prompt` for up to n_gen steps, plain and under the grammar, alternated
// `repetitions` times after one warm-up of each (so drift in machine load hits both alike);
// plus the grammar's own costs: building the vocabulary trie (once per tokenizer, as serve
// does at start), compiling the grammar per request (schema -> GBNF -> rules -> processor),
// and the mask per token, timed alone by replaying the constrained run's tokens through a
// fresh processor. `record` carries the provenance fields; returns it filled, and a note.
std::pair<nlohmann::json, std::string> measure_constrained(const GrammarUnderTest& grammar, OpenedModel& m,
                                                           const std::vector<int32_t>& prompt, size_t n_gen,
                                                           int64_t repetitions, nlohmann::json record);

}  // namespace nanoinfer::bench
