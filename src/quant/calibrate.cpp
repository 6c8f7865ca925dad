#include "quant/calibrate.h"

#include <algorithm>
#include <cmath>

#include "nanoinfer/error.h"
#include "nanoinfer/thread_pool.h"
#include "quant/gptq.h"

namespace nanoinfer {
namespace {

struct ChannelSums {
  std::vector<double> sum_sq;  // [dim]
  uint64_t rows = 0;
};

}  // namespace

std::optional<std::pair<std::string, int>> input_tap(const TensorSpec& spec, bool tied_embeddings) {
  switch (spec.slot) {
    case TensorSlot::Q:
    case TensorSlot::K:
    case TensorSlot::V:
      return std::pair{std::string("attn_norm"), spec.layer};
    case TensorSlot::O:
      return std::pair{std::string("attn_out"), spec.layer};
    case TensorSlot::Gate:
    case TensorSlot::Up:
      return std::pair{std::string("ffn_norm"), spec.layer};
    case TensorSlot::Down:
      return std::pair{std::string("ffn_act"), spec.layer};
    case TensorSlot::LmHead:
      return std::pair{std::string("final_norm"), -1};
    case TensorSlot::Embed:
      if (tied_embeddings) return std::pair{std::string("final_norm"), -1};
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Calibration calibrate(const Model& model, std::span<const int32_t> tokens, size_t ctx, size_t windows, bool gram,
                      int threads, const std::function<void(size_t, size_t)>& progress) {
  if (ctx < 2) fail("calibration: the context must be at least 2 tokens, got {}", ctx);
  if (ctx > model.max_context()) fail("calibration: a context of {} exceeds the model's {}", ctx, model.max_context());
  const size_t available = tokens.size() / ctx + (tokens.size() % ctx >= 2 ? 1 : 0);
  const size_t total = std::min(windows, available);
  if (total == 0) fail("calibration: the text has {} token(s); it needs at least 2", tokens.size());

  Calibration cal;
  cal.ctx = ctx;
  cal.isa = model.isa();
  std::map<std::pair<std::string, int>, ChannelSums> sums;
  bool finite = true;
  // The tap runs between the model's own parallel ops, so a second pool never competes
  // with the model's for the cores.
  ThreadPool pool(gram ? threads : 1);
  std::vector<float> scratch;
  Sequence seq = model.new_sequence(ctx);
  seq.set_tap([&](const TapEvent& e) {
    // Between the layers' products: a window of a large model takes seconds, and a progress
    // callback that throws (an interrupt) must not wait for its end.
    if (progress) progress(cal.windows, total);
    if (e.name != "attn_norm" && e.name != "attn_out" && e.name != "ffn_norm" && e.name != "ffn_act" &&
        e.name != "final_norm") {
      return;
    }
    const std::pair<std::string, int> key{std::string(e.name), e.layer};
    ChannelSums& s = sums[key];
    if (s.sum_sq.empty()) s.sum_sq.assign(e.dim, 0.0);
    if (gram) {
      std::vector<float>& h = cal.gram[key];
      if (h.empty()) h.assign(gram_packed_size(e.dim), 0.0f);
      accumulate_gram(e.data, e.n_tokens, e.dim, h.data(), scratch, pool, cal.isa);
    }
    for (size_t t = 0; t < e.n_tokens; ++t) {
      const float* row = e.data + t * e.dim;
      for (size_t c = 0; c < e.dim; ++c) {
        s.sum_sq[c] += static_cast<double>(row[c]) * row[c];
        finite = finite && std::isfinite(row[c]);
      }
    }
    s.rows += e.n_tokens;
  });

  for (size_t w = 0; w < total; ++w) {
    const std::span<const int32_t> window = tokens.subspan(w * ctx, std::min(ctx, tokens.size() - w * ctx));
    seq.cache().clear();
    // Every position through the final norm (so that "final_norm" shows all of them), none
    // through the head: calibration never reads the logits.
    // The whole window in one call (the model splits it only beyond its max_batch): each tap
    // then carries up to max_batch rows, and the Gram matrices' products run over that many
    // tokens at once instead of a quarter as many four times.
    model.forward_hidden(window, seq);
    if (!finite) fail("calibration: the model produced a non-finite activation in window {}", w);
    cal.tokens += window.size();
    ++cal.windows;
    if (progress) progress(w + 1, total);
  }
  for (auto& [key, s] : sums) {
    std::vector<float>& mean = cal.mean_sq[key];
    mean.resize(s.sum_sq.size());
    for (size_t c = 0; c < mean.size(); ++c) mean[c] = static_cast<float>(s.sum_sq[c] / static_cast<double>(s.rows));
  }
  return cal;
}

}  // namespace nanoinfer
