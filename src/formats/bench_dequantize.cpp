// `b12x bench --suite dequantize`: every weight format decoded to BF16 on the GPU through
// dequant::plan/bind/run, checked bit-exact against the host dequantize_weight() rounded once (RNE),
// then timed. Bytes moved = packed weight + scales + N*K*2 written, so the column to read is % of
// copy bandwidth. Compiled into the CLI only (the library globs skip bench_*.cpp).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/dequantize.h"
#include "b12x/runtime/device.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "bench/weights.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {
namespace {

// The decode-shape weights: Llama-70B-like up/gate projection [28672, 8192] and a [4096, 14336].
const std::vector<Shape> kDefaultShapes = {{1, 28672, 8192}, {1, 4096, 14336}};

void bench_dequantize(Context& ctx, Format f, int64_t n, int64_t k, Result& r) {
  const dequant::Plan plan = dequant::plan({f, n, k, DType::bf16}, ctx.stream());  // compiles on first use
  r.path = detail::concat(plan.kernel->describe(), " grid ", plan.grid.x, " block ", plan.block.x);

  const uint64_t seed = random_seed();
  std::mt19937_64 rng(seed);
  // A host tile repeated down N on the device; per-row magnitudes 2^-8 .. 2^8, so scales vary.
  const DeviceWeight weight = random_device_weight(f, n, k, rng, RowExponents{-8, 8});
  const PackedWeight& tile = weight.tile;
  const WeightView& w = weight.view;
  const int64_t rows = tile.n, reps = weight.reps;
  r.bytes = static_cast<double>(weight.bytes()) + 2.0 * static_cast<double>(n * k);

  DeviceBuffer out(static_cast<size_t>(n * k) * 2);
  out.fill(0xFF);  // NaN poison: an unwritten element cannot match
  const Device dev = Device::cuda(current_device());
  DeviceBuffer scratch(plan.scratch_bytes());  // none for dequantize today; plans own the layout
  const dequant::Binding binding = dequant::bind(plan, Scratch{scratch.get(), scratch.bytes(), dev}, w,
                                                 TensorView(out.get(), DType::bf16, {n, k}, dev));
  dequant::run(binding, ctx.stream());
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));

  // Expected tile: the host decode (tensor scale applied), rounded once to BF16.
  HostTensor ref(DType::f32, {rows, k});
  dequantize_weight(tile.view(), ref.view(), true);
  const size_t tile_elems = static_cast<size_t>(rows * k);
  std::vector<uint16_t> want(tile_elems);
  size_t host_nan = 0;
  for (size_t i = 0; i < tile_elems; ++i) {
    const float v = ref.ptr<float>()[i];
    host_nan += std::isnan(v);
    store_f32(want.data(), DType::bf16, static_cast<int64_t>(i), v);
  }
  std::vector<uint16_t> got(static_cast<size_t>(n * k));
  out.download(got.data(), out.bytes());
  int64_t bad_tiles = 0, first_bad = -1;
  for (int64_t t = 0; t < reps; ++t) {
    if (std::memcmp(got.data() + t * tile_elems, want.data(), tile_elems * 2) == 0) continue;
    if (bad_tiles++ == 0)
      for (size_t i = 0; i < tile_elems && first_bad < 0; ++i)
        if (got[t * tile_elems + i] != want[i]) first_bad = static_cast<int64_t>(t * tile_elems + i);
  }
  r.check = bad_tiles == 0 && host_nan == 0 ? Check::pass : Check::fail;
  r.check_detail = detail::concat("bit-exact vs host dequantize_weight + RNE to BF16 over all ", n * k,
                                  " elements (a ", rows, "-row tile repeated ", reps, "x): ", bad_tiles, " tiles differ");
  if (first_bad >= 0) {
    const size_t i = static_cast<size_t>(first_bad) % tile_elems;
    char bits[64];
    std::snprintf(bits, sizeof bits, "want 0x%04x got 0x%04x", want[i], got[static_cast<size_t>(first_bad)]);
    r.check_detail += detail::concat(", first at (", first_bad / k, ", ", first_bad % k, ") ", bits);
  }
  if (host_nan) r.check_detail += detail::concat(", host reference has ", host_nan, " NaN (bad test data)");
  r.check_detail += detail::concat("; seed ", seed);
  if (r.check != Check::pass) return;

  r.time = ctx.timer().time([&](cudaStream_t s) { dequant::run(binding, s); });
}

std::vector<Case> dequantize_cases(const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  for (const Shape& s : shapes.empty() ? kDefaultShapes : shapes)
    for (const FormatInfo& info : all_formats()) {
      const Format f = info.format;
      const int64_t n = s.n, k = s.k;
      cases.push_back({"dequantize", std::string(info.name), std::to_string(n) + "x" + std::to_string(k),
                       Ceiling::none, [f, n, k](Context& ctx, Result& r) { bench_dequantize(ctx, f, n, k, r); }});
    }
  return cases;
}

const SuiteRegistrar kDequantize({.name = "dequantize",
                                  .description = "every weight format decoded to BF16 on the GPU, bit-exact vs the "
                                                 "host; TB/s and % of copy bandwidth",
                                  .order = 10,
                                  .quick = true,
                                  .takes_shapes = true,
                                  .shape_use = "N and K of the weight (M is ignored)",
                                  .cases = dequantize_cases});

}  // namespace
}  // namespace b12x::bench
