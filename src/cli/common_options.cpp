#include "common_options.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>
#include <unistd.h>

#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/generation_step.h"
#include "nanoinfer/grammar.h"
#include "nanoinfer/kv_cache.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer::cli {

void add_model_flags(CLI::App& app, ModelFlags& flags) {
  app.add_option("-m,--model", flags.model_dir,
                 "Model directory (config.json, model.safetensors, tokenizer.json), a .gguf file, or "
                 "ORG/NAME[@REVISION][:QUANT] of the Hugging Face cache (see `nanoinfer pull`); "
                 "default: the model built into this binary (data/default-model)");
  app.add_option("-t,--threads", flags.threads, kThreadsHelp);
  app.add_option("-c,--ctx-size", flags.context,
                 "Context length in tokens (0 = the model's max_position_embeddings; KV memory is committed "
                 "as positions are used)");
  app.add_option("--isa", flags.isa,
                 "Kernel instruction set: auto (the best this CPU supports), scalar, avx2, avx2-vnni, "
                 "avx512, avx512-vnni or avx512-bf16 (bf16 weights on vdpbf16ps, activations rounded "
                 "to bf16; other types as avx512-vnni); an ISA this CPU/OS lacks is refused, naming "
                 "what is missing. The environment variable NANOINFER_CPU_DISABLE (comma-separated CPU "
                 "features, e.g. avx512vnni or avx512bf16) hides features from detection, to test fallbacks");
  app.add_option("--dtype", flags.dtype,
                 "Weights in memory: as-stored (bf16 kept, a quantized file's blocks kept, f16 widened), "
                 "f32 (widen at load), bf16 (round at load), " +
                     weight_type_names(WeightTypeKind::Quantized) +
                     " (quantize a float file at load, round to nearest, logits matrix int8; `nanoinfer quantize` "
                     "does better)");
  app.add_option("--kv-type", flags.kv_type,
                 "KV cache element type: f16 (default: half of f32's bytes), bf16 (half, coarser) or f32 "
                 "(exact, for comparisons)");
  app.add_flag("--no-tune", flags.no_tune,
               "Split every product across the threads by the built-in defaults, ignoring what `nanoinfer bench "
               "tune` measured on this machine (its cache, $XDG_CACHE_HOME/nanoinfer/tune-ISA-tN.json); the "
               "output is bitwise the same either way, only the speed differs");
}

void add_sampling_flags(CLI::App& app, SamplingOverrides& o) {
  // CLI11 fills std::optional members only when the flag is given.
  app.add_option("--temp", o.temperature, "Temperature; 0 = greedy (the way to compare engines)");
  app.add_option("--top-k", o.top_k, "Keep the k most probable tokens (0 = off)");
  app.add_option("--top-p", o.top_p, "Nucleus: smallest set with probability >= p, in (0, 1]");
  app.add_option("--min-p", o.min_p, "Drop tokens below min-p x the top probability, in [0, 1]");
  app.add_option("--repeat-penalty", o.repetition_penalty,
                 "Repetition penalty over the context, > 0 (1 = off; Hugging Face semantics)");
  app.add_option("--seed", o.seed, "Random seed (default: random, shown with --verbose)");
}

void require_non_negative(int64_t value, std::string_view flag) {
  if (value < 0) fail("{} must be >= 0, got {}", flag, value);
}

std::string format_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
}

std::vector<int> threads_from_env(bool list) {
  const char* value = std::getenv(kThreadsEnv);
  if (value == nullptr || *value == '\0') return {};
  const std::string_view text(value);
  std::vector<int> counts;
  size_t start = 0;
  while (true) {
    const size_t end = list ? std::min(text.find(',', start), text.size()) : text.size();
    const std::string_view item = text.substr(start, end - start);
    int n = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), n);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || n < 0) {
      fail("{}='{}': not {} (0 = one per physical core; -t overrides it)", kThreadsEnv, text,
           list ? "a comma-separated list of thread counts >= 0" : "a thread count, an integer >= 0");
    }
    counts.push_back(n);
    if (end == text.size()) break;
    start = end + 1;
  }
  return counts;
}

int resolve_threads(const std::optional<int>& flag) {
  if (flag) {
    if (*flag < 0) fail("-t must be >= 1 (or 0 = one per physical core), got {}", *flag);
    return *flag;
  }
  const std::vector<int> env = threads_from_env();
  return env.empty() ? 0 : env.front();
}

