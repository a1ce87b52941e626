// tile16 repack on the host (include/b12x/formats/tile16.h): the argument checks shared with the GPU
// pack (formats/tile16_pack.cpp, which needs the runtime; this file does not, so the fuzz builds of
// the checkpoint reader link it alone) and the host permutation (the spec). The byte mapping itself
// lives only in formats/kernels/tile16.cuh.
#include "b12x/formats/tile16.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "b12x/core/error.h"
#include "formats/kernels/tile16.cuh"
#include "formats/tile16_internal.h"

namespace b12x {

namespace {


// validate_weight, its BadArgument renamed to the repack's argument ('in' / 'out').
void validate_as(const WeightView& w, const char* arg) {
  try {
    validate_weight(w);
  } catch (const BadArgument& e) {
    fail_arg(arg, e.what());
  }
}

bool overlaps(const TensorView& a, const TensorView& b) {
  if (a.empty() || b.empty() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto a0 = reinterpret_cast<uintptr_t>(a.data), b0 = reinterpret_cast<uintptr_t>(b.data);
  return a0 < b0 + b.nbytes() && b0 < a0 + a.nbytes();
}

void check_host(const WeightView& w, const char* arg) {
  expect(w.data, arg).host();
  if (!w.scale.empty()) expect(w.scale, arg).host();
}

// The permutation on the host: tiled[i] = ckpt[src(i)] (pack) or ckpt[src(i)] = tiled[i] (unpack).
void permute_host(const WeightView& ckpt, const WeightView& tiled, bool pack) {
  const int f = static_cast<int>(ckpt.format);
  const long long runs = ckpt.k / 32;
  auto* c = static_cast<uint8_t*>(ckpt.data.data);
  auto* t = static_cast<uint8_t*>(tiled.data.data);
  const auto bytes = static_cast<long long>(tiled.data.nbytes());
  for (long long i = 0; i < bytes; ++i) {
    const long long s = device::tile16_data_src(f, i, runs);
    if (pack) t[i] = c[s];
    else c[s] = t[i];
  }
  if (tiled.scale.empty()) return;
  c = static_cast<uint8_t*>(ckpt.scale.data);
  t = static_cast<uint8_t*>(tiled.scale.data);
  const auto scale_bytes = static_cast<long long>(tiled.scale.nbytes());
  if (device::tile16_scale_chunk_bytes(f) == 0) {  // fp8_channel / fp8_block: unchanged
    std::memcpy(pack ? t : c, pack ? c : t, static_cast<size_t>(scale_bytes));
    return;
  }
  for (long long i = 0; i < scale_bytes; ++i) {
    const long long s = device::tile16_scale_src(f, i, runs);
    if (pack) t[i] = c[s];
    else c[s] = t[i];
  }
}

PackedWeight allocate_like(const WeightView& in, WeightLayout layout) {
  PackedWeight p = allocate_weight(in.format, in.n, in.k);
  p.layout = layout;
  p.scale2 = in.scale2;
  return p;
}

}  // namespace

namespace tile16_detail {

// The rules common to every direction: layouts, same format and shape, both valid, no shared bytes
// (a permutation cannot run in place).
void check_pair(const WeightView& in, const WeightView& out, WeightLayout from, WeightLayout to) {
  B12X_CHECK_ARG(in.layout == from, "in", "must be in the ", layout_name(from), " layout, got ",
                 layout_name(in.layout));
  B12X_CHECK_ARG(out.layout == to, "out", "must be in the ", layout_name(to), " layout, got ", layout_name(out.layout));
  B12X_CHECK_ARG(out.format == in.format, "out", "format is ", format_info(out.format).name, " but in is ",
                 format_info(in.format).name);
  B12X_CHECK_ARG(out.n == in.n && out.k == in.k, "out", "shape is [", out.n, ", ", out.k, "] but in is [", in.n,
                 ", ", in.k, "]");
  validate_as(in, "in");
  validate_as(out, "out");
  for (const TensorView* o : {&out.data, &out.scale})
    for (const TensorView* i : {&in.data, &in.scale})
      B12X_CHECK_ARG(!overlaps(*o, *i), "out", "overlaps in (", o->describe(), " at ", o->data, " and ",
                     i->describe(), " at ", i->data, "): the repack needs distinct memory");
}

}  // namespace tile16_detail

using tile16_detail::check_pair;

bool has_tile16_layout(Format format) { return device::tile16_supported(static_cast<int>(format)); }

void tile16_pack_host(const WeightView& in, const WeightView& out) {
  check_pair(in, out, WeightLayout::checkpoint, WeightLayout::tile16);
  check_host(in, "in");
  check_host(out, "out");
  permute_host(in, out, /*pack=*/true);
}

void tile16_unpack_host(const WeightView& in, const WeightView& out) {
  check_pair(in, out, WeightLayout::tile16, WeightLayout::checkpoint);
  check_host(in, "in");
  check_host(out, "out");
  permute_host(out, in, /*pack=*/false);
}

PackedWeight to_tile16(const WeightView& in) {
  WeightView as_tile16 = in;  // the tile16 rules (format, N, K) are in's to meet: name it
  as_tile16.layout = WeightLayout::tile16;
  validate_as(as_tile16, "in");
  PackedWeight p = allocate_like(in, WeightLayout::tile16);
  tile16_pack_host(in, p.view());
  return p;
}

PackedWeight from_tile16(const WeightView& in) {
  PackedWeight p = allocate_like(in, WeightLayout::checkpoint);
  tile16_unpack_host(in, p.view());
  return p;
}

}  // namespace b12x
