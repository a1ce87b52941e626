// tile16 repack on the GPU (include/b12x/formats/tile16.h): the kernel specs and the launcher of
// formats/kernels/tile16_pack.cuh, byte-identical to tile16_pack_host (formats/tile16.cpp).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/tile16.h"
#include "formats/tile16_internal.h"

namespace b12x {

namespace {

constexpr unsigned kThreads = 256;                // kTile16PackThreads in the kernel
constexpr int64_t kMaxBlocks = int64_t{1} << 30;  // more work loops inside the kernel (grid stride)

}  // namespace

KernelSpec tile16_pack_kernel_spec(Format format) {
  B12X_CHECK_ARG(has_tile16_layout(format), "format", format_info(format).name,
                 " has no tile16 layout");
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
  tile16_detail::check_pair(in, out, WeightLayout::checkpoint, WeightLayout::tile16);
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
