// GPU dequantize op (include/b12x/formats/dequantize.h): plan validates and resolves the kernel
// (src/formats/kernels/dequantize.cuh), bind checks the tensors and builds views without touching
// CUDA, run only launches.
#include "b12x/formats/dequantize.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "b12x/core/error.h"
#include "b12x/formats/format.h"
#include "formats/kernel_weight.h"

namespace b12x::dequant {

namespace {

using namespace kernel_weight;

constexpr int kRun = 32;          // K elements per thread (kernel contract)
constexpr unsigned kThreads = 256;  // kDequantThreads in the kernel
constexpr int64_t kMaxBlocks = int64_t{1} << 30;  // more work loops inside the kernel (grid stride)

// Everything plan can check without CUDA.
void check_caps(const Caps& caps) {
  const FormatInfo& info = checked_format(caps.format);
  float_dtype_code(caps.out_dtype, "out_dtype");
  B12X_CHECK_ARG(caps.n > 0, "n", "N (out_features) must be positive, got ", caps.n);
  B12X_CHECK_ARG(caps.k > 0, "k", "K (in_features) must be positive, got ", caps.k);
  B12X_CHECK_ARG(caps.k % kRun == 0, "k", "K (in_features) must be a multiple of ", kRun,
                 " for dequantize (each thread decodes 32 consecutive elements), got K = ", caps.k);
  // The payload's group along K (fp8_block's 128-wide scale blocks may be partial at the edge).
  const int group = caps.format == Format::fp8_block ? 1 : info.group;
  if (group > 1)
    B12X_CHECK_ARG(caps.k % group == 0, "k", "K (in_features) must be a multiple of ", group, " for ", info.name,
                   ", got K = ", caps.k);
  // N * K elements of up to 4 bytes must be addressable with int64.
  B12X_CHECK_ARG(caps.n <= std::numeric_limits<int64_t>::max() / 4 / caps.k, "n", "N x K = ", caps.n, " x ", caps.k,
                 " is too large");
}

}  // namespace

KernelSpec kernel_spec(const Caps& caps) {
  const FormatInfo& info = checked_format(caps.format);
  const int out = float_dtype_code(caps.out_dtype, "out_dtype");
  KernelSpec s;
  s.kernel = "formats.dequantize";
  s.source = "formats/kernels/dequantize.cuh";
  s.name_expression =
      "b12x::dequantize_kernel<" + std::to_string(static_cast<int>(caps.format)) + ", " + std::to_string(out) + ">";
  s.config = {{"format", std::string(info.name)}, {"out", std::string(dtype_name(caps.out_dtype))}};
  s.archs = {"sm_90a", "sm_120a"};  // CUDA cores only: no wgmma, so SM120 runs it too
  s.max_registers = 64;
  // Bit-exactness relies on IEEE FP32: no flush-to-zero, and no contraction into FMAs anywhere
  // (the decoders already use __fmul_rn / __fadd_rn; this makes it a property of the whole kernel).
  s.options = {"--ftz=false", "--fmad=false"};
  return s;
}

std::vector<KernelSpec> all_kernel_specs() {
  std::vector<KernelSpec> specs;
  for (const auto& info : all_formats())
    for (DType out : {DType::bf16, DType::f16, DType::f32}) specs.push_back(kernel_spec({info.format, 0, 0, out}));
  return specs;
}

Plan plan(const Caps& caps, cudaStream_t stream) {
  check_caps(caps);  // before resolving: argument errors never need a GPU
  Plan p;
  p.caps = caps;
  const int64_t runs = caps.n * (caps.k / kRun);
  const int64_t blocks = std::min<int64_t>((runs + kThreads - 1) / kThreads, kMaxBlocks);
  p.grid = dim3(static_cast<unsigned>(blocks));
  p.block = dim3(kThreads);
  p.kernel = &resolve_kernel(kernel_spec(caps), stream);
  return p;
}

Binding bind(const Plan& plan, const Scratch& scratch, const WeightView& w, const TensorView& out) {
  B12X_CHECK_ARG(plan.kernel != nullptr, "plan", "has no kernel; make it with dequant::plan()");
  check_scratch(scratch, plan.scratch);
  const Caps& caps = plan.caps;
  B12X_CHECK_ARG(w.layout == WeightLayout::checkpoint, "w",
                 "must be in the checkpoint layout: dequantize reads checkpoint bytes (unpack a tile16 weight with "
                 "tile16_unpack_host, or use dequantize_weight on the host)");
  // Any N up to the planned one: the grid-stride loop covers fewer rows (the linear op decodes its
  // live M quantized activation rows with a plan made for max_tokens).
  B12X_CHECK_ARG(w.n >= 1 && w.n <= caps.n, "w", "has N = ", w.n, " rows; the plan serves 1 <= N <= ", caps.n,
                 " (caps.n)");
  check_device_weight(w, caps.format, w.n, caps.k);

  expect(out, "out")
      .present()
      .dtype(caps.out_dtype)
      .shape({w.n, caps.k})
      .contiguous()
      .on_cuda()
      .same_device(w.data, "weight")
      .aligned(16);

  Binding b;
  b.plan = &plan;
  b.w = w;
  b.out = out;
  return b;
}

void run(const Binding& binding, cudaStream_t stream) {
  B12X_CHECK_ARG(binding.plan != nullptr && binding.plan->kernel != nullptr, "binding",
                 "has no plan; make it with dequant::bind()");
  const Plan& p = *binding.plan;
  const unsigned char* data = static_cast<const unsigned char*>(binding.w.data.data);
  const unsigned char* scale = static_cast<const unsigned char*>(binding.w.scale.data);
  float scale2 = binding.w.scale2;  // applied by fp8_tensor and nvfp4 only (apply_tensor_scale = true)
  unsigned char* out = static_cast<unsigned char*>(binding.out.data);
  long long runs_per_row = p.caps.k / kRun;
  long long runs = binding.w.n * runs_per_row;
  long long scale_cols = (p.caps.k + 127) / 128;
  void* args[] = {&data, &scale, &scale2, &out, &runs, &runs_per_row, &scale_cols};
  p.kernel->launch(p.grid, p.block, 0, stream, args);
}

}  // namespace b12x::dequant
