// libFuzzer target for the grammar compiler: the first input byte chooses GBNF text or a JSON
// Schema, the rest is the text. Every input must end in a compiled grammar or an Error, never a
// crash, and within a fixed budget of work: the compile runs under a GrammarBudget of
// kFuzzSteps, so an input whose cost grows faster than its size (a quadratic pass, an ambiguity
// that explodes) is refused by the budget with an Error; what must not happen is work the budget
// does not see. That is checked by the clock as a backstop: an input that takes more than
// kMaxSeconds aborts, with the steps it was charged, so a blow-up is a finding, not a timeout.
// A compiled grammar is then run: its first parser state, the probe, and the mask over a small
// vocabulary, whose tokens must agree with the reference parser.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "nanoinfer/error.h"
#include "nanoinfer/grammar.h"

namespace {

constexpr uint64_t kFuzzSteps = 4'000'000;  // ~0.2 s at ~46 ns a step
constexpr double kMaxSeconds = 5.0;         // far past what kFuzzSteps can cost, even under ASan

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nanoinfer;
  if (size == 0) return 0;
  const bool schema = data[0] & 1;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto start = std::chrono::steady_clock::now();
  GrammarBudget budget(kFuzzSteps);
  try {
    const std::string gbnf = schema ? json_schema_to_gbnf(text, &budget) : text;
    const Grammar g = Grammar::from_gbnf(gbnf, "root", &budget);
    g.probe(budget, 256);
    static const std::vector<std::string> vocab = {"a",    "b",    "{", "}", "\"", "\"a",      "{\"",
                                                   "1",    "12",   "-", " ", "\n", "\xc3\xa9", "\xc3",
                                                   "null", "true", ",", ":", "[",  "]"};
    static const VocabTrie trie(vocab);
    TokenMasker masker(g, trie);
    std::vector<uint8_t> allowed;
    GrammarState state(g);
    masker.mask(state, allowed);
    for (size_t id = 0; id < vocab.size(); ++id) {
      GrammarState copy = state;
      if ((allowed[id] != 0) != copy.advance(vocab[id])) {
        std::fprintf(stderr, "fuzz_grammar: the mask and the parser disagree on token '%s'\n", vocab[id].c_str());
        std::abort();
      }
    }
  } catch (const Error&) {
    // refused: fine
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (seconds > kMaxSeconds) {
    std::fprintf(stderr, "fuzz_grammar: %.1f s for %zu bytes, %llu steps charged: work the budget does not see\n",
                 seconds, size, static_cast<unsigned long long>(budget.used()));
    std::abort();
  }
  return 0;
}
