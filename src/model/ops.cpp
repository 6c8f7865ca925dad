#include "model/ops.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numbers>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "nanoinfer/error.h"
#include "nanoinfer/thread_pool.h"

namespace nanoinfer {

namespace {

// The sums of squares of R rows in double, each row's in ascending order: one dependent chain
// of double additions per row, latency-bound alone, so R rows' chains run side by side (the
// bits are those of one row at a time).
template <size_t R>
void sums_of_squares(const float* x, size_t dim, double* ss) {
  double acc[R] = {};
  for (size_t i = 0; i < dim; ++i)
#pragma GCC unroll 8
    for (size_t r = 0; r < R; ++r) acc[r] += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
#pragma GCC unroll 8
  for (size_t r = 0; r < R; ++r) ss[r] = acc[r];
}

// sums_of_squares<rows> for 1 <= rows <= sizeof...(R).
template <size_t... R>
void sums_of_squares_of(size_t rows, const float* x, size_t dim, double* ss, std::index_sequence<R...>) {
  ((rows == R + 1 ? (sums_of_squares<R + 1>(x, dim, ss), 0) : 0), ...);
}

// out[i] = (in[i] * scale) * weight[i], four at a time in GCC's generic vectors (the same
// two roundings per element as the scalar tail): at -O2 GCC does not vectorize this loop itself,
// since out may be in (in place) and the count is not known. out is in or does not overlap it.
void scale_row(const float* in, float scale, const float* weight, float* out, size_t dim) {
  using F4 = float __attribute__((vector_size(16)));
  size_t i = 0;
  for (; i + 4 <= dim; i += 4) {
    F4 a, w;
    std::memcpy(&a, in + i, sizeof a);
    std::memcpy(&w, weight + i, sizeof w);
    const F4 r = a * scale * w;
    std::memcpy(out + i, &r, sizeof r);
  }
  for (; i < dim; ++i) out[i] = in[i] * scale * weight[i];
}

}  // namespace

void rmsnorm(const float* x, const float* weight, float eps, float* y, size_t n, size_t dim) {
  constexpr size_t kRows = 8;
  for (size_t t0 = 0; t0 < n; t0 += kRows) {
    const size_t rows = std::min(kRows, n - t0);
    // The sum of squares in double: dim is at most a few thousand, and this keeps the norm
    // as close to the float64 reference as the f32 inputs allow.
    double ss[kRows];
    const float* in = x + t0 * dim;
    sums_of_squares_of(rows, in, dim, ss, std::make_index_sequence<kRows>{});
    for (size_t r = 0; r < rows; ++r) {
      const float* row = in + r * dim;
      float* out = y + (t0 + r) * dim;
      const float scale = static_cast<float>(1.0 / std::sqrt(ss[r] / static_cast<double>(dim) + eps));
      scale_row(row, scale, weight, out, dim);
    }
  }
}

// The magnitudes compared as integers: for floats without their sign bit the integer order is
// the float order, infinity's pattern is above every finite one and NaN's above infinity's, so
// |v| <= limit (false for NaN) is magnitude(v) <= magnitude(limit) for any limit in [0, max].
// Whole blocks of a fixed size with integer compares vectorize (a float compare that must fail
// on NaN did not, and this pass runs over every activation of every layer).
size_t first_beyond(const float* v, size_t count, float limit) {
  assert(limit >= 0.0f && limit <= std::numeric_limits<float>::max());
  const auto magnitude = [](float x) { return static_cast<int32_t>(std::bit_cast<uint32_t>(x) & 0x7fffffffu); };
  const int32_t most = magnitude(limit);
  const auto first_in = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      if (magnitude(v[i]) > most) return i;
    return end;
  };
  constexpr size_t kBlock = 64;
  size_t begin = 0;
  for (; begin + kBlock <= count; begin += kBlock) {
    int32_t bad = 0;  // a branch-free pass over the block
    for (size_t i = 0; i < kBlock; ++i) bad |= magnitude(v[begin + i]) > most ? 1 : 0;
    if (bad != 0) return first_in(begin, begin + kBlock);
  }
  return first_in(begin, count);
}

