// Writing a quantized model.safetensors from a float one (quant/quantize.h).
//
// Every tensor is streamed: the writer asks for consecutive chunks of a tensor's bytes, and a
// chunk of a quantized matrix is produced by reading the float rows it covers (pread), checking
// them, quantizing them across the pool and copying out the requested bytes. A chunk may start
// or end inside a row (chunks are byte ranges); such a row is quantized for both chunks and
// counted once in the statistics, by the chunk holding its first byte.
#include "quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "io/safetensors_writer.h"
#include "kernels/kernels.h"
#include "model/manifest.h"
#include "model/quant_scheme.h"
#include "nanoinfer/error.h"
#include "quant/gptq.h"

namespace nanoinfer {
namespace {

// Widens `n` stored floats to f32 (the dtypes a float checkpoint may hold).
void widen(DType from, const std::byte* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (from == DType::F32) {
      std::memcpy(dst + i, src + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      dst[i] = from == DType::BF16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
}

bool is_float(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

const TensorInfo& float_tensor(const SafetensorsFile& in, const TensorSpec& spec) {
  const TensorInfo* info = in.find(spec.name);
  if (info == nullptr) fail("{}: missing tensor '{}'", in.path().string(), spec.name);
  if (!is_float(info->dtype)) {
    fail("{}: tensor '{}' is {}; quantize reads F32, BF16 or F16 weights", in.path().string(), spec.name,
         dtype_name(info->dtype));
  }
  return *info;
}

[[noreturn]] void non_finite(const SafetensorsFile& in, const std::string& name, size_t index, float value) {
  fail("{}: tensor '{}' holds {} at element {}; refusing to quantize non-finite weights", in.path().string(), name,
       value, index);
}

// The manifest tensors that are written, in manifest order.
std::vector<const TensorSpec*> written(const SafetensorsFile& in, const ModelConfig& cfg,
                                       const std::vector<TensorSpec>& manifest) {
  std::vector<const TensorSpec*> out;
  for (const TensorSpec& spec : manifest) {
    if (in.find(spec.name) == nullptr) continue;
    if (spec.slot == TensorSlot::LmHead && cfg.tie_word_embeddings) continue;  // the embedding is the head
    out.push_back(&spec);
  }
  return out;
}

constexpr size_t kRowsBytes = size_t{4} << 20;  // float rows staged per read
// Rows quantized together: GPTQ's sweep reads one row of its factor per column for all the
// rows of a tile, so the tile shares it while it is in cache.
constexpr size_t kTileRows = 16;

}  // namespace

void quantize_row_grouped(WeightType type, const float* w, std::byte* row, size_t cols, size_t group) {
  const WeightTypeInfo& info = weight_type_info(type);
  const size_t block = info.block_elems;
  if (info.quantize_row_grouped == nullptr) {
    std::string grouped;
    for (const WeightTypeInfo& t : all_weight_types())
      if (t.quantize_row_grouped != nullptr) grouped += fmt::format("{}{}", grouped.empty() ? "" : " and ", t.name);
    fail("quantize: scale groups are for {}, not {}", grouped, info.name);
  }
  if (group == 0 || group % block != 0)
    fail("quantize: a scale group of {} is not a multiple of the block, {}", group, block);
  if (cols % block != 0) fail("quantize: {} columns are not whole blocks of {}", cols, block);
  info.quantize_row_grouped(w, row, cols, group);
}

void check_finite_weights(const SafetensorsFile& in, const ModelConfig& cfg, ThreadPool& pool) {
  const std::vector<TensorSpec> manifest = stored_manifest(cfg, in.tensors());
  for (const TensorSpec* spec : written(in, cfg, manifest)) {
    const TensorInfo& info = float_tensor(in, *spec);
    const size_t elem = dtype_size(info.dtype), n = static_cast<size_t>(info.numel());
    const size_t per_chunk = kRowsBytes / elem, chunks = (n + per_chunk - 1) / per_chunk;
    std::mutex first_mutex;
    size_t first = n;
    float first_value = 0;
    pool.parallel_for(chunks, 1, [&](size_t begin, size_t end) {
      std::vector<std::byte> raw(per_chunk * elem);
      std::vector<float> f(per_chunk);
      for (size_t c = begin; c < end; ++c) {
        const size_t i0 = c * per_chunk, count = std::min(per_chunk, n - i0);
        in.read(info, i0 * elem, {raw.data(), count * elem});
        widen(info.dtype, raw.data(), f.data(), count);
        for (size_t i = 0; i < count; ++i) {
          if (std::isfinite(f[i])) continue;
          const std::lock_guard lock(first_mutex);
          if (i0 + i < first) first = i0 + i, first_value = f[i];
          break;
        }
      }
    });
    if (first < n) non_finite(in, spec->name, first, first_value);
  }
}

QuantizedFileStats write_quantized_weights(const SafetensorsFile& in, const ModelConfig& cfg,
                                           const std::map<std::string, MatrixQuantization>& plan,
                                           const std::map<std::string, std::string>& metadata,
                                           const std::filesystem::path& out_file, ThreadPool& pool,
                                           const std::function<void(uint64_t, uint64_t)>& progress) {
  const std::vector<TensorSpec> manifest = stored_manifest(cfg, in.tensors());
  const std::vector<std::string> problems = manifest_problems(manifest, in.tensors());
  if (!problems.empty()) fail("{}: {}", in.path().string(), problems.front());

  SafetensorsWriter writer(out_file);
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  std::map<std::string, WeightType> block_types;
  QuantizedFileStats stats;
  std::mutex stats_mutex;

  for (const TensorSpec* spec : written(in, cfg, manifest)) {
    const TensorInfo& info = float_tensor(in, *spec);
    const uint64_t numel = info.numel();
    stats.params += numel;
    if (!spec->is_matrix()) {
      // Norm weights and biases: f32 in the file (they are tiny; the loader holds them in f32).
      writer.add(spec->name, DType::F32, spec->shape,
                 [&in, t = &info, offset = size_t{0}](std::span<std::byte> out) mutable {
                   const size_t n = out.size() / 4, elem = dtype_size(t->dtype);
                   std::vector<std::byte> raw(n * elem);
                   in.read(*t, offset * elem, raw);
                   std::vector<float> f(n);
                   widen(t->dtype, raw.data(), f.data(), n);
                   std::memcpy(out.data(), f.data(), out.size());
                   offset += n;
                 });
      stats.tensor_bytes += numel * 4;
      continue;
    }
    stats.matrix_params += numel;
    const auto it = plan.find(spec->name);
    const DType as_float = it == plan.end()                     ? info.dtype
                           : it->second.type == WeightType::F32 ? DType::F32
                                                                : DType::BF16;
    if (it == plan.end() || (!weight_type_info(it->second.type).quantized && as_float == info.dtype)) {
      // Kept as stored: bytes copied.
      writer.add(spec->name, info.dtype, spec->shape,
                 [&in, t = &info, offset = uint64_t{0}](std::span<std::byte> out) mutable {
                   in.read(*t, offset, out);
                   offset += out.size();
                 });
      stats.matrix_bytes += info.nbytes();
      stats.tensor_bytes += info.nbytes();
      continue;
    }
    if (!weight_type_info(it->second.type).quantized) {
      // Another float type: widened, or rounded to bf16 (nearest even).
      writer.add(spec->name, as_float, spec->shape,
                 [&in, t = &info, as_float, offset = size_t{0}](std::span<std::byte> out) mutable {
                   const size_t n = out.size() / dtype_size(as_float), elem = dtype_size(t->dtype);
                   std::vector<std::byte> raw(n * elem);
                   in.read(*t, offset * elem, raw);
                   std::vector<float> f(n);
                   widen(t->dtype, raw.data(), f.data(), n);
                   for (size_t i = 0; i < n; ++i) {
                     if (as_float == DType::F32) {
                       std::memcpy(out.data() + 4 * i, &f[i], 4);
                     } else {
                       const uint16_t h = f32_to_bf16(f[i]);
                       std::memcpy(out.data() + 2 * i, &h, 2);
                     }
                   }
                   offset += n;
                 });
      stats.matrix_bytes += numel * dtype_size(as_float);
      stats.tensor_bytes += numel * dtype_size(as_float);
      continue;
    }

    const MatrixQuantization& how = it->second;
    const size_t rows = static_cast<size_t>(spec->shape[0]), cols = static_cast<size_t>(spec->shape[1]);
    if (!how.importance.empty() && how.importance.size() != cols) {
      fail("quantize: tensor '{}': {} importances for {} columns", spec->name, how.importance.size(), cols);
    }
    const size_t row_bytes = weight_row_bytes(how.type, cols);
    const size_t src_row = cols * dtype_size(info.dtype);
    block_types.emplace(spec->name, how.type);
    if (how.scale_group > weight_type_info(how.type).block_elems) {
      if (how.search || how.gptq_factor)
        fail("quantize: tensor '{}': scale groups are for round-to-nearest only", spec->name);
      const size_t blocks = cols / weight_type_info(how.type).block_elems;
      const size_t groups = (cols + how.scale_group - 1) / how.scale_group;
      stats.repeated_scale_bytes += rows * (blocks - groups) * sizeof(uint16_t);  // the f16 scale of each block
    }
    stats.matrix_bytes += rows * row_bytes;
    stats.tensor_bytes += rows * row_bytes;
    // The callback runs later, inside writer.write(): it holds pointers, not loop references.
    writer.add(spec->name, DType::U8, {rows, row_bytes},
               [&in, &pool, &stats, &stats_mutex, spec, t = &info, q = &how, src_row, row_bytes, rows, cols,
                pos = uint64_t{0}](std::span<std::byte> out) mutable {
                 const TensorInfo& src = *t;
                 const MatrixQuantization& m = *q;
                 const auto src_read = [&](size_t r, std::vector<std::byte>& raw, float* w) {
                   in.read(src, r * src_row, raw);
                   widen(src.dtype, raw.data(), w, cols);
                 };
                 const size_t r0 = static_cast<size_t>(pos / row_bytes);
                 const size_t r1 = std::min(rows, static_cast<size_t>((pos + out.size() + row_bytes - 1) / row_bytes));
                 std::vector<std::byte> blocks((r1 - r0) * row_bytes);
                 pool.parallel_for(r1 - r0, kTileRows, [&](size_t begin, size_t end) {
                   std::vector<std::byte> raw(src_row);
                   std::vector<float> tile(kTileRows * cols), back(cols);
                   double err = 0, norm = 0;
                   for (size_t t0 = begin; t0 < end; t0 += kTileRows) {
                     const size_t nt = std::min(kTileRows, end - t0);
                     for (size_t i = 0; i < nt; ++i) {
                       const size_t r = r0 + t0 + i;
                       float* w = tile.data() + i * cols;
                       src_read(r, raw, w);
                       for (size_t c = 0; c < cols; ++c)
                         if (!std::isfinite(w[c])) non_finite(in, spec->name, r * cols + c, w[c]);
                     }
                     std::byte* dst = blocks.data() + t0 * row_bytes;
                     const float* imp = m.importance.empty() ? nullptr : m.importance.data();
                     if (m.gptq_factor) {
                       gptq_quantize_rows(m.type, tile.data(), nt, cols, *m.gptq_factor, imp, dst);
                     }
                     for (size_t i = 0; i < nt; ++i) {
                       const size_t r = r0 + t0 + i;
                       float* w = tile.data() + i * cols;
                       if (!m.gptq_factor) {
                         if (m.search) {
                           quantize_row_search(m.type, w, imp, dst + i * row_bytes, cols);
                         } else if (m.scale_group > weight_type_info(m.type).block_elems) {
                           quantize_row_grouped(m.type, w, dst + i * row_bytes, cols, m.scale_group);
                         } else {
                           quantize_row(m.type, w, dst + i * row_bytes, cols);
                         }
                       }
                       if (r * row_bytes < pos) continue;  // counted with the previous chunk
                       dequantize_row(m.type, dst + i * row_bytes, back.data(), cols);
                       for (size_t c = 0; c < cols; ++c) {
                         const double e = static_cast<double>(w[c]) - back[c];
                         err += e * e;
                         norm += static_cast<double>(w[c]) * w[c];
                       }
                     }
                   }
                   const std::lock_guard lock(stats_mutex);
                   stats.error_sq += err;
                   stats.weight_sq += norm;
                 });
                 std::memcpy(out.data(), blocks.data() + (pos - r0 * row_bytes), out.size());
                 pos += out.size();
               });
  }
  writer.set_metadata(std::string(kWeightTypesKey), block_types_json(block_types));
  writer.write(progress);
  return stats;
}

}  // namespace nanoinfer
