// The kernel layer: dense arithmetic over raw pointers, one table of function pointers per
// instruction set. A model picks its table once, when it is opened (ModelOptions::isa).
// Kernels never name a tensor; the model never names an instruction set.
//
// Determinism contract (every ISA): each output element of matmul is one accumulator chain
// over its columns in a fixed order, reduced across lanes in a fixed order, then the bias is
// added. The chain does not depend on the row range, on n_tokens, on the element's position
// in a register tile or on the thread that computes it, so results are bitwise identical for
// any split of rows across threads and for a batch versus one call per token. The quantized
// types keep the same promise with a different chain (kernels/scalar_quant.cpp): exact
// integer block sums, then one float chain over the blocks, identical on every ISA. The
// avx512-bf16 tier's bf16 product is the one float kernel that rounds its activations (to
// bf16, once per call); it keeps the promise with its own chain (kernels/scalar_bf16_dot.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/weight_blocks.h"
#include "nanoinfer/isa.h"
#include "nanoinfer/weight_type.h"

namespace nanoinfer::kernels {

// y[t][r] = bias[r] + sum_c w[r][c] * x[t][c], for rows r in [row_begin, row_end) and tokens
// t < n_tokens, for the float weight types. w: `rows` rows of weight_row_bytes(type, cols)
// bytes (f32; bf16 bit patterns widened exactly), x: [n_tokens][cols] f32, y: [n_tokens][rows],
// bias: [rows] or nullptr (then no addition at all). Rows outside the range are neither read
// nor written. The scalar reference defines the exact result.
// `rows` is also the row stride of y: a product may write its columns into a wider output
// (y pointing at the first column, `rows` the output's width), since no row outside the range
// is ever read.
using MatmulFn = void (*)(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                          size_t n_tokens, size_t row_begin, size_t row_end);

// Activations quantized for the Q8_0 / Q4_0 products: every block of 32 by
// quantize_activation_block. Quantized once per input, they serve every thread and every
// matrix that reads that input.
//   q: [tokens][cols] int8;  d: [nb][tokens] block scales;  s: [nb][tokens] sum of each block's q
//   s16: [2 nb][tokens] the sums of each half block's q (Q6_K's and Q3_K's sub-blocks are 16 long)
// `tokens` is n rounded up to a whole prefill token group (kQuantTokenGroup), or 1 when n is
// 1; the padding tokens are all zero. Grown, never shrunk, so steady-state calls do not
// allocate.
inline constexpr size_t kQuantTokenGroup = 4;
struct QuantizedActivations {
  size_t cols = 0, nb = 0, n = 0, tokens = 0;
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int32_t> s, s16;

