// Causal GQA attention in double, written the obvious way: the reference both the exact
// attention (tests/model/ops_test.cpp) and the tiled one (tests/kernels/attention_test.cpp) are checked
// against. Query head h reads KV head h / (n_heads / n_kv_heads); query t (at position
// pos0 + t) sees keys 0 .. pos0 + t. q is [n][n_heads * head_dim], k and v are
// [pos0 + n][n_kv_heads * head_dim]; the result is laid out like q.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "model/ops.h"

namespace nanoinfer::test {

inline std::vector<double> naive_attention(const AttentionShape& s, const std::vector<float>& q,
                                           const std::vector<float>& k, const std::vector<float>& v, size_t n,
                                           size_t pos0) {
  const size_t hd = s.head_dim, qd = s.n_heads * hd, kvd = s.n_kv_heads * hd, g = s.n_heads / s.n_kv_heads;
  std::vector<double> out(n * qd, 0.0);
  for (size_t t = 0; t < n; ++t) {
    for (size_t h = 0; h < s.n_heads; ++h) {
      const size_t kh = h / g;
      std::vector<double> w(pos0 + t + 1);
      double max = -1e300, sum = 0;
      for (size_t j = 0; j < w.size(); ++j) {
        double d = 0;
        for (size_t i = 0; i < hd; ++i) d += double(q[t * qd + h * hd + i]) * k[j * kvd + kh * hd + i];
        w[j] = d / std::sqrt(double(hd));
        max = std::max(max, w[j]);
      }
      for (double& x : w) sum += (x = std::exp(x - max));
      for (size_t j = 0; j < w.size(); ++j)
        for (size_t i = 0; i < hd; ++i) out[t * qd + h * hd + i] += w[j] / sum * v[j * kvd + kh * hd + i];
    }
  }
  return out;
}

}  // namespace nanoinfer::test
