// The bad-input table: the built binary run on hostile and broken input, one case per row.
// Every case must end the same way: exit code 1, not killed by a signal, no hang (a minute's
// timeout), exactly one line on stderr that starts "nanoinfer: error: ", names the problem
// (a substring) and is short, and no partial output file or temporary file left behind.
//
// The loader's rows (non-finite weights found at load, inspect reporting them, generate's
// checked writes) are a second table at the end.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanoinfer/gguf_export.h"
#include "nanoinfer/thread_pool.h"
#include "support/files.h"
#include "support/generation_model.h"
#include "support/run_cli.h"

namespace nanoinfer {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct BadInputCase {
  std::string name;                            // the test's name
  std::function<void(const fs::path&)> setup;  // builds the case's files in its directory
  std::vector<std::string> args;               // "{d}" stands for the case's directory
  std::string expect;                          // a substring of the one stderr line
  std::string stdin_path = "";                 // e.g. /dev/zero
  std::string stdin_text = "";
  std::string stdout_path = "";     // e.g. /dev/full
  std::string must_not_exist = "";  // relative to the case's directory
};

std::ostream& operator<<(std::ostream& os, const BadInputCase& c) {
  return os << c.name;
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// ---- setups: {d}/m is the tiny model (tiny-untied + its tokenizer) unless a case breaks it ----

void tiny(const fs::path& d) {
  test::write_tiny_model_dir(d / "m");
}

// Large texts are made when their case runs, not in the table: gtest builds the table at every
// start of the test binary (each test is its own process), where a 17 MiB string cost every
// process its copies (0.6 CPU-s per start under the sanitizers).
using MakeText = std::function<std::string()>;

auto with_text(std::string name, MakeText make) {
  return [name, make](const fs::path& d) {
    tiny(d);
    test::write_text(d / "m" / name, make());
  };
}

auto with_text(std::string name, std::string text) {
  return with_text(std::move(name), MakeText([text] { return text; }));
}

auto with_fifo(std::string name) {
  return [name](const fs::path& d) {
    tiny(d);
    fs::remove(d / "m" / name);
    ASSERT_EQ(::mkfifo((d / "m" / name).c_str(), 0600), 0);
  };
}

auto with_symlink(std::string name, std::string target) {
  return [name, target](const fs::path& d) {
    tiny(d);
    fs::remove(d / "m" / name);
    fs::create_symlink(target, d / "m" / name);
  };
}

auto with_directory(std::string name) {
  return [name](const fs::path& d) {
    tiny(d);
    fs::remove(d / "m" / name);
    fs::create_directory(d / "m" / name);
  };
}

auto without(std::string name) {
  return [name](const fs::path& d) {
    tiny(d);
    fs::remove(d / "m" / name);
  };
}

// config.json with `key` set to the JSON text `value`.
auto config_with(std::string key, MakeText make_value) {
  return [key, make_value](const fs::path& d) {
    tiny(d);
    const std::string value = make_value();
    Json j = Json::parse(test::read_text(d / "m/config.json"));
    j.erase(key);
    std::string text = j.dump();
    text.insert(text.size() - 1, ",\"" + key + "\":" + value);
    test::write_text(d / "m/config.json", text);
  };
}

auto config_with(std::string key, std::string value) {
  return config_with(std::move(key), MakeText([value] { return value; }));
}

// model.safetensors with its header JSON edited (the data section is kept as it is).
auto header_edited(std::function<void(Json&)> edit) {
  return [edit](const fs::path& d) {
    tiny(d);
    std::vector<std::byte> bytes = test::read_bytes(d / "m/model.safetensors");
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
    Json header = Json::parse(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, len));
    edit(header);
    const std::vector<std::byte> data(bytes.begin() + 8 + static_cast<ptrdiff_t>(len), bytes.end());
    std::vector<std::byte> out = test::raw_safetensors(header.dump(), 0);
    out.insert(out.end(), data.begin(), data.end());
    test::write_bytes(d / "m/model.safetensors", out);
  };
}

auto safetensors_bytes(std::function<void(std::vector<std::byte>&)> edit) {
  return [edit](const fs::path& d) {
    tiny(d);
    std::vector<std::byte> bytes = test::read_bytes(d / "m/model.safetensors");
    edit(bytes);
    test::write_bytes(d / "m/model.safetensors", bytes);
  };
}

void overflowing_logits(const fs::path& d) {
  tiny(d);
  test::make_logits_overflow(d / "m");
}

void text_file(const fs::path& d) {
  tiny(d);
  test::write_text(d / "text.txt", "hello there, this is some text to score and tokenize.\n");
}

// {d}/k.gguf: the default model as Q4_K, every block scale 65504 (generation_model.h); a text.
void huge_k_scales(const fs::path& d) {
  text_file(d);
  test::write_huge_k_scale_gguf(d / "k.gguf", WeightType::Q4_K);
}
void norm_overflow(const fs::path& d) {  // layer 1's ffn norm weights 3e38: its output overflows
  tiny(d);
  test::fill_f32_tensor(d / "m", "model.layers.1.post_attention_layernorm.weight", 3e38f);
}

// r.jsonl (one record), fifo (a FIFO) and link (a symbolic link to r.jsonl).
void bench_files(const fs::path& d) {
  test::write_text(d / "r.jsonl", "{\"bench\":\"load\",\"load_seconds_median\":1}\n");
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  fs::create_symlink(d / "r.jsonl", d / "link");
}

// tokenizer.json of the tiny model edited as JSON.
auto tokenizer_edited(std::function<void(nlohmann::json&)> edit) {
  return [edit](const fs::path& d) {
    tiny(d);
    auto j = nlohmann::json::parse(test::read_text(d / "m/tokenizer.json"));
    edit(j);
    test::write_text(d / "m/tokenizer.json", j.dump());
  };
}

// A config at the largest dimensions accepted (config.h) whose weights need far more room than
// any disk has: 128.3 TiB.
void huge_config(const fs::path& d) {
  tiny(d);
  Json j = Json::parse(test::read_text(d / "m/config.json"));
  j["vocab_size"] = 1 << 20;
  j["hidden_size"] = 1 << 16;
  j["intermediate_size"] = 1 << 18;
  j["num_hidden_layers"] = 1024;
  j["num_attention_heads"] = 1 << 10;
  j["num_key_value_heads"] = 1 << 10;
  test::write_text(d / "huge.json", j.dump());
}

const std::vector<std::string> kGenerate = {"generate", "-m", "{d}/m", "-p", "hello", "-n", "3"};

std::vector<std::string> generate_with(std::vector<std::string> extra) {
  std::vector<std::string> args = kGenerate;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

const std::vector<BadInputCase> kBadInputCases = {
    // ---- JSON nesting and size (each crashed with SIGSEGV before) ----
    {"SafetensorsShapeNested100000Deep",
     safetensors_bytes([](std::vector<std::byte>& b) {
       b = test::raw_safetensors(R"({"a":{"dtype":"F32","shape":)" + nested(100000) + R"(,"data_offsets":[0,0]}})", 0);
     }),
     {"inspect", "{d}/m"}, "model.safetensors: JSON nested deeper than 64 levels"},
    {"ConfigHiddenActNested100000Deep", config_with("hidden_act", [] { return nested(100000); }), {"inspect", "{d}/m"},
     "config.json: JSON nested deeper than 64 levels"},
    {"GenerationConfigValueNested100000Deep",
     with_text("generation_config.json", [] { return "{\"top_k\":" + nested(100000) + "}"; }), kGenerate,
     "generation_config.json: JSON nested deeper than 64 levels"},
    {"TokenizerJsonNested100000Deep", with_text("tokenizer.json", [] { return "{\"x\":" + nested(100000) + "}"; }),
     {"tokenize", "-m", "{d}/m", "-p", "hi"}, "tokenizer.json: JSON nested deeper than 64 levels"},
    {"JsonlLineNested100000Deep",
     [](const fs::path& d) {
       tiny(d);
       test::write_text(d / "in.jsonl", "{\"text\":\"ok\"}\n{\"text\":" + nested(100000) + "}\n");
     },
     {"tokenize", "-m", "{d}/m", "--jsonl", "-f", "{d}/in.jsonl"}, "in.jsonl line 2: JSON nested deeper than 64"},
    {"QuantDeclarationNested100000Deep",  // JSON in a header string: the header's check misses it
     header_edited([](Json& h) { h["__metadata__"]["nanoinfer.weight_types"] = "{\"a\":" + nested(100000) + "}"; }),
     {"inspect", "{d}/m"}, "__metadata__ \"nanoinfer.weight_types\": JSON nested deeper than 64 levels"},
    {"QuantDeclarationMegabyteNameIsQuotedShort",
     header_edited([](Json& h) {
       h["__metadata__"]["nanoinfer.weight_types"] = "{\"" + std::string(1 << 20, 'x') + "\":\"F32\"}";
     }),
     kGenerate, "tensor 'xxxx"},
    {"ConfigMegabyteValueIsQuotedShort", config_with("hidden_act", [] { return "\"" + std::string(1 << 20, 'g') + "\""; }),
     {"inspect", "{d}/m"}, "unsupported hidden_act \"gggg"},
    {"ConfigOverTheSizeCap", with_text("config.json", [] { return "{}" + std::string(17 << 20, ' '); }), {"inspect", "{d}/m"},
     "config.json: too large to read into memory (17825794 bytes; the limit is 16777216 bytes)"},
    // ---- files that are not regular files: no hang, no bad_alloc, the path named ----
    {"ConfigIsAFifo", with_fifo("config.json"), kGenerate, "m/config.json: is a FIFO, not a regular file"},
    {"SafetensorsIsAFifo", with_fifo("model.safetensors"), {"inspect", "{d}/m"},
     "m/model.safetensors: is a FIFO, not a regular file"},
    {"TokenizerIsAFifo", with_fifo("tokenizer.json"), {"tokenize", "-m", "{d}/m", "-p", "hi"},
     "m/tokenizer.json: is a FIFO, not a regular file"},
    {"GenerationConfigIsAFifo", with_fifo("generation_config.json"), kGenerate,
     "m/generation_config.json: is a FIFO, not a regular file"},
    {"ConfigIsDevZero", with_symlink("config.json", "/dev/zero"), {"inspect", "{d}/m"},
     "m/config.json: is a character device, not a regular file"},
    {"TokenizerIsDevZero", with_symlink("tokenizer.json", "/dev/zero"), {"tokenize", "-m", "{d}/m", "-p", "hi"},
     "m/tokenizer.json: is a character device, not a regular file"},
    {"ConfigIsADirectory", with_directory("config.json"), kGenerate, "m/config.json: is a directory, not a file"},
    {"TokenizeFileIsADirectory", tiny, {"tokenize", "-m", "{d}/m", "-f", "{d}/m"}, "/m: is a directory, not a file"},
    {"PerplexityFileIsDevZero", tiny, {"perplexity", "-m", "{d}/m", "-f", "/dev/zero"},
     "/dev/zero: is a character device, not a regular file"},
    {"TokenizeFileMissing", tiny, {"tokenize", "-m", "{d}/m", "-f", "{d}/nope.txt"}, "nope.txt: not found"},
    {"JsonlStdinDevZeroHitsTheLineCap", tiny, {"tokenize", "-m", "{d}/m", "--jsonl", "-f", "-"},
     "<stdin> line 1: longer than the 67108864 byte limit for one line", "/dev/zero"},
    {"GenerationConfigUnreadableIsNotAbsent", with_directory("generation_config.json"), kGenerate,
     "generation_config.json: is a directory, not a file"},
    {"GenerationConfigNotJson", with_text("generation_config.json", "{\"eos_token_id\": "), kGenerate,
     "generation_config.json: not valid JSON"},
    // ---- missing pieces of a model directory ----
    {"ModelDirMissing", tiny, {"generate", "-m", "{d}/nope", "-p", "hi"}, "nope: not a model directory"},
    {"ConfigMissing", without("config.json"), kGenerate, "config.json: not found"},
    {"WeightsMissing", without("model.safetensors"), kGenerate, "model.safetensors: not found"},
    {"TokenizerMissing", without("tokenizer.json"), {"tokenize", "-m", "{d}/m", "-p", "hi"},
     "tokenizer.json: not found"},
    // ---- broken weights files ----
    {"SafetensorsTruncated", safetensors_bytes([](std::vector<std::byte>& b) { b.resize(b.size() / 2); }),
     {"inspect", "{d}/m"}, "run past the end of the data section"},
    {"SafetensorsEmpty", safetensors_bytes([](std::vector<std::byte>& b) { b.clear(); }), kGenerate,
     "model.safetensors: file is empty"},
    {"SafetensorsHeaderLengthPastTheEnd",
     safetensors_bytes([](std::vector<std::byte>& b) { b[3] = std::byte{1}; }), kGenerate,  // + 16 MiB
     "runs past the end of the file"},
    {"SafetensorsHeaderNotJson",
     safetensors_bytes([](std::vector<std::byte>& b) { b[8] = std::byte{'x'}; }), kGenerate,
     "header is not valid JSON"},
    {"SafetensorsShapeDisagreesWithConfig",
     header_edited([](Json& h) { h["lm_head.weight"]["shape"] = {128, 300}; }), kGenerate, "lm_head.weight"},
    // ---- bad values in config.json and tokenizer.json ----
    {"RmsNormEpsAbsurd", config_with("rms_norm_eps", "1e308"), kGenerate,
     "field \"rms_norm_eps\": expected a small positive number in (0, 0.01], found 1e+308"},
    {"HiddenSizeZero", config_with("hidden_size", "0"), {"inspect", "{d}/m"}, "field \"hidden_size\""},
    // Dimensions bounded by what real models use (before: a 103 MB line, or 11 GB then bad_alloc).
    {"LayerCount100000", config_with("num_hidden_layers", "100000"), kGenerate,
     "field \"num_hidden_layers\": expected an integer in [1, 1024], found 100000"},
    {"LayerCount2Pow24", config_with("num_hidden_layers", "16777216"), {"inspect", "{d}/m"},
     "field \"num_hidden_layers\": expected an integer in [1, 1024], found 16777216"},
    // A config claiming 1,000 layers over a 3-layer file: one line with the first three problems
    // and a count of the rest.
    {"ManyProblemsAreCounted", config_with("num_hidden_layers", "1000"), kGenerate,
     "missing tensor 'model.layers.3.self_attn.q_proj.weight' (expected shape [128, 128]); missing tensor"},
    {"ManyProblemsAreCountedNotListed", config_with("num_hidden_layers", "1000"), kGenerate, " more problem(s); `nanoinfer inspect` lists them)"},
    {"UnsupportedModelType", config_with("model_type", "\"gemma3\""), kGenerate, "unsupported model_type \"gemma3\""},
    {"DuplicateVocabularyId",
     tokenizer_edited([](nlohmann::json& j) { j["model"]["vocab"]["zz"] = 65; }),
     {"tokenize", "-m", "{d}/m", "-p", "hi"}, "model.vocab: id 65 is given to two tokens"},
    // ---- a model whose logits are not finite (finite weights that overflow) ----
    {"GenerateNonFiniteLogits", overflowing_logits, kGenerate,
     "generated token 1: the model produced a non-finite logit"},
    {"GenerateTopKNonFiniteLogits", overflowing_logits, generate_with({"--temp", "1", "--top-k", "5"}),
     "generated token 1: the model produced a non-finite logit"},
    {"PerplexityNonFiniteLogits",
     [](const fs::path& d) {
       text_file(d);
       test::make_logits_overflow(d / "m");
     },
     {"perplexity", "-m", "{d}/m", "-f", "{d}/text.txt", "-c", "16"}, "perplexity: the model produced non-finite"},
    {"ChatTurnWithNonFiniteLogitsExitsOne", overflowing_logits, {"chat", "-m", "{d}/m", "-n", "3"},
     "non-finite logit", "", "hello\n"},
    // ---- overflows name the layer (before: rc 0, U+FFFD, "inf +/- inf"); bf16 fits the keys ----
    {"GenerateHugeKQuantScales", huge_k_scales, {"generate", "-m", "{d}/k.gguf", "-p", "hello", "-n", "3"},
     "activation in layer 0 beyond the f16 KV cache's range (k at position 0 is "},
    {"PerplexityHugeKQuantScales", huge_k_scales, {"perplexity", "-m", "{d}/k.gguf", "-f", "{d}/text.txt"},
     "activation in layer 0 beyond the f16 KV cache's range (k at position 0 is "},
    {"ChatHugeKQuantScales", huge_k_scales, {"chat", "-m", "{d}/k.gguf", "-n", "3"},
     "activation in layer 0 beyond the f16 KV cache's range", "", "hello\n"},
    {"PerplexityHugeKQuantScalesBf16Cache", huge_k_scales,
     {"perplexity", "-m", "{d}/k.gguf", "-f", "{d}/text.txt", "-c", "16", "--kv-type", "bf16"},
     "perplexity: overflows in window 1 (mean negative log-likelihood "},
    // An int8 product rounded layer 1's infinities to finite garbage, printed with rc 0:
    {"GenerateInt8NonFiniteActivation", norm_overflow, generate_with({"--dtype", "int8"}),
     "non-finite activation in layer 1 (ffn_norm at position 0 is "},
    {"ChatStdinDevZeroHitsTheLineCap", tiny, {"chat", "-m", "{d}/m", "-n", "3"},
     "<stdin> line 1: longer than the 67108864 byte limit for one line", "/dev/zero"},
    // ---- output that cannot be written ----
    {"TokenizeJsonlToDevFull",
     [](const fs::path& d) {
       tiny(d);
       std::string lines;
       for (int i = 0; i < 20000; ++i) lines += "{\"text\":\"line number " + std::to_string(i) + "\"}\n";
       test::write_text(d / "in.jsonl", lines);
     },
     {"tokenize", "-m", "{d}/m", "--jsonl", "-f", "{d}/in.jsonl"}, "cannot write to standard output", "", "",
     "/dev/full"},
    {"TokenizeToDevFull", tiny, {"tokenize", "-m", "{d}/m", "-p", "hello"}, "cannot write to standard output", "",
     "", "/dev/full"},
    {"PerplexityToDevFull", text_file, {"perplexity", "-m", "{d}/m", "-f", "{d}/text.txt", "-c", "16"},
     "cannot write to standard output", "", "", "/dev/full"},
    {"InspectToDevFull", tiny, {"inspect", "{d}/m"}, "cannot write to", "", "", "/dev/full"},
    {"ChatToDevFull", tiny, {"chat", "-m", "{d}/m", "-n", "3"}, "cannot write to standard output", "",
     "one\ntwo\nthree\n", "/dev/full"},
    {"HelpToDevFull", tiny, {"--help"}, "cannot write to standard output", "", "", "/dev/full"},
    // ---- the command line ----
    {"NoCommand", tiny, {}, "a command is required (commands: bench, chat, embed, generate"},
    {"UnknownCommand", tiny, {"frobnicate"}, "unknown command 'frobnicate' (commands: bench, chat"},
    {"UnknownBenchCommand", tiny, {"bench", "frobnicate"}, "bench: unknown command 'frobnicate'"},
    {"UnknownFlag", tiny, {"generate", "--bogus"}, "generate: unexpected argument '--bogus'"},
    {"UnparsableValue", tiny, generate_with({"-c", "abc"}), "Could not convert: --ctx-size = abc"},
    {"NegativeSeed", tiny, generate_with({"--seed", "-1"}), "--seed: must be a non-negative integer, got -1"},
    {"HugeTokenCount", tiny, {"generate", "-m", "{d}/m", "-p", "hi", "-n", "99999999999999999999"},
     "--n-predict: 99999999999999999999 is out of range"},
    {"NegativeTokenCount", tiny, {"generate", "-m", "{d}/m", "-p", "hi", "-n", "-5"}, "-n must be >= 0, got -5"},
    {"NegativeTemperature", tiny, generate_with({"--temp", "-1"}), "temperature must be >= 0"},
    {"TopPZero", tiny, generate_with({"--top-p", "0"}), "top-p must be in (0, 1]"},
    {"SynthBadDtype", tiny, {"synth", "--config", "{d}/m/config.json", "--out", "{d}/out", "--dtype", "f16"},
     "--dtype f16: expected bf16 or f32", "", "", "", "out"},
    // ---- writers: checked before the first byte, nothing half-written left ----
    // synth leaves nothing behind: no directory it made, no file it wrote (not even empty ones).
    {"SynthLargerThanTheDisk", huge_config, {"synth", "--config", "{d}/huge.json", "--out", "{d}/out"},
     "out/model.safetensors: needs 128.3 TiB but only", "", "", "", "out"},
    {"SynthLargerThanTheDiskMakesNoParents", huge_config,
     {"synth", "--config", "{d}/huge.json", "--out", "{d}/a/b/out"}, "are free on the file system of", "", "",
     "", "a"},
    {"SynthOutUnderAFile", tiny, {"synth", "--config", "{d}/m/config.json", "--out", "{d}/m/config.json/out"},
     "m/config.json/out: cannot create directory: Not a directory"},
    {"SynthCopyBesideIsADirectory",
     [](const fs::path& d) {
       tiny(d);
       fs::create_directories(d / "src/generation_config.json");
       fs::copy_file(d / "m/config.json", d / "src/config.json");
     },
     {"synth", "--config", "{d}/src/config.json", "--out", "{d}/out"},
     "src/generation_config.json: is a directory, not a file", "", "", "", "out"},
    {"SynthOutputInTheWayIsADirectory",  // found before the weights, not after them
     [](const fs::path& d) {
       tiny(d);
       fs::create_directories(d / "out/config.json");
     },
     {"synth", "--config", "{d}/m/config.json", "--out", "{d}/out"}, "out: already exists and is not empty",
     "", "", "", "out/model.safetensors"},
    // A model directory at --out keeps its trained weights (before: replaced, exit 0).
    {"SynthOntoAModelDirectory", tiny, {"synth", "--config", "{d}/m/config.json", "--out", "{d}/m"},
     "m: already exists and is not empty; synth writes a new model directory"},
    {"SynthOutIsASymlink",
     [](const fs::path& d) {
       tiny(d);
       fs::create_directory(d / "empty");
       fs::create_directory_symlink(d / "empty", d / "link");
     },
     {"synth", "--config", "{d}/m/config.json", "--out", "{d}/link"}, "link: is a symbolic link", "", "", "",
     "empty/model.safetensors"},
    // ---- bench files by every file's rules (before: a FIFO hung compare, discard replaced a link) ----
    {"BenchCompareOnAFifo", bench_files, {"bench", "compare", "{d}/fifo"}, "fifo: is a FIFO, not a regular file"},
    {"BenchCompareRunOnAFifo", bench_files, {"bench", "compare", "{d}/r.jsonl", "--run", "{d}/fifo"},
     "fifo: is a FIFO, not a regular file"},
    {"BenchDiscardOnAFifo", bench_files, {"bench", "discard", "{d}/fifo", "--line", "1", "--reason", "x"},
     "fifo: is a FIFO, not a regular file"},
    {"BenchDiscardOnASymlink", bench_files, {"bench", "discard", "{d}/link", "--line", "1", "--reason", "x"},
     "link: is a symbolic link; refusing to replace it"},
    {"BenchRecordStdinDevZeroHitsTheLineCap", tiny, {"bench", "record", "-o", "{d}/r.jsonl"},
     "<stdin> line 1: longer than the 67108864 byte limit for one line", "/dev/zero", "", "", "r.jsonl"},
    {"BenchResultsDirectoryMissing", tiny,
     {"bench", "tokenize", "-m", "{d}/m", "-f", "{d}/m/config.json", "-o", "{d}/nope/results.jsonl"},
     "nope: no such directory for the bench record", "", "", "", "nope"},
    // ---- quantize --format gguf and the float conversion: refused before a byte is written ----
    {"QuantizeUnknownFormat", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int8", "--format", "onnx", "--out", "{d}/x"},
     "--format must be dir or gguf, got 'onnx'", "", "", "", "x"},
    {"QuantizeGgufOutWithoutSuffix", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int8", "--format", "gguf", "--out", "{d}/x.bin"},
     "--out must name a .gguf file with --format gguf, got", "", "", "", "x.bin"},
    {"QuantizeDirectoryNamedGguf", tiny, {"quantize", "-m", "{d}/m", "--type", "int8", "--out", "{d}/x.gguf"},
     "ends in .gguf but --format is dir (add --format gguf", "", "", "", "x.gguf"},
    {"QuantizeGgufOutExists", with_text("../x.gguf", "precious"),
     {"quantize", "-m", "{d}/m", "--type", "int4", "--format", "gguf", "--out", "{d}/x.gguf"},
     "x.gguf: already exists; remove it or choose another name"},
    {"QuantizeGgufDirectoryMissing", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int4", "--format", "gguf", "--out", "{d}/nope/x.gguf"},
     "/nope does not exist", "", "", "", "nope"},
    {"QuantizeFloatTypeToDirectory", tiny, {"quantize", "-m", "{d}/m", "--type", "f32", "--out", "{d}/x"},
     "--type f32 writes a GGUF file only (add --format gguf)", "", "", "", "x"},
    {"QuantizeFloatTypeWithMethod", tiny,
     {"quantize", "-m", "{d}/m", "--type", "bf16", "--format", "gguf", "--method", "gptq", "--out", "{d}/x.gguf"},
     "--method applies to --type int8, int4 or q3_k only, not bf16", "", "", "", "x.gguf"},
    {"QuantizeNegativeCalibWindows", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int4", "--calib-windows", "-1", "--out", "{d}/x"},
     "--calib-windows must be >= 1 (or 0 = the default), got -1", "", "", "", "x"},
    {"QuantizeFloatTypeWithCalibWindows", tiny,
     {"quantize", "-m", "{d}/m", "--type", "f32", "--format", "gguf", "--calib-windows", "3", "--out", "{d}/x.gguf"},
     "--calib-windows applies to --type int8, int4 or q3_k only, not f32", "", "", "", "x.gguf"},
    {"QuantizeGgufNanWeight",
     [](const fs::path& d) {
       tiny(d);
       test::fill_f32_tensor(d / "m", "model.layers.1.mlp.down_proj.weight", NAN);
     },
     {"quantize", "-m", "{d}/m", "--type", "int4", "--method", "rtn", "--format", "gguf", "--out", "{d}/x.gguf"},
     "tensor 'model.layers.1.mlp.down_proj.weight' holds nan", "", "", "", "x.gguf"},
    // ---- quantize --calib through the guarded reader: no hang, no unbounded read, the path named ----
    {"CalibIsAFifo",
     [](const fs::path& d) {
       tiny(d);
       ASSERT_EQ(::mkfifo((d / "calib.txt").c_str(), 0600), 0);
     },
     {"quantize", "-m", "{d}/m", "--type", "int8", "--method", "imatrix", "--calib", "{d}/calib.txt", "--out", "{d}/q"},
     "cannot read calibration text: ", "", "", "", "q"},
    {"CalibIsDevZero", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int8", "--method", "gptq", "--calib", "/dev/zero", "--out", "{d}/q"},
     "/dev/zero: is a character device, not a regular file", "", "", "", "q"},
    {"CalibIsADirectory", tiny,
     {"quantize", "-m", "{d}/m", "--type", "int4", "--calib", "{d}/m", "--out", "{d}/q"},
     "/m: is a directory, not a file", "", "", "", "q"},
    // ---- what quantize copies is checked as generate checks it ----
    {"QuantizeCopiesADeepGenerationConfig",
     with_text("generation_config.json", [] { return "{\"top_k\":" + nested(100000) + "}"; }),
     {"quantize", "-m", "{d}/m", "--type", "int8", "--method", "rtn", "--out", "{d}/q"},
     "generation_config.json: JSON nested deeper than 64 levels", "", "", "", "q"},
    {"QuantizeCopiesADeepTokenizerConfig", with_text("tokenizer_config.json", "{\"x\":" + nested(100000) + "}"),
     {"quantize", "-m", "{d}/m", "--type", "int8", "--method", "rtn", "--out", "{d}/q"},
     "tokenizer_config.json: JSON nested deeper than 64 levels", "", "", "", "q"},
    // ---- messages that name the real problem ----
    {"QuantizeOutEmpty", tiny, {"quantize", "-m", "{d}/m", "--type", "int8", "--method", "rtn", "--out", ""},
     "quantize: --out is empty"},
    {"SynthOutEmpty", tiny, {"synth", "--config", "{d}/m/config.json", "--out", ""}, "synth: --out is empty"},
    {"GgufNameOnAFifo",
     [](const fs::path& d) {
       tiny(d);
       ASSERT_EQ(::mkfifo((d / "x.gguf").c_str(), 0600), 0);
     },
     {"generate", "-m", "{d}/x.gguf", "-p", "hi"}, "x.gguf: is a FIFO, not a regular file"},
    {"GgufWithoutItsSuffix",
     [](const fs::path& d) {
       tiny(d);
       export_gguf(d / "m", d / "x.gguf", std::nullopt);
       fs::rename(d / "x.gguf", d / "x.bin");
     },
     {"generate", "-m", "{d}/x.bin", "-p", "hi"}, "x.bin: a GGUF file without the .gguf suffix"},
    {"ModelPathIsAFile", tiny, {"generate", "-m", "{d}/m/config.json", "-p", "hi"},
     "config.json: is a regular file, not a model directory"},
    {"QuantizeFromAGgufFile",
     [](const fs::path& d) {
       tiny(d);
       export_gguf(d / "m", d / "x.gguf", std::nullopt);
     },
     {"quantize", "-m", "{d}/x.gguf", "--type", "int8", "--out", "{d}/q"}, "x.gguf: a GGUF file; this reads a model directory",
     "", "", "", "q"},
    {"ExportGgufWithoutTokenizer", without("tokenizer.json"),
     {"quantize", "-m", "{d}/m", "--type", "f32", "--format", "gguf", "--out", "{d}/x.gguf"}, "tokenizer.json", "", "",
     "", "x.gguf"},
};

// The loader's cases: non-finite weights are found at load and reported by inspect, naming the
// tensor, and generate checks its streamed writes, so a full output device is one line rather
// than a failure found by main's final flush after the statistics.
const std::vector<BadInputCase> kLoaderCases = {
    {"GenerateToDevFull", tiny, kGenerate, "cannot write to standard output", "", "", "/dev/full"},
    {"NanWeightAtLoad",
     [](const fs::path& d) {
       tiny(d);
       test::fill_f32_tensor(d / "m", "model.norm.weight", NAN);
     },
     kGenerate, "model.norm.weight"},
    {"InspectReportsInfWeight",
     [](const fs::path& d) {
       tiny(d);
       test::fill_f32_tensor(d / "m", "model.layers.0.mlp.down_proj.weight", INFINITY);
     },
     {"inspect", "{d}/m"},
     "model.layers.0.mlp.down_proj.weight"},
};

// Files whose name marks them as an interrupted write.
std::vector<std::string> temporary_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(e.path().string());
  }
  return found;
}

