// `nanoinfer bench quant [-m DIR] -f FILE`: a quantization sweep in one table. Each level is
// quantized into a temporary directory with the library's quantizer (exactly what `nanoinfer
// quantize` writes), loaded from there, and compared position by position with the base model
// (as stored) over FILE: perplexity, Delta PPL, KL divergence, top-1 agreement (the protocol of
// `perplexity --kl-base`). Prints a markdown table and appends one JSON line per level.
#include <fmt/format.h>

#include <memory>

#include "bench/bench_quant.h"
#include "bench/bench_record.h"
#include "bench_output.h"
#include "command.h"
#include "common_options.h"
#include "nanoinfer/error.h"
#include "nanoinfer/file_io.h"

namespace nanoinfer::cli {
namespace {

constexpr const char* kDefaultLevels = "base,int8,int4-rtn,int4-gptq";

struct QuantBenchFlags {
  ModelFlags model;
  std::string file;
  std::string levels = kDefaultLevels;
  std::string calib;
  int64_t calib_windows = 0;
  std::string output = "bench/results.jsonl";
};

void print_table(const bench::QuantSweep& sweep, const QuantBenchFlags& f) {
  fmt::print("bench quant: {} over {} ({} tokens, windows of {})\n\n", sweep.model, f.file, sweep.tokens, sweep.ctx);
  fmt::print(
      "| level | type | method | logits matrix | bytes | bits/weight | PPL | ΔPPL % | KLD mean | "
      "top-1 % | weight rel. error |\n");
  fmt::print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const bench::QuantRow& r : sweep.rows) {
    fmt::print("| {} | {} | {} | {} | {} | {:.3f} | {:.4f} | {:+.3f} | {:.3e} | {:.2f} | {:.4f} |\n", r.level, r.type,
               r.method, r.head, r.bytes, r.bits, r.ppl, r.delta, r.kld, 100.0 * r.top1, r.rel_error);
  }
  fmt::print("\nappended {} record(s) to {}\n", sweep.rows.size(), f.output);
}

void run(const QuantBenchFlags& f) {
  const std::vector<bench::QuantLevel> levels = bench::parse_quant_levels(f.levels);
  if (f.calib_windows < 0) {
    fail("--calib-windows must be >= 1 (or 0 = the default), got {}", f.calib_windows);
  }
  bench::check_bench_results_path(f.output);
  // The text is read first, so a bad file is reported before a bad model option.
  const bench::QuantSweepInput input{.file = f.file,
                                     .text = read_file(f.file, kMaxTextFileBytes),
                                     .model_dir = f.model.model_dir,
                                     .options = open_options(f.model),
                                     .context = f.model.context,
                                     .calib = f.calib,
                                     .calib_windows = static_cast<size_t>(f.calib_windows),
                                     .output = f.output};
  print_table(bench::run_quant_sweep(levels, input), f);
}

const bool registered_bench_quant = register_command({
    "bench",
    "quant",
    "Quantization sweep: size, bits per weight, PPL, KL divergence and top-1 against the base, per "
    "level",
    [](CLI::App& sub) {
      auto f = std::make_shared<QuantBenchFlags>();
      add_model_flags(sub, f->model);
      sub.add_option("-f,--file", f->file, "Text file to score (e.g. data/default-model/heldout.txt)")->required();
      sub.add_option("--levels", f->levels,
                     "Comma-separated levels: base, or int8|int4|q3_k with -rtn, -imatrix or -gptq "
                     "(default method gptq), "
                     "optionally :head=TYPE for the logits matrix (f32, bf16, int8, int4; default "
                     "int8), e.g. "
                     "int4-rtn:head=int4; and :group=G for G weights per scale (a multiple of 32, "
                     "-rtn only: the "
                     "blocks of a group share its scale, and the size reported is that of a format "
                     "with groups of G), "
                     "e.g. int4-rtn:group=128")
          ->capture_default_str();
      sub.add_option(
          "--calib", f->calib,
          "Calibration text (default: the training part of data/tinyshakespeare.txt, built into the binary)");
      sub.add_option("--calib-windows", f->calib_windows,
                     "Calibration windows (0 = quantize's default: 64, fewer for a large model)")
          ->capture_default_str();
      add_results_option(sub, f->output, "JSON-lines file the records are appended to")->capture_default_str();
      sub.callback([f] { run(*f); });
    },
});

}  // namespace
}  // namespace nanoinfer::cli
