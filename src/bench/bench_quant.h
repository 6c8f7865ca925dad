// bench quant: a quantization sweep (src/bench/bench_quant.cpp). Each level is quantized into a
// temporary directory with the library's quantizer (exactly what `nanoinfer quantize` writes),
// loaded from there, and compared position by position with the base model (as stored) over a
// text: perplexity, Delta PPL, KL divergence, top-1 agreement (the protocol of
// `perplexity --kl-base`). One record per level.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nanoinfer/open_model.h"
#include "nanoinfer/quantize_model.h"

namespace nanoinfer::bench {

// A level of the sweep: "base", or "<type>[-<method>][:head=<type>][:group=<G>]" (method
// default: gptq, as in `quantize`): the suffixes set the type of the matrix that computes the
// logits (default: the quantization scheme's, int8) and the weights per scale of the level
// type's matrices (rtn only; default the block, 32).
struct QuantLevel {
  std::string name;
  bool base = false;
  QuantizeOptions options;
};

// The comma-separated --levels list. Throws Error naming the level that does not parse.
std::vector<QuantLevel> parse_quant_levels(const std::string& list);

// One level's figures, as the table shows them.
struct QuantRow {
  std::string level, type, method, head = "-";
  uint64_t bytes = 0;
  double bits = 0, ppl = 0, delta = 0, kld = 0, top1 = 1, rel_error = 0;
};

struct QuantSweepInput {
  std::string file;       // the scored text's name, for the records and errors
  std::string text;       // and its contents
  std::string model_dir;  // the base (empty: the embedded model)
  OpenOptions options;    // how to open it; its weights are used as stored whatever they say
  int64_t context = 0;    // the window (0: the smaller of 512 and the model's context)
  std::string calib;      // calibration text (empty: quantize's default)
  size_t calib_windows = 0;
  std::string output;  // JSON-lines file each level's record is appended to as it completes
};

struct QuantSweep {
  std::string model;  // the base's directory as opened
  size_t ctx = 0;
  size_t tokens = 0;  // of the scored text
  std::vector<QuantRow> rows;
};

// Measures every level in order, appending its record to input.output when it is done; says on
// stderr which level is being quantized and compared.
QuantSweep run_quant_sweep(const std::vector<QuantLevel>& levels, const QuantSweepInput& input);

}  // namespace nanoinfer::bench
