// What the bench commands print about the records they append, and the flags that name where.
#pragma once

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <nlohmann/json.hpp>
#include <string>

#include "bench/bench_record.h"

namespace nanoinfer::cli {

// Appends a run's one record to `file` and says so on stdout.
inline void append_record_and_say(const nlohmann::json& record, const std::string& file) {
  bench::append_bench_record(record, file);
  fmt::print("appended to {}\n", file);
}

// The one convention of the bench subcommands: `--results FILE` is the JSON-lines file the
// records are appended to, `-r, --repetitions N` the number of measured runs, and `-o, --output`
// is what stdout shows (bench generate's md/csv/json/jsonl, as llama-bench's -o). Where `-o FILE`
// used to name the results file it still does, hidden from --help, but a format name is refused
// there, since that is what -o means elsewhere.
inline CLI::Option* add_results_option(CLI::App& sub, std::string& file, const std::string& help) {
  CLI::Option* option = sub.add_option("--results", file, help);
  sub.add_option("-o,--output", file)
      ->group("")
      ->check(
          [](const std::string& value) -> std::string {
            for (const char* format : {"md", "csv", "json", "jsonl"}) {
              if (value == format) {
                return fmt::format(
                    "-o {}: here -o is the old spelling of --results FILE; only bench generate "
                    "takes an output format",
                    value);
              }
            }
            return "";
          },
          "FILE");
  return option;
}

}  // namespace nanoinfer::cli
