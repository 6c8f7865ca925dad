// How many prompt rows a serve step carries beside the decoding sequences' rows.
//
// Each scheduler step is one forward pass, and every running stream gets one token per step:
// the step's time is the streams' inter-token time. A prompt being prefilled beside them adds
// rows to the step, and what a prompt row costs grows with its position (its attention reads
// every earlier key: at 16k positions on the 0.5B that is ~2x the row's matrix products),
// while the first few rows are almost free (a decode step streams the weights from memory;
// extra rows reuse them from cache). A fixed row count is therefore too few rows early in a
// long prompt and too many late in it.
//
// With a latency ratio R > 0 the budget is set from measured times: the decode-only steps'
// time t0 (a running average) and the time a prompt row has been adding to a step (a running
// average of (t - t0) / rows over the mixed steps), so that a mixed step takes about R x t0.
// It starts from the fixed rule's count, changes by at most a factor of two per step, and stays
// within [1, max_rows]; the budget is a rate, whole rows per step with the fraction carried
// (at 16k positions one row of the 0.5B adds about half a decode step, so rounding down would
// leave a quarter of the allowed time unused). With R = 0 (or before any decode-only step was timed) the fixed rule
// holds: `step_tokens` rows in all, decode rows first, at least one prompt row.
//
// Decode-only steps are not timed while a prompt prefills beside the streams, so their own
// slowing as their contexts grow is counted as the prompt rows' cost then (fewer prompt rows):
// the bound holds against the decode step as it was before the prompt came.
//
// The budget only decides which rows share a pass; every row computes what it would alone, so
// outputs do not depend on it.
#pragma once

#include <cstddef>

namespace nanoinfer::serve {

class StepBudget {
 public:
  StepBudget(size_t step_tokens, double latency_ratio, size_t max_rows);

  // Prompt rows the next step may carry beside `decode_rows` decode rows (SIZE_MAX when there
  // are none: the prompt chunk alone bounds the step).
  size_t prompt_rows(size_t decode_rows) const;
  // A step's forward pass took `seconds`, carrying these rows.
  void observe(size_t decode_rows, size_t prompt_rows, double seconds);

  double decode_seconds() const { return decode_s_; }  // 0 until a decode-only step is timed
  double row_seconds() const { return row_s_; }        // 0 until a mixed step is timed
  bool adaptive() const { return ratio_ > 0 && decode_s_ > 0; }

 private:
  size_t fixed_rows(size_t decode_rows) const;

  size_t step_tokens_;
  double ratio_;
  size_t max_rows_;
  double decode_s_ = 0;  // running average of decode-only steps
  double row_s_ = 0;     // running average of a prompt row's added time
  double rate_ = 0;      // the adaptive budget in rows per step (0: not set yet)
  double credit_ = 0;    // its fraction carried between steps, within [-1, 1]
};

}  // namespace nanoinfer::serve