OpenOptions open_options(const ModelFlags& flags) {
  const int threads = resolve_threads(flags.threads);
  require_non_negative(flags.context, "-c");
  OpenOptions options;
  if (flags.dtype != "as-stored") {
    options.model.weights = weight_type_from_name(flags.dtype);
    if (!options.model.weights) fail("--dtype must be as-stored, {}, got '{}'", weight_type_names(), flags.dtype);
  }
  if (flags.isa != "auto") {
    options.model.isa = parse_isa(flags.isa);
    if (!options.model.isa) {
      std::string known;
      for (Isa isa : all_isas()) known += fmt::format("{}{}", known.empty() ? "" : ", ", isa_name(isa));
      fail("--isa must be auto or one of {}; got '{}'", known, flags.isa);
    }
    // Whether this machine runs it is checked once, by the model before it loads anything.
  }
  const std::optional<DType> kv = kv_type_from_name(flags.kv_type);
  if (!kv) fail("--kv-type must be f32, bf16 or f16, got '{}'", flags.kv_type);
  options.model.kv_type = *kv;
  options.model.threads = ThreadPool::clamp_threads(threads);
  options.model.max_context = static_cast<size_t>(flags.context);
  options.use_tuning_cache = !flags.no_tune;
  return options;
}

OpenedModel load_model(const ModelFlags& flags) {
  OpenedModel m = open_model(flags.model_dir, open_options(flags));
  if (!m.tuning.note.empty()) fmt::print(stderr, "{}\n", m.tuning.note);
  return m;
}

void add_prompt_flags(CLI::App& app, PromptFlags& flags, int64_t default_n, std::string_view n_help) {
  add_model_flags(app, flags.model);
  CLI::Option* text = app.add_option_function<std::string>(
      "-p,--prompt",
      [&flags](const std::string& value) {
        flags.prompt = value;
        flags.prompt_given = true;
      },
      "Prompt text");
  CLI::Option* file = app.add_option_function<std::string>(
      "-f,--file",
      [&flags](const std::string& path) {
        flags.prompt = read_input_file(path);
        flags.prompt_given = true;
      },
      "Read the prompt from this text file ('-' for stdin) instead of -p");
  text->excludes(file);
  flags.n_predict = default_n;
  app.add_option("-n,--n-predict", flags.n_predict, fmt::format("{} (default {})", n_help, default_n));
  add_sampling_flags(app, flags.sampling);
  app.add_flag("--chat", flags.chat, "Wrap the prompt in the chat template as one user turn");
}

std::string read_input_file(const std::string& path) {
  if (path == "-") return read_all(STDIN_FILENO, "<stdin>", kMaxTextFileBytes);
  return read_file(path, kMaxTextFileBytes);
}

void require_prompt(const PromptFlags& flags, std::string_view command) {
  if (!flags.prompt_given) fail("{}: give the prompt with -p TEXT or -f FILE", command);
}

std::vector<int32_t> encode_prompt(const Tokenizer& tok, const PromptFlags& flags) {
  if (!flags.chat) return encode_raw_prompt(tok, flags.prompt);
  const ChatMessage user{"user", flags.prompt};
  return encode_chat_prompt(tok, {&user, 1});
}

void add_grammar_flags(CLI::App& app, GrammarFlags& flags) {
  app.add_flag("--json", flags.json, "Constrain the output to a JSON object");
  app.add_option("--json-schema", flags.json_schema_file,
                 "Constrain the output to JSON valid against this JSON Schema file");
  app.add_option("--grammar", flags.grammar_file, "Constrain the output to this GBNF grammar file");
}

bool grammar_requested(const GrammarFlags& flags) {
  const int given =
      (flags.json ? 1 : 0) + (flags.json_schema_file.empty() ? 0 : 1) + (flags.grammar_file.empty() ? 0 : 1);
  if (given > 1) fail("--json, --json-schema and --grammar exclude each other");
  return given == 1;
}

std::unique_ptr<LogitProcessor> grammar_processor(const GrammarFlags& flags, const Tokenizer& tok,
                                                  const std::vector<int32_t>& eos_ids,
                                                  std::shared_ptr<const VocabTrie> trie) {
  if (!grammar_requested(flags)) return nullptr;
  constexpr uint64_t kMaxBytes = 16u << 20;
  // The source named in every message: the schema's file for a schema (a failure in its GBNF
  // is still about the schema), the grammar's file, or --json. Compiled under the same budget
  // and probe as a grammar sent to serve.
  const std::string source = !flags.json_schema_file.empty() ? "--json-schema " + flags.json_schema_file
                             : !flags.grammar_file.empty()   ? flags.grammar_file
                                                             : std::string("--json");
  Grammar grammar = [&] {
    try {
      GrammarBudget budget;
      std::string gbnf;
      if (flags.json) {
        gbnf = json_object_gbnf();
      } else if (!flags.json_schema_file.empty()) {
        gbnf = json_schema_to_gbnf(read_file(flags.json_schema_file, kMaxBytes), &budget);
      } else {
        gbnf = read_file(flags.grammar_file, kMaxBytes);
        if (gbnf.find_first_not_of(" \t\r\n") == std::string::npos) fail("the grammar file is empty");
      }
      Grammar g = Grammar::from_gbnf(gbnf, "root", &budget);
      g.probe(budget);
      return g;
    } catch (const Error& e) {
      fail("{}: {}", source, e.what());
    }
  }();
  return std::make_unique<GrammarProcessor>(grammar, trie != nullptr ? std::move(trie) : VocabTrie::of(tok), eos_ids);
}

}  // namespace nanoinfer::cli
