// The tuning cache (nanoinfer/tuning_cache.h): what `bench tune` measured, one small JSON file per
// ISA and thread count, read when a model is opened.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <system_error>

#include "io/atomic_file.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"
#include "nanoinfer/json_limits.h"
#include "nanoinfer/tuning_cache.h"

namespace nanoinfer {
namespace {

constexpr const char* kFormat = "nanoinfer-tuning";
constexpr int kVersion = 1;
constexpr uint64_t kMaxCacheBytes = uint64_t{1} << 20;
constexpr size_t kMaxRules = 4096;

// The rules of a parsed file; throws Error (caught by the reader) naming what is wrong.
Tuning parse_rules(const nlohmann::json& rules) {
  if (!rules.is_array()) fail("\"rules\" is not an array");
  if (rules.size() > kMaxRules) fail("{} rules, more than the limit of {}", rules.size(), kMaxRules);
  Tuning t;
  for (const nlohmann::json& r : rules) {
    if (!r.is_object()) fail("a rule is not an object");
    const auto type = weight_type_from_name(r.value("type", std::string()));
    if (!type) fail("a rule's \"type\" is not a weight type");
    const auto size = [&](const char* key, uint64_t lo, uint64_t hi) -> uint64_t {
      const auto it = r.find(key);
      if (it == r.end() || !it->is_number_unsigned() || it->get<uint64_t>() < lo || it->get<uint64_t>() > hi) {
        fail("a rule's \"{}\" is not an integer in [{}, {}]", key, lo, hi);
      }
      return it->get<uint64_t>();
    };
    ProductShape shape{*type, size("rows", 1, uint64_t{1} << 32), size("cols", 1, uint64_t{1} << 32), false};
    const auto prefill = r.find("prefill");
    if (prefill == r.end() || !prefill->is_boolean()) fail("a rule's \"prefill\" is not true or false");
    shape.prefill = prefill->get<bool>();
    SplitRule rule;
    if (!parse_split(r.value("split", std::string()), rule.split))
      fail("a rule's \"split\" is not auto, always or never");
    rule.chunks_per_thread = static_cast<uint32_t>(size("chunks_per_thread", 0, kMaxChunksPerThread));
    rule.epilogue_kib = static_cast<uint32_t>(size("epilogue_kib", 0, kMaxEpilogueKib));
    if (rule.epilogue_kib != 0 && rule.epilogue_kib < kMinEpilogueKib) {
      fail("a rule's \"epilogue_kib\" is below {}", kMinEpilogueKib);
    }
    t.set(shape, rule);
  }
  return t;
}

}  // namespace

std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        const auto start = line.find_first_not_of(" \t", colon + 1);
        return start == std::string::npos ? "" : line.substr(start);
      }
    }
  }
  return "unknown";
}

std::filesystem::path tuning_cache_path(Isa isa, int threads) {
  const std::string name = fmt::format("tune-{}-t{}.json", isa_name(isa), threads);
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache == '/') {
    return std::filesystem::path(cache) / "nanoinfer" / name;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
    return std::filesystem::path(home) / ".cache" / "nanoinfer" / name;
  }
  return {};
}

TuningCache read_tuning_cache(const std::filesystem::path& file, std::string_view cpu, Isa isa, int threads) {
  TuningCache out;
  out.file = file;
  std::error_code ec;
  if (file.empty() || !std::filesystem::exists(file, ec)) return out;
  const auto ignored = [&](const std::string& why) {
    out.note = fmt::format("nanoinfer: ignoring the tuning cache {}: {} (run `nanoinfer bench tune` to remake it)",
                           file.string(), why);
    return out;
  };
  try {
    const std::string text = read_file(file, kMaxCacheBytes);
    nlohmann::json j;
    if (std::string problem; !try_parse_json(text, j, problem)) return ignored(problem);
    if (!j.is_object() || j.value("format", std::string()) != kFormat) return ignored("not a nanoinfer tuning file");
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kVersion) {
      return ignored(fmt::format("not version {}", kVersion));
    }
    const std::string its_cpu = j.value("cpu", std::string());
    if (its_cpu != cpu) return ignored(fmt::format("measured on '{}', this CPU is '{}'", its_cpu, cpu));
    const std::string its_isa = j.value("isa", std::string());
    if (its_isa != isa_name(isa))
      return ignored(fmt::format("measured for ISA {}, this run uses {}", its_isa, isa_name(isa)));
    if (!j.contains("threads") || !j["threads"].is_number_integer() || j["threads"].get<int>() != threads) {
      return ignored(fmt::format("not measured with {} threads", threads));
    }
    out.tuning = std::make_shared<const Tuning>(parse_rules(j.contains("rules") ? j["rules"] : nlohmann::json()));
  } catch (const Error& e) {
    out.tuning.reset();
    return ignored(e.what());
  }
  return out;
}

void write_tuning_cache(const std::filesystem::path& file, const Tuning& tuning, std::string_view cpu, Isa isa,
                        int threads) {
  if (file.empty()) fail("no tuning cache directory: neither XDG_CACHE_HOME nor HOME is an absolute path");
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  if (ec) fail("{}: cannot create the directory: {}", file.parent_path().string(), ec.message());
  nlohmann::json rules = nlohmann::json::array();
  for (const TunedRule& r : tuning.rules) {
    rules.push_back({{"type", weight_type_name(r.shape.type)},
                     {"rows", r.shape.rows},
                     {"cols", r.shape.cols},
                     {"prefill", r.shape.prefill},
                     {"split", split_name(r.rule.split)},
                     {"chunks_per_thread", r.rule.chunks_per_thread},
                     {"epilogue_kib", r.rule.epilogue_kib}});
  }
  const nlohmann::json j = {{"format", kFormat},    {"version", kVersion}, {"cpu", cpu},
                            {"isa", isa_name(isa)}, {"threads", threads},  {"rules", rules}};
  const std::string text = j.dump(1) + "\n";
  AtomicFile out(file);
  out.write_all(text.data(), text.size());
  out.commit();
}

}  // namespace nanoinfer