size_t first_non_finite(const float* v, size_t count) {
  return first_beyond(v, count, std::numeric_limits<float>::max());
}

void add_inplace(float* x, const float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) x[i] += y[i];
}

void split_qkv(const float* qkv, size_t n, size_t q_dim, size_t kv_dim, float* q, float* k, float* v) {
  const size_t stride = q_dim + 2 * kv_dim;
  for (size_t t = 0; t < n; ++t) {
    const float* row = qkv + t * stride;
    std::memcpy(q + t * q_dim, row, q_dim * sizeof(float));
    std::memcpy(k + t * kv_dim, row + q_dim, kv_dim * sizeof(float));
    std::memcpy(v + t * kv_dim, row + q_dim + kv_dim, kv_dim * sizeof(float));
  }
}

void silu_mul(const Compute& c, const float* gate, const float* up, float* out, size_t count) {
  c.k->silu_mul_f32(gate, up, out, count);
}

std::vector<double> rope_inv_freq(size_t head_dim, double theta, const std::optional<RopeScaling>& scaling) {
  if (head_dim == 0 || head_dim % 2 != 0) fail("rope: head_dim must be even and positive, got {}", head_dim);
  std::vector<double> f(head_dim / 2);
  for (size_t i = 0; i < f.size(); ++i) {
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    if (!scaling) continue;
    const RopeScaling& r = *scaling;
    const double context = static_cast<double>(r.original_max_position_embeddings);
    const double wavelength = 2.0 * std::numbers::pi / f[i];
    if (wavelength > context / r.low_freq_factor) {
      f[i] /= r.factor;
    } else if (wavelength >= context / r.high_freq_factor) {
      const double s = (context / wavelength - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      f[i] = (1.0 - s) * f[i] / r.factor + s * f[i];
    }
  }
  return f;
}

Rope::Rope(size_t head_dim, double theta, size_t max_positions)
    : Rope(rope_inv_freq(head_dim, theta, std::nullopt), max_positions) {}

Rope::Rope(const std::vector<double>& inv_freq, size_t max_positions)
    : half_(inv_freq.size()), max_positions_(max_positions) {
  if (half_ == 0) fail("rope: no frequencies");
  cos_.resize(max_positions * half_);
  sin_.resize(max_positions * half_);
  for (size_t i = 0; i < half_; ++i) {
    const double inv_freq_i = inv_freq[i];
    for (size_t p = 0; p < max_positions; ++p) {
      const double angle = static_cast<double>(p) * inv_freq_i;
      cos_[p * half_ + i] = static_cast<float>(std::cos(angle));
      sin_[p * half_ + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void Rope::apply(float* x, size_t n, size_t n_heads, size_t pos0) const {
  assert(pos0 + n <= max_positions_);
  const size_t head_dim = 2 * half_;
  for (size_t t = 0; t < n; ++t) {
    const float* c = cos_.data() + (pos0 + t) * half_;
    const float* s = sin_.data() + (pos0 + t) * half_;
    for (size_t h = 0; h < n_heads; ++h) {
      float* lo = x + (t * n_heads + h) * head_dim;
      float* hi = lo + half_;
      for (size_t i = 0; i < half_; ++i) {
        const float a = lo[i], b = hi[i];
        lo[i] = a * c[i] - b * s[i];
        hi[i] = b * c[i] + a * s[i];
      }
    }
  }
}

size_t attention_query_block(const AttentionShape& shape) {
  const size_t group = shape.n_heads / shape.n_kv_heads;
  return std::max<size_t>(1, kAttentionQueryRows / group);
}

namespace {

// How attention() splits its work: units are (KV head, query block) pairs; `chunk` units per
// pool chunk (each chunk gets its own scratch region), or all of them on the caller.
struct AttentionPlan {
  size_t qb, blocks, units, chunk, chunks, region;
};

AttentionPlan plan_attention(const Compute& c, const AttentionShape& shape, size_t n, size_t pos0) {
  AttentionPlan p;
  p.qb = attention_query_block(shape);
  p.blocks = (n + p.qb - 1) / p.qb;
  p.units = p.blocks * shape.n_kv_heads;
  const bool parallel = shape.n_heads * n * (pos0 + n) * shape.head_dim >= kMinParallelAttentionWork;
  p.chunk = parallel ? ThreadPool::chunk_size(p.units, 1, c.pool->size()) : p.units;
  p.chunks = (p.units + p.chunk - 1) / p.chunk;
  p.region = kernels::attention_scratch_floats(p.qb, shape.n_heads / shape.n_kv_heads, shape.head_dim);
  return p;
}

}  // namespace

size_t attention_scratch_size(const Compute& c, const AttentionShape& shape, size_t n, size_t pos0) {
  const AttentionPlan p = plan_attention(c, shape, n, pos0);
  return p.chunks * p.region;
}

void attention(const Compute& c, const AttentionShape& shape, const float* q, const KvView& kv, float* out, size_t n,
               size_t pos0, AttentionWork* work) {
  const size_t hd = shape.head_dim;
  const size_t group = shape.n_heads / shape.n_kv_heads;
  const AttentionPlan plan = plan_attention(c, shape, n, pos0);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const size_t elem = dtype_size(kv.type);
  kernels::AttentionTileFn fn = nullptr;
  switch (kv.type) {
    case DType::F32:
      fn = c.k->attention.f32;
      break;
    case DType::BF16:
      fn = c.k->attention.bf16;
      break;
    case DType::F16:
      fn = c.k->attention.f16;
      break;
    default:
      fail("attention: unsupported cache element type {}", dtype_name(kv.type));
  }
  AttentionWork local;
  AttentionWork& w = work ? *work : local;
  if (w.scratch.size() < plan.chunks * plan.region) w.scratch.resize(plan.chunks * plan.region);
  std::atomic<uint64_t> rows_read{0};
  // Units in decreasing order of work (the last query block sees the most keys), so the
  // threads claiming chunks in order end together.
  auto run = [&](size_t u_begin, size_t u_end) {
    float* scratch = w.scratch.data() + (u_begin / plan.chunk) * plan.region;
    uint64_t read = 0;
    for (size_t u = u_begin; u < u_end; ++u) {
      const size_t block = plan.blocks - 1 - u / shape.n_kv_heads;
      const size_t kvh = u % shape.n_kv_heads;
      const size_t t0 = block * plan.qb;
      const size_t nq = std::min(plan.qb, n - t0);
      const size_t q_off = t0 * shape.n_heads * hd + kvh * group * hd;
      const kernels::AttentionTile tile{
          .q = q + q_off,
          .q_stride = shape.n_heads * hd,
          .k = static_cast<const std::byte*>(kv.k) + kvh * hd * elem,
          .v = static_cast<const std::byte*>(kv.v) + kvh * hd * elem,
          .kv_stride = kv.stride,
          .out = out + q_off,
          .n_q = nq,
          .group = group,
          .head_dim = hd,
          .pos0 = pos0 + t0,
          .scale = scale,
          .scratch = scratch,
      };
      read += fn(tile);
    }
    rows_read.fetch_add(read, std::memory_order_relaxed);
  };
  if (plan.chunks == 1) {
    run(0, plan.units);
  } else {
    c.pool->parallel_for(plan.units, 1, run);  // cut into chunks of plan.chunk units
  }
  w.kv_rows_read += rows_read.load(std::memory_order_relaxed);
  const uint64_t pairs = static_cast<uint64_t>(n) * pos0 + static_cast<uint64_t>(n) * (n + 1) / 2;
  w.flops += 4 * static_cast<uint64_t>(hd) * shape.n_heads * pairs;
}

void attention_weights(const Compute& c, const AttentionShape& shape, const float* q, const KvView& kv, size_t n,
                       size_t pos0, float* probs) {
  const size_t hd = shape.head_dim;
  const size_t kv_dim = shape.n_kv_heads * hd;
  const size_t n_keys = pos0 + n;
  // The rows widened once, then the exact path's weights.
  std::vector<float> keys(n_keys * kv_dim), values(n_keys * kv_dim), scores(shape.n_heads * n_keys);
  std::vector<float> out(n * shape.n_heads * hd);
  for (size_t j = 0; j < n_keys; ++j) {
    for (size_t i = 0; i < kv_dim; ++i) {
      const size_t at = j * kv.stride + i;
      switch (kv.type) {
        case DType::BF16:
          keys[j * kv_dim + i] = bf16_to_f32(static_cast<const uint16_t*>(kv.k)[at]);
          values[j * kv_dim + i] = bf16_to_f32(static_cast<const uint16_t*>(kv.v)[at]);
          break;
        case DType::F16:
          keys[j * kv_dim + i] = f16_to_f32(static_cast<const uint16_t*>(kv.k)[at]);
          values[j * kv_dim + i] = f16_to_f32(static_cast<const uint16_t*>(kv.v)[at]);
          break;
        default:
          keys[j * kv_dim + i] = static_cast<const float*>(kv.k)[at];
          values[j * kv_dim + i] = static_cast<const float*>(kv.v)[at];
          break;
      }
    }
  }
  attention_exact(c, shape, q, keys.data(), values.data(), out.data(), n, pos0, scores.data(), probs);
}

void attention_exact(const Compute& c, const AttentionShape& shape, const float* q, const float* keys,
                     const float* values, float* out, size_t n, size_t pos0, float* scores, float* probs) {
  const size_t hd = shape.head_dim;
  const size_t q_dim = shape.n_heads * hd;
  const size_t kv_dim = shape.n_kv_heads * hd;
  const size_t group = shape.n_heads / shape.n_kv_heads;
  const size_t n_keys = pos0 + n;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));

  // The kernels' dot and axpy over the cached rows, one table per model: each output element
  // is computed the same way whichever thread runs its head and however the tokens were
  // chunked.
  const kernels::Kernels& k = *c.k;
  auto heads = [&](size_t h_begin, size_t h_end) {
    for (size_t h = h_begin; h < h_end; ++h) {
      const size_t kv_off = (h / group) * hd;
      float* s = scores + h * n_keys;  // [n_keys]
      for (size_t t = 0; t < n; ++t) {
        const float* qh = q + t * q_dim + h * hd;
        const size_t visible = pos0 + t + 1;  // causal: keys 0 .. pos0+t
        k.dot_rows_f32(qh, keys + kv_off, kv_dim, visible, hd, scale, s);
        float max = -INFINITY;
        for (size_t j = 0; j < visible; ++j) max = s[j] > max ? s[j] : max;
        float sum = 0.0f;
        for (size_t j = 0; j < visible; ++j) {
          s[j] = std::exp(s[j] - max);
          sum += s[j];
        }
        const float inv_sum = 1.0f / sum;
        float* o = out + t * q_dim + h * hd;
        std::fill(o, o + hd, 0.0f);
        k.axpy_rows_f32(s, inv_sum, values + kv_off, kv_dim, visible, hd, o);
        if (probs != nullptr) {
          float* p = probs + (t * shape.n_heads + h) * n_keys;  // [n_keys]
          for (size_t j = 0; j < visible; ++j) p[j] = s[j] * inv_sum;
          std::fill(p + visible, p + n_keys, 0.0f);
        }
      }
    }
  };
  if (shape.n_heads * n * n_keys * hd < kMinParallelAttentionWork) {
    heads(0, shape.n_heads);
  } else {
    c.pool->parallel_for(shape.n_heads, 1, heads);
  }
}

LogSoftmax log_softmax(const float* logits, size_t n) {
  float max = logits[0];
  for (size_t i = 1; i < n; ++i) max = logits[i] > max ? logits[i] : max;
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return {max, sum, std::log(sum)};
}

double log_softmax_at(const float* logits, size_t n, size_t index) {
  assert(index < n);
  return log_softmax(logits, n).at(logits[index]);
}

}  // namespace nanoinfer