  // The layout for n tokens of `cols` (the one place its sizes are computed): every
  // quantize_activations starts here, then fills q, d and s.
  void shape(size_t cols_, size_t n_) {
    cols = cols_;
    nb = cols_ / kQuantBlock;
    n = n_;
    tokens = n_ == 1 ? 1 : (n_ + kQuantTokenGroup - 1) / kQuantTokenGroup * kQuantTokenGroup;
    q.resize(tokens * cols);
    d.resize(nb * tokens);
    s.resize(nb * tokens);
    s16.resize(2 * nb * tokens);
  }
  // Whether a real token's activation quantized to -128, which only a NaN does
  // (quantize_activation_block): kernels that move signs with vpsignb take another way then.
  bool any_min() const {
    const auto end = q.begin() + static_cast<std::ptrdiff_t>(n * cols);
    return std::find(q.begin(), end, int8_t{-128}) != end;
  }
};
// x: [n][cols], cols a multiple of 32 -> out.
using QuantizeActivationsFn = void (*)(const float* x, size_t cols, size_t n, QuantizedActivations& out);
// y = W x + bias for a quantized type, from activations already quantized (n_tokens and cols
// are x's), with MatmulFn's conventions otherwise; the scalar reference
// (kernels/scalar_quant.cpp) defines the exact result.
using MatmulQuantizedFn = void (*)(const std::byte* w, const float* bias, const QuantizedActivations& x, float* y,
                                   size_t rows, size_t row_begin, size_t row_end);

// MatmulQuantizedFn's product for a matrix in the packed layout (kernels/quant_blocks.h:
// whole groups of 16 rows interleaved block by block, a last partial group as it was):
// `w_rows` is the matrix's row count (it fixes where the packed groups end), `stride` the
// row stride of y. Bitwise what MatmulQuantizedFn gives for the same matrix unpacked.
using MatmulPackedFn = void (*)(const std::byte* w, size_t w_rows, const float* bias, const QuantizedActivations& x,
                                float* y, size_t stride, size_t row_begin, size_t row_end);

// The avx512-bf16 tier's bf16 product in two steps, so that a product rounds its input once
// for every thread and every matrix reading it (as the quantized types do): x: [n][cols] f32
// -> xb: [n][bf16_row_stride(cols)] bf16, rounded as round_activation_bf16, zero past cols;
// then MatmulFn's product from xb (bitwise what the MatmulFn entry gives for x).
inline constexpr size_t bf16_row_stride(size_t cols) {
  return (cols + 31) / 32 * 32;
}
using RoundActivationsFn = void (*)(const float* x, size_t n, size_t cols, uint16_t* xb);
using MatmulRoundedFn = void (*)(const std::byte* w, const float* bias, const uint16_t* xb, float* y, size_t rows,
                                 size_t cols, size_t n_tokens, size_t row_begin, size_t row_end);

// One entry per weight type, named, so that a kernel file lists the types it covers with
// designated initializers (.q8_0 = ...) and a type it has no kernel for is visibly nullptr.
// slot() switches over the enum without a `default:`, so a new WeightType does not compile
// until it has a member here; tests/base/weight_type_table_test.cpp checks every table has an entry for
// every type that needs one.
template <class Fn>
struct ByType {
  Fn f32 = nullptr, bf16 = nullptr, q8_0 = nullptr, q4_0 = nullptr, q4_1 = nullptr, q5_0 = nullptr, q5_1 = nullptr,
     q4_k = nullptr, q5_k = nullptr, q6_k = nullptr, q3_k = nullptr;
  constexpr Fn& slot(WeightType type) { return entry(*this, type); }
  constexpr Fn operator[](WeightType type) const { return entry(*this, type); }
  // These entries, replaced by `own`'s wherever it has one: how a tier states only the kernels
  // it adds over the tier below, and how one file's kernels join another's.
  constexpr ByType with(const ByType& own) const {
    ByType out = *this;
    for (size_t i = 0; i < kWeightTypeCount; ++i) {
      const auto type = static_cast<WeightType>(i);
      if (own[type] != nullptr) out.slot(type) = own[type];
    }
    return out;
  }

