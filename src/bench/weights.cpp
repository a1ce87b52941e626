#include "bench/weights.h"

#include <cmath>
#include <utility>
#include <vector>

#include "b12x/formats/format.h"
#include "b12x/formats/ggml.h"
#include "b12x/formats/tile16.h"
#include "b12x/runtime/device.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {

namespace {

HostTensor random_floats(std::mt19937_64& rng, int64_t rows, int64_t k, RowExponents e) {
  HostTensor w(DType::f32, {rows, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(e.min_exp, e.max_exp);
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) w.ptr<float>()[r * k + c] = normal(rng) * scale;
  }
  return w;
}

PackedWeight random_tile(Format f, int64_t rows, int64_t k, std::mt19937_64& rng, RowExponents e) {
  if (is_ggml_format(f)) {  // IQ2 has no quantizer; random valid blocks for every GGML codec
    PackedWeight p = allocate_weight(f, rows, k);
    ggml_random_blocks(f, p.data.view(), rng());
    return p;
  }
  return quantize_weight(f, random_floats(rng, rows, k, e).view());
}

// One tensor of the tile, repeated `reps` times along its first dimension in device memory.
TensorView upload_repeated(const TensorView& t, int64_t reps, DeviceBuffer& buf) {
  buf = std::move(repeated_copies(t.data, t.nbytes(), t.nbytes() * static_cast<size_t>(reps), 1).front());
  std::vector<int64_t> shape = t.shape_vec();
  shape[0] *= reps;
  return TensorView(buf.get(), t.dtype, shape, Device::cuda(current_device()));
}

}  // namespace

int64_t weight_tile_rows(int64_t n) { return n % 256 == 0 ? 256 : n % 128 == 0 ? 128 : n; }

DeviceWeight random_device_weight(Format format, int64_t n, int64_t k, std::mt19937_64& rng, RowExponents rows,
                                  WeightLayout layout) {
  DeviceWeight w;
  const int64_t tile_rows = weight_tile_rows(n);
  w.reps = n / tile_rows;
  w.tile = random_tile(format, tile_rows, k, rng, rows);
  const PackedWeight packed = layout == WeightLayout::tile16 ? to_tile16(w.tile.view()) : PackedWeight{};
  const PackedWeight& src = layout == WeightLayout::tile16 ? packed : w.tile;
  w.view = src.view();
  w.view.n = n;
  w.view.data = upload_repeated(src.data.view(), w.reps, w.data);
  if (!src.scale.view().empty()) w.view.scale = upload_repeated(src.scale.view(), w.reps, w.scale);
  return w;
}

WeightCopies copy_device_weight(const DeviceWeight& w, int copies) {
  WeightCopies out;
  out.views.push_back(w.view);
  for (int c = 1; c < copies; ++c) {
    WeightView v = w.view;
    out.data.emplace_back(w.data.bytes());
    B12X_CUDA_CHECK(cudaMemcpy(out.data.back().get(), w.data.get(), w.data.bytes(), cudaMemcpyDeviceToDevice));
    v.data.data = out.data.back().get();
    if (w.scale.bytes() > 0) {
      out.scale.emplace_back(w.scale.bytes());
      B12X_CUDA_CHECK(cudaMemcpy(out.scale.back().get(), w.scale.get(), w.scale.bytes(), cudaMemcpyDeviceToDevice));
      v.scale.data = out.scale.back().get();
    }
    out.views.push_back(v);
  }
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  return out;
}

}  // namespace b12x::bench
