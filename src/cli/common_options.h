// Flags shared by the commands that run a model (generate, chat, perplexity, serve, bench
// generate): -m, -t, -c, --isa, --dtype and --kv-type, their validation, and loading the model directory they name.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanoinfer/logit_processor.h"
#include "nanoinfer/open_model.h"
#include "nanoinfer/tokenizer.h"

namespace nanoinfer {
class VocabTrie;  // nanoinfer/grammar.h
}  // namespace nanoinfer

namespace nanoinfer::cli {

struct ModelFlags {
  std::string model_dir;       // empty: the embedded default model
  std::optional<int> threads;  // -t; unset: NANOINFER_THREADS, else 0 = physical cores
  int64_t context = 0;         // 0 = the model's default
  std::string isa = "auto";
  std::string dtype = "as-stored";
  std::string kv_type = "f16";
  bool no_tune = false;  // --no-tune: the default split of every product, not the cache's
};

void add_model_flags(CLI::App& app, ModelFlags& flags);

// The environment variable that gives every -t its default (a -t on the command line wins), and
// the help text of a -t that takes one count.
inline constexpr const char* kThreadsEnv = "NANOINFER_THREADS";
inline constexpr const char* kThreadsHelp =
    "Threads (0 = one per physical core; default: $NANOINFER_THREADS when set, else 0)";
// NANOINFER_THREADS as thread counts: empty when unset or empty. One integer >= 0, or where -t
// takes a list (`list`), comma-separated integers; anything else is an Error naming the variable.
std::vector<int> threads_from_env(bool list = false);
// -t when given, else NANOINFER_THREADS, else 0; a negative -t is an Error. Not clamped.
int resolve_threads(const std::optional<int>& flag);

// Validates the flags and turns them into the engine's options (one-line errors).
OpenOptions open_options(const ModelFlags& flags);
// open_options + open_model; prints the tuning cache's note (a file ignored, and why) to stderr.
OpenedModel load_model(const ModelFlags& flags);

// Sampling flags (--temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed); unset flags
// stay unset so generation_config.json can supply them.
void add_sampling_flags(CLI::App& app, SamplingOverrides& overrides);

// What the commands that generate from one prompt share (generate, viz): the model and
// sampling flags, -p, -n (with the command's default and help) and --chat.
// A text file's contents ('-': stdin), up to kMaxTextFileBytes.
std::string read_input_file(const std::string& path);

struct PromptFlags {
  ModelFlags model;
  SamplingOverrides sampling;
  std::string prompt;  // -p TEXT, or the contents of -f FILE
  bool prompt_given = false;
  int64_t n_predict = 0;
  bool chat = false;
};
void add_prompt_flags(CLI::App& app, PromptFlags& flags, int64_t default_n, std::string_view n_help);
// The prompt's tokens, encoded as every front end encodes what a user typed (chat: one user
// turn through the template, special-token text in it kept as text).
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const PromptFlags& flags);
// Fails (one line, naming `command`) unless -p or -f gave the prompt: before any model loads.
void require_prompt(const PromptFlags& flags, std::string_view command);

// Constrained decoding flags of generate and chat: --json (any JSON object), --json-schema FILE,
// --grammar FILE (GBNF). At most one.
struct GrammarFlags {
  bool json = false;
  std::string json_schema_file;
  std::string grammar_file;
};
void add_grammar_flags(CLI::App& app, GrammarFlags& flags);
// Whether one of them is given; more than one is an error.
bool grammar_requested(const GrammarFlags& flags);
// The grammar processor the flags ask for (nullptr: none), ending at `eos_ids`, over `trie`
// (nullptr: the tokenizer's, built here; a server or a benchmark builds it once).
std::unique_ptr<LogitProcessor> grammar_processor(const GrammarFlags& flags, const Tokenizer& tok,
                                                  const std::vector<int32_t>& eos_ids,
                                                  std::shared_ptr<const VocabTrie> trie = nullptr);

// "-n" and friends are checked here rather than by CLI11 so every error is one line.
void require_non_negative(int64_t value, std::string_view flag);

// Human-readable sizes for the stderr summaries.
std::string format_bytes(double bytes);

}  // namespace nanoinfer::cli