 private:
  template <class Self>
  static constexpr auto& entry(Self& self, WeightType type) {
    switch (type) {
      case WeightType::F32:
        return self.f32;
      case WeightType::BF16:
        return self.bf16;
      case WeightType::Q8_0:
        return self.q8_0;
      case WeightType::Q4_0:
        return self.q4_0;
      case WeightType::Q4_1:
        return self.q4_1;
      case WeightType::Q5_0:
        return self.q5_0;
      case WeightType::Q5_1:
        return self.q5_1;
      case WeightType::Q4_K:
        return self.q4_k;
      case WeightType::Q5_K:
        return self.q5_k;
      case WeightType::Q6_K:
        return self.q6_k;
      case WeightType::Q3_K:
        return self.q3_k;
    }
    return self.f32;  // not reached: the switch names every type
  }
};

// Causal attention of one KV head's query block, tiled over keys with an online softmax
// (kernels/attention_tile.h): query rows t < n_q at positions pos0 + t, each with the `group`
// query heads that share this KV head, against keys 0 .. pos0 + n_q - 1 in blocks of
// kAttentionKeyBlock; query t sees keys j <= pos0 + t. One pass: each K and V row is read once
// per call, for all n_q * group query rows (the count is returned: rows read, K and V alike).
//   q:   [n_q][q_stride] f32; row t's heads of this group at q + t * q_stride, head_dim apart
//   k,v: the cache rows of this KV head: element (j, i) at k[j * kv_stride + i], of the entry's
//        element type (f32, bf16 or f16 bit patterns)
//   out: like q (the group's heads of each row are written, nothing else)
//   scratch: attention_scratch_floats(n_q, group, head_dim) floats
// Per query row the result does not depend on n_q or on the rows it is computed with (key
// blocks start at position 0, each score and each weighted sum is one chain in a fixed order):
// chunked prefill, decode and batched decode agree bitwise, on any thread count.
inline constexpr size_t kAttentionKeyBlock = 64;
struct AttentionTile {
  const float* q;
  size_t q_stride;
  const void* k;
  const void* v;
  size_t kv_stride;
  float* out;
  size_t n_q, group, head_dim, pos0;
  float scale;
  float* scratch;
};
inline constexpr size_t attention_scratch_floats(size_t n_q, size_t group, size_t head_dim) {
  const size_t rows = n_q * group;
  return 2 * head_dim * kAttentionKeyBlock + rows * kAttentionKeyBlock + 2 * rows * head_dim + 2 * rows;
}
using AttentionTileFn = uint64_t (*)(const AttentionTile& a);
// The cache element types attention reads (nanoinfer/kv_cache.h).
struct ByKvType {
  AttentionTileFn f32 = nullptr, bf16 = nullptr, f16 = nullptr;
};
// y[i] = e^x[i] for i < n, the vector exp of kernels/attention_tile.h (relative error <= 2^-22
// for -87.34 <= x <= 88.37; 0 below, -inf included; +inf above; NaN stays NaN).
using ExpRowsFn = void (*)(const float* x, float* y, size_t n);
// out[i] = gate[i] / (1 + e^-gate[i]) * up[i] for i < n (SwiGLU's product; out may be gate),
// on the same exp: relative error <= 2^-21 for gate >= -88.37 and a normal result (derived in
// kernels/attention_tile.h); a zero below.
using SiluMulFn = void (*)(const float* gate, const float* up, float* out, size_t n);

// One candidate of the block scale search (quant/quantize_search.cpp), for a block of 32
// weights w with importances a and the scale d as stored (id = 1 / d, or 0): q[i] = w[i] * id
// rounded half away from zero (as std::lround) after bounding to +-1e9 (NaN to -1e9), then
// clamped to [lo, hi]; returns the loss sum_i a[i] (w[i] - d q[i])^2 in f32, each term
// (a[i] * e) * e with e = w[i] - d * q[i], summed in eight partial sums (s[k] over i = k,
// k + 8, k + 16, k + 24 in that order), then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
using ScoreBlockFn = float (*)(const float* w, const float* a, float d, float id, int lo, int hi, int8_t* q);
// The sums of the weighted least-squares scale for fixed integers q of a block of 32 (the
// search's refit): sums[0] = sum_i (a[i] * w[i]) * q[i] and sums[1] = sum_i (a[i] * q[i]) * q[i],
// in double (every factor widened first), each in eight partial sums as ScoreBlockFn's loss.
using RefitBlockFn = void (*)(const float* w, const float* a, const int8_t* q, double* sums);

using DotRowsFn = void (*)(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale,
                           float* out);
using AxpyRowsFn = void (*)(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n,
                            float* y);

struct Kernels {
  Isa isa;
  // The float types' products (an ISA without its own kernel for a type carries a lower
  // ISA's kernel, ultimately the scalar reference); nullptr for the quantized types.
  ByType<MatmulFn> matmul;
  // The quantized types' products from shared quantized activations (nullptr for the float
  // types), and the quantization they read.
  ByType<MatmulQuantizedFn> matmul_quantized;
  QuantizeActivationsFn quantize_activations = nullptr;
  // The packed-layout products, where a tier has one (nullptr elsewhere): a model opened with
  // this table packs exactly the matrices whose type has an entry here.
  ByType<MatmulPackedFn> matmul_packed;
  // The float types' products on the float packed layout (below), where a tier has them
  // (nullptr for the quantized types): a model opened with this table packs its matrices of a
  // type with an entry here that float_packable allows. Bitwise the matmul entry's.
  ByType<MatmulFn> matmul_packed_float;
  // The bf16 product from activations rounded once (nullptr both on tiers whose bf16 product
  // reads f32 activations).
  RoundActivationsFn round_activations_bf16 = nullptr;
  MatmulRoundedFn matmul_bf16_rounded = nullptr;
  MatmulRoundedFn matmul_bf16_rounded_packed = nullptr;  // the same on the float packed layout
  // Attention over the cache's strided rows, in one call per (token, head):
  // out[j] = (sum_i q[i] * rows[j * stride + i]) * scale for j < count (scores), and, for j in
  // order, y[i] += (alphas[j] * mult) * rows[j * stride + i] (the weighted sum of values). Each
  // row's result is bitwise what a call with count = 1 on that row gives.
  DotRowsFn dot_rows_f32 = nullptr;
  AxpyRowsFn axpy_rows_f32 = nullptr;
  // Tiled attention per cache element type, and the exp it uses (exposed for tests).
  ByKvType attention;
  ExpRowsFn exp_f32 = nullptr;
  // SwiGLU's elementwise silu(gate) * up, on that exp.
  SiluMulFn silu_mul_f32 = nullptr;
  // The quantizer's block search step (quantization, not inference).
  ScoreBlockFn score_block = nullptr;
  RefitBlockFn refit_block = nullptr;

