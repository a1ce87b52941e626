// tile16 repack (include/b12x/formats/tile16.h): argument checks shared by the host and device
// paths, the host permutation (the spec), and the launcher of formats/kernels/tile16_pack.cuh. The
// byte mapping itself lives only in formats/kernels/tile16.cuh.
#include "b12x/formats/tile16.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "b12x/core/error.h"
#include "formats/kernels/tile16.cuh"

namespace b12x {

namespace {

constexpr unsigned kThreads = 256;                // kTile16PackThreads in the kernel
constexpr int64_t kMaxBlocks = int64_t{1} << 30;  // more work loops inside the kernel (grid stride)

const char* layout_name(WeightLayout l) { return l == WeightLayout::tile16 ? "tile16" : "checkpoint"; }

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

KernelSpec tile16_pack_kernel_spec(Format format) {
  B12X_CHECK_ARG(has_tile16_layout(format), "format", format_info(format).name,
                 " has no tile16 layout (IQ2 formats have none)");
  KernelSpec s;
  s.kernel = "formats.tile16_pack";
  s.source = "formats/kernels/tile16_pack.cuh";
  s.name_expression = "b12x::tile16_pack_kernel<" + std::to_string(static_cast<int>(format)) + ">";
  s.config = {{"format", std::string(format_info(format).name)}};
  s.archs = {"sm_90a", "sm_120a"};  // byte moves only
  s.max_registers = 64;
  return s;
}

std::vector<KernelSpec> tile16_kernel_specs() {
  std::vector<KernelSpec> specs;
  for (const auto& info : all_formats())
    if (has_tile16_layout(info.format)) specs.push_back(tile16_pack_kernel_spec(info.format));
  return specs;
}

void tile16_pack(const WeightView& in, const WeightView& out, cudaStream_t stream) {
  check_pair(in, out, WeightLayout::checkpoint, WeightLayout::tile16);
  expect(in.data, "in").on_cuda();  // validate_weight put each scale on its payload's device
  expect(out.data, "out").on_cuda().same_device(in.data, "in").aligned(16);
  const Kernel& kernel = resolve_kernel(tile16_pack_kernel_spec(in.format), stream);

  const unsigned char* in_data = static_cast<const unsigned char*>(in.data.data);
  const unsigned char* in_scale = static_cast<const unsigned char*>(in.scale.data);
  unsigned char* out_data = static_cast<unsigned char*>(out.data.data);
  unsigned char* out_scale = static_cast<unsigned char*>(out.scale.data);
  // Every tile16 data tensor is whole chunks, and every chunk a multiple of 16 bytes.
  long long data_vectors = static_cast<long long>(out.data.nbytes() / 16);
  long long scale_bytes = out.scale.empty() ? 0 : static_cast<long long>(out.scale.nbytes());
  long long runs = in.k / 32;
  const long long work = std::max(data_vectors, scale_bytes);
  if (work == 0) return;
  const int64_t blocks = std::min<int64_t>((work + kThreads - 1) / kThreads, kMaxBlocks);
  void* args[] = {&in_data, &in_scale, &out_data, &out_scale, &data_vectors, &scale_bytes, &runs};
  kernel.launch(dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream, args);
}

}  // namespace b12x
