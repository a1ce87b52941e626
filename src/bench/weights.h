// Random packed weights in device memory for the bench cases (b12x bench --suite dequantize, linear):
// host quantization of a whole [28672, 8192] weight would take longer than the quick suite may, so a
// tile of rows is made on the host and repeated down N on the device.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "b12x/formats/weight.h"
#include "bench/harness.h"

namespace b12x::bench {

// Rows of the host tile for a weight of n rows: 256 or 128 when they divide n (a multiple of 128
// rows, so fp8_block's 128-row scale blocks repeat with the tile), else n (one tile).
int64_t weight_tile_rows(int64_t n);

// Per-row magnitudes of the random floats a tile is quantized from: 2^min_exp .. 2^max_exp, so the
// block / row scales vary.
struct RowExponents {
  int min_exp = -8;
  int max_exp = 8;
};

// A random weight of `format` and shape [n, k] on the current device, in `layout`.
struct DeviceWeight {
  PackedWeight tile;         // the host tile [weight_tile_rows(n), k] (checkpoint layout): the reference
  int64_t reps = 0;          // tile copies down N (n = tile.n * reps)
  DeviceBuffer data, scale;  // the tile's payload / scales repeated reps times (scale empty if none)
  WeightView view;           // [n, k] on the current device; scale2 is the tile's
  size_t bytes() const { return data.bytes() + scale.bytes(); }  // packed weight + scales
};

// The tile: N(0, 1) floats times 2^e per row (e uniform in `rows`) quantized with quantize_weight,
// or random valid blocks (ggml_random_blocks) for the GGML formats (IQ2 has no quantizer). Draws
// from `rng` in that order only, so a caller's later draws are reproducible from its seed. tile16:
// the tile is repacked (formats/tile16.h) before it is repeated; tile16 is tile-major and the tile a
// multiple of 16 rows, so the repeated bytes are the tile16 layout of the whole [n, k] weight.
DeviceWeight random_device_weight(Format format, int64_t n, int64_t k, std::mt19937_64& rng,
                                  RowExponents rows = {}, WeightLayout layout = WeightLayout::checkpoint);

// w's view and `copies` - 1 more device copies of its bytes (the same values at other addresses), for
// timing with rotated operands (L2Flush::rotate); views[0] is w.view itself.
struct WeightCopies {
  std::vector<DeviceBuffer> data, scale;
  std::vector<WeightView> views;
};
WeightCopies copy_device_weight(const DeviceWeight& w, int copies);

}  // namespace b12x::bench
