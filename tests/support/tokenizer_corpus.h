// A seeded generator of adversarial strings for byte-level BPE tokenizers, weighted toward
// where they break: white space of every kind, code points from every plane, combining
// marks and NFC-changing sequences, CJK, emoji and ZWJ sequences, digit runs, contractions
// in both cases, long runs of one character, special tokens and look-alikes mid-text, and
// (a small share) invalid UTF-8.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nanoinfer::test {

struct CorpusOptions {
  uint64_t seed = 20250101;
  size_t count = 10000;
  bool include_invalid_utf8 = true;
  // Special tokens and look-alikes to plant in the text.
  std::vector<std::string> special_tokens = {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"};
};

// Deterministic on every platform (own PRNG, no std:: distributions).
std::vector<std::string> adversarial_corpus(const CorpusOptions& options = {});

}  // namespace nanoinfer::test