  MatmulFn matmul_for(WeightType type) const { return matmul[type]; }
  MatmulQuantizedFn matmul_quantized_for(WeightType type) const { return matmul_quantized[type]; }
  MatmulPackedFn matmul_packed_for(WeightType type) const { return matmul_packed[type]; }
  // Whether a model opened with this table holds a [rows][cols] matrix of `type` packed.
  bool packs(WeightType type, size_t rows, size_t cols) const;
};

// The table of one ISA. Throws nanoinfer::Error naming what is missing when the CPU/OS
// (host_cpu_features(), or `cpu`) cannot run it (see nanoinfer/isa.h), so the code of an
// unsupported ISA is never reached: the tables hold function addresses, and nothing compiled
// with an ISA's flags runs before one of its kernels is called.
const Kernels& table(Isa isa);
const Kernels& table(Isa isa, const CpuFeatures& cpu);
const Kernels& scalar_table();

// The packed layout of the quantized types' matrices (kernels/quant_blocks.h), rows in
// groups of kPackRows. ISA-independent.
inline constexpr size_t kPackRows = 16;
// Rewrites every whole group of 16 rows of w ([rows] rows of weight_row_bytes(type, cols))
// in place; a last partial group is left as it is.
void pack_quantized(WeightType type, std::byte* w, size_t rows, size_t cols);
// Row r of a packed matrix (either packed layout: the float one below for F32 and BF16) in the ordinary
// layout: a pointer into w for a row of the partial last group, else the row unpacked into
// `scratch` (weight_row_bytes(type, cols) bytes).
const std::byte* packed_row(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                            std::byte* scratch);
// The float packed layout (f32 and bf16): rows in groups of kFloatPackRows, each group's rows
// interleaved one 64-byte line (16 f32 or 32 bf16 columns) at a time, so that a tile of a
// group's rows reads one stream of memory, not one per row. Only for matrices whose rows are
// whole groups and whole lines (float_packable: every shape of the supported models); others
// stay as they are. ISA-independent.
inline constexpr size_t kFloatPackRows = 4, kPackLine = 64;
inline constexpr bool float_packable(WeightType type, size_t rows, size_t cols) {
  const size_t bytes = type == WeightType::F32 ? 4 : type == WeightType::BF16 ? 2 : 0;
  return bytes != 0 && rows % kFloatPackRows == 0 && cols * bytes % kPackLine == 0;
}
// Rewrites w ([rows] rows of row_bytes bytes, as float_packable allows) in place.
void pack_float(std::byte* w, size_t rows, size_t row_bytes);
// Row r of such a matrix into out (row_bytes bytes).
void packed_row_float(const std::byte* w, size_t row_bytes, size_t r, std::byte* out);

inline bool Kernels::packs(WeightType type, size_t rows, size_t cols) const {
  if (type == WeightType::F32 || type == WeightType::BF16)
    return matmul_packed_float[type] != nullptr && float_packable(type, rows, cols);
  return matmul_packed[type] != nullptr;
}
// The K types' halves of those two (kernels/scalar_quant_k.cpp), and Q4_1 / Q5_0 / Q5_1's
// (kernels/scalar_quant_file.cpp).
void pack_quantized_k(WeightType type, std::byte* w, size_t rows, size_t cols);
const std::byte* packed_row_k(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                              std::byte* scratch);
void pack_quantized_file(WeightType type, std::byte* w, size_t rows, size_t cols);
const std::byte* packed_row_file(WeightType type, const std::byte* w, size_t rows, size_t cols, size_t r,
                                 std::byte* scratch);

// The signatures, to declare the kernels each tier defines (a function type, not a pointer).
using MatmulSig = void(const std::byte* w, const float* bias, const float* x, float* y, size_t rows, size_t cols,
                       size_t n_tokens, size_t row_begin, size_t row_end);
using QuantizeActivationsSig = void(const float* x, size_t cols, size_t n, QuantizedActivations& out);
using DotRowsSig = void(const float* q, const float* rows, size_t stride, size_t count, size_t n, float scale,
                        float* out);
using AxpyRowsSig = void(const float* alphas, float mult, const float* rows, size_t stride, size_t count, size_t n,
                         float* y);
using AttentionTileSig = uint64_t(const AttentionTile& a);
using ExpRowsSig = void(const float* x, float* y, size_t n);
using SiluMulSig = void(const float* gate, const float* up, float* out, size_t n);
using ScoreBlockSig = float(const float* w, const float* a, float d, float id, int lo, int hi, int8_t* q);
using RefitBlockSig = void(const float* w, const float* a, const int8_t* q, double* sums);

// The scalar reference products of the quantized types, each file's types: Q8_0 and Q4_0
// (kernels/scalar_quant.cpp, which states the exact accumulation rule every ISA reproduces
// bitwise), the K types (kernels/scalar_quant_k.cpp, which states their rule), and Q4_1, Q5_0,
// Q5_1 (kernels/scalar_quant_file.cpp, likewise).
extern const ByType<MatmulQuantizedFn> matmul_quantized_scaled, matmul_quantized_k, matmul_quantized_file;
// The activation side of those products: 32 floats -> 32 int8 (round half to even) and the
// returned scale d = max|x| / 127, or d = 0 and all-zero q when that d is below FLT_MIN.
float quantize_activation_block(const float* x, int8_t* q);
// Every block of x by quantize_activation_block, in QuantizedActivations' layout.
QuantizeActivationsSig quantize_activations;
// The scalar references of ScoreBlockFn and RefitBlockFn (kernels/scalar_quant.cpp).
ScoreBlockSig score_block;
RefitBlockSig refit_block;

// The scalar reference of the avx512-bf16 tier's bf16 product (kernels/scalar_bf16_dot.cpp,
// which states the rule: activations rounded to bf16, vdpbf16ps emulated bit for bit). It
// runs on any CPU; that tier's kernel equals it bitwise.
MatmulSig matmul_bf16_dot;
// Its activation rounding, as vcvtne2ps2bf16 does it: nearest even; zero and subnormal
// inputs give a zero of their sign; NaN stays NaN (quietened); infinities stay.
uint16_t round_activation_bf16(float f);

// What each tier's files define; kernels/dispatch.cpp assembles the tables from these, each
// tier from the one below it. The quantized products come as one ByType per file, listing the
// types that file has kernels for. Everything else in those files has internal linkage, so the
// linker can never merge a function compiled for a higher tier into a lower tier's table.
namespace scalar {  // kernels/scalar.cpp (baseline x86-64, no FMA)
MatmulSig matmul_f32, matmul_bf16;
DotRowsSig dot_rows_f32;
AxpyRowsSig axpy_rows_f32;
AttentionTileSig attention_f32, attention_bf16, attention_f16;
ExpRowsSig exp_f32;
SiluMulSig silu_mul_f32;
}  // namespace scalar
namespace avx2 {  // kernels/kernels_avx2.cpp, kernels/quant_avx2.cpp
extern const ByType<MatmulFn> matmul;
extern const ByType<MatmulQuantizedFn> matmul_quantized;
extern const ByType<MatmulPackedFn> matmul_packed;
QuantizeActivationsSig quantize_activations;
ScoreBlockSig score_block;
RefitBlockSig refit_block;
extern const DotRowsFn dot_rows_f32;
extern const AxpyRowsFn axpy_rows_f32;
extern const ByKvType attention;
extern const ExpRowsFn exp_f32;
extern const SiluMulFn silu_mul_f32;
}  // namespace avx2
namespace avx2_vnni {  // kernels/quant_avx2_vnni.cpp
extern const ByType<MatmulQuantizedFn> matmul_quantized;
extern const ByType<MatmulPackedFn> matmul_packed;
}  // namespace avx2_vnni
namespace avx512 {  // kernels/kernels_avx512.cpp, kernels/attention_avx512.cpp
extern const ByType<MatmulFn> matmul;
extern const ByType<MatmulFn> matmul_packed_float;
extern const DotRowsFn dot_rows_f32;
extern const AxpyRowsFn axpy_rows_f32;
extern const ByKvType attention;
extern const ExpRowsFn exp_f32;
extern const SiluMulFn silu_mul_f32;
}  // namespace avx512
namespace avx512_vnni {  // kernels/quant_avx512_vnni.cpp
extern const ByType<MatmulQuantizedFn> matmul_quantized;
extern const ByType<MatmulPackedFn> matmul_packed;
}  // namespace avx512_vnni
namespace avx512_bf16 {  // kernels/*_avx512_bf16.cpp
MatmulSig matmul_bf16;
void round_activations(const float* x, size_t n, size_t cols, uint16_t* xb);
void matmul_bf16_rounded(const std::byte* w, const float* bias, const uint16_t* xb, float* y, size_t rows, size_t cols,
                         size_t n_tokens, size_t row_begin, size_t row_end);
void matmul_bf16_rounded_packed(const std::byte* w, const float* bias, const uint16_t* xb, float* y, size_t rows,
                                size_t cols, size_t n_tokens, size_t row_begin, size_t row_end);
MatmulSig matmul_bf16_packed;
}  // namespace avx512_bf16

}  // namespace nanoinfer::kernels