class BadInput : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInput, OneLineExitOneNoSignalNoLeftovers) {
  const BadInputCase& c = GetParam();
  test::TempDir dir;
  c.setup(dir.path());
  std::vector<std::string> args = c.args;
  for (std::string& a : args) {
    for (size_t at; (at = a.find("{d}")) != std::string::npos;) a.replace(at, 3, dir.path().string());
  }
  const test::CliProcess r = test::run_cli_process(
      args, {.stdin_text = c.stdin_text, .stdin_path = c.stdin_path, .stdout_path = c.stdout_path});
  ASSERT_FALSE(r.timed_out) << "hung";
  ASSERT_TRUE(r.exited) << "killed by signal " << r.signal << "; stderr: " << r.err.substr(0, 500);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 500);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err.substr(0, 2000);
  EXPECT_TRUE(r.err.starts_with("nanoinfer: error: ")) << r.err.substr(0, 500);
  EXPECT_TRUE(r.err.ends_with("\n")) << r.err.substr(0, 500);
  EXPECT_THAT(r.err, ::testing::HasSubstr(c.expect));
  // A line a person can read: the path, the problem and a short quote, never a dump.
  EXPECT_LT(r.err.size(), 400u) << r.err.substr(0, 500);
  if (!c.must_not_exist.empty()) {
    EXPECT_FALSE(fs::exists(dir / c.must_not_exist)) << c.must_not_exist;
  }
  EXPECT_EQ(temporary_files(dir.path()), std::vector<std::string>{});
}

std::string case_name(const ::testing::TestParamInfo<BadInputCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Cases, BadInput, ::testing::ValuesIn(kBadInputCases), case_name);
INSTANTIATE_TEST_SUITE_P(LoaderCases, BadInput, ::testing::ValuesIn(kLoaderCases), case_name);

TEST(BadInputTable, HasAtLeastFortyCases) {
  EXPECT_GE(kBadInputCases.size(), 40u);
}

}  // namespace
}  // namespace nanoinfer
