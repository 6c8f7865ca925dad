// The tuning cache: what `bench tune` measured (nanoinfer/tuning.h), one small JSON file per
// ISA and thread count holding the CPU model it was measured on, read when a model is opened
// (nanoinfer/open_model.h).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "nanoinfer/isa.h"
#include "nanoinfer/tuning.h"

namespace nanoinfer {

// $XDG_CACHE_HOME/nanoinfer/tune-ISA-tN.json (else ~/.cache/nanoinfer/; empty when neither
// variable is an absolute path).
std::filesystem::path tuning_cache_path(Isa isa, int threads);
// /proc/cpuinfo's model name ("unknown" when there is none): the cache's key, and the "cpu"
// of bench records.
std::string cpu_model_name();
struct TuningCache {
  std::filesystem::path file;
  std::shared_ptr<const Tuning> tuning;  // nullptr: no file, or one that was ignored
  std::string note;                      // one line when the file was ignored, and why
};
// A missing file is no tuning and no note. A file that is not a tuning file (corrupt,
// truncated, another format or version, a value out of range) or was measured on another CPU,
// ISA or thread count is ignored: no tuning, and `note` says why in one line.
TuningCache read_tuning_cache(const std::filesystem::path& file, std::string_view cpu, Isa isa, int threads);
// Writes it atomically (a temporary file beside it, renamed over it), creating its directory.
void write_tuning_cache(const std::filesystem::path& file, const Tuning& tuning, std::string_view cpu, Isa isa,
                        int threads);

}  // namespace nanoinfer
