// GPU Q8_0 embedding lookup (include/b12x/embedding/lookup.h): plan validates and resolves the kernel
// (src/embedding/kernels/lookup.cuh), bind checks the tensors and carves the status view without
// touching CUDA, run only launches.
#include "b12x/embedding/lookup.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "b12x/core/error.h"
#include "b12x/formats/ggml.h"
#include "b12x/runtime/device.h"
#include "runtime/cuda_api.h"

namespace b12x::embedding {

namespace {

constexpr unsigned kThreads = 256;     // kEmbedThreads in the kernel
constexpr unsigned kCtasPerSm = 4;     // kEmbedMinBlocksPerSm: resident CTAs the register cap allows
constexpr int64_t kMaxTokens = std::numeric_limits<int32_t>::max();

// Template codes of the kernel: embed::IdsDType and device::OutDType.
int ids_code(DType d) {
  switch (d) {
    case DType::i32: return 0;
    case DType::i64: return 1;
    default: fail_arg("ids_dtype", "must be i32 or i64, got ", dtype_name(d));
  }
}

int out_code(DType d) {
  switch (d) {
    case DType::bf16: return 0;
    case DType::f32: return 2;
    default: fail_arg("out_dtype", "must be bf16 or f32, got ", dtype_name(d));
  }
}

// Everything plan can check without CUDA.
void check_caps(const Caps& caps) {
  ids_code(caps.ids_dtype);
  out_code(caps.out_dtype);
  B12X_CHECK_ARG(caps.vocab > 0, "vocab", "V (table rows) must be positive, got ", caps.vocab);
  B12X_CHECK_ARG(caps.k > 0, "k", "K (row length) must be positive, got ", caps.k);
  B12X_CHECK_ARG(caps.k % kQ8_0Group == 0, "k", "K (row length) must be a multiple of ", kQ8_0Group,
                 " (Q8_0 group), got K = ", caps.k);
  B12X_CHECK_ARG(caps.max_tokens > 0 && caps.max_tokens <= kMaxTokens, "max_tokens", "must be in [1, ", kMaxTokens,
                 "], got ", caps.max_tokens);
  // Table bytes (V x K/32 x 34) and output bytes (max_tokens x K x 4) must be addressable with int64.
  const int64_t row_bytes = caps.k / kQ8_0Group * kQ8_0Bytes;
  B12X_CHECK_ARG(caps.vocab <= std::numeric_limits<int64_t>::max() / row_bytes, "vocab", "V x K = ", caps.vocab, " x ",
                 caps.k, " is too large");
  B12X_CHECK_ARG(caps.max_tokens <= std::numeric_limits<int64_t>::max() / 4 / caps.k, "max_tokens",
                 "max_tokens x K = ", caps.max_tokens, " x ", caps.k, " is too large");
}

}  // namespace

KernelSpec kernel_spec(const Caps& caps) {
  const int ids = ids_code(caps.ids_dtype);
  const int out = out_code(caps.out_dtype);
  KernelSpec s;
  s.kernel = "embedding.lookup";
  s.source = "embedding/kernels/lookup.cuh";
  s.name_expression = "b12x::embedding_q8_0_kernel<" + std::to_string(ids) + ", " + std::to_string(out) + ">";
  s.config = {{"format", "q8_0"},
              {"ids", std::string(dtype_name(caps.ids_dtype))},
              {"out", std::string(dtype_name(caps.out_dtype))}};
  s.archs = {"sm_90a", "sm_120a"};  // CUDA cores only: SM120 runs it too
  s.max_registers = 64;
  // Bit-exactness relies on IEEE FP32 (the decoders use __fmul_rn / __fadd_rn; this makes it a
  // property of the whole kernel), as for formats.dequantize.
  s.options = {"--ftz=false", "--fmad=false"};
  return s;
}

std::vector<KernelSpec> all_kernel_specs() {
  std::vector<KernelSpec> specs;
  for (DType ids : {DType::i32, DType::i64})
    for (DType out : {DType::bf16, DType::f32}) specs.push_back(kernel_spec({0, 0, 0, ids, out}));
  return specs;
}

Plan plan(const Caps& caps, cudaStream_t stream) {
  check_caps(caps);  // before resolving: argument errors never need a GPU
  Plan p;
  p.caps = caps;
  p.block = dim3(kThreads);
  p.scratch.add("status", static_cast<size_t>(caps.max_tokens));
  p.kernel = &resolve_kernel(kernel_spec(caps), stream);
  p.max_ctas = static_cast<unsigned>(std::max(device_info().sm_count, 1)) * kCtasPerSm;
  return p;
}

Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& table, const TensorView& ids,
             const TensorView& out) {
  B12X_CHECK_ARG(plan.kernel != nullptr, "plan", "has no kernel; make it with embedding::plan()");
  const Caps& caps = plan.caps;
  const int64_t blocks = caps.k / kQ8_0Group;

  expect(table, "table")
      .present()
      .dtype(DType::u8)
      .shape({caps.vocab, blocks, kQ8_0Bytes})
      .contiguous()
      .on_cuda()
      .aligned(2);  // u16 loads at least (Q8_0 blocks are 34 bytes)

  expect(ids, "ids").dtype(caps.ids_dtype).ndim(1).contiguous();
  const int64_t T = ids.size(0);
  B12X_CHECK_ARG(T <= caps.max_tokens, "ids", "holds ", T, " tokens but the plan was made for at most max_tokens = ",
                 caps.max_tokens);
  expect(ids, "ids").present().on_cuda().same_device(table, "table").aligned(dtype_size(caps.ids_dtype));

  expect(out, "out")
      .present()
      .dtype(caps.out_dtype)
      .shape({T, caps.k})
      .contiguous()
      .on_cuda()
      .same_device(table, "table")
      .aligned(16);

  check_scratch(scratch, plan.scratch);
  B12X_CHECK_ARG(scratch.device == table.device, "scratch", "must be device memory on the table's device (",
                 table.describe(), ")");

  Binding b;
  b.plan = &plan;
  b.table = table;
  b.ids = ids;
  b.out = out;
  b.status = TensorView(scratch_region(scratch, plan.scratch, "status"), DType::u8, {T}, scratch.device);
  return b;
}

void run(const Binding& binding, cudaStream_t stream) {
  B12X_CHECK_ARG(binding.plan != nullptr && binding.plan->kernel != nullptr, "binding",
                 "has no plan; make it with embedding::bind()");
  const Plan& p = *binding.plan;
  long long tokens = binding.ids.size(0);
  if (tokens == 0) return;
  const unsigned char* table = static_cast<const unsigned char*>(binding.table.data);
  const void* ids = binding.ids.data;
  unsigned char* out = static_cast<unsigned char*>(binding.out.data);
  unsigned char* bad = static_cast<unsigned char*>(binding.status.data);
  long long vocab = p.caps.vocab;
  long long blocks_per_row = p.caps.k / kQ8_0Group;
  const long long chunks = (blocks_per_row + 255) / 256;  // kEmbedChunkBlocks
  const long long tiles = tokens * chunks;
  const dim3 grid(static_cast<unsigned>(std::min<long long>(tiles, p.max_ctas)));
  void* args[] = {&table, &ids, &out, &bad, &vocab, &tokens, &blocks_per_row};
  p.kernel->launch(grid, p.block, 0, stream, args);
}

int64_t read_status(const Binding& binding, cudaStream_t stream) {
  B12X_CHECK_ARG(binding.plan != nullptr, "binding", "has no plan; make it with embedding::bind()");
  const int64_t T = binding.status.numel();
  if (T == 0) return -1;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  B12X_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    throw Error("embedding::read_status synchronizes and copies to the host: it cannot be called while the stream "
                "is capturing a CUDA graph (call it after launching the graph)");
  std::vector<uint8_t> flags(static_cast<size_t>(T));
  B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
  B12X_CUDA_CHECK(cudaMemcpy(flags.data(), binding.status.data, flags.size(), cudaMemcpyDeviceToHost));
  for (int64_t t = 0; t < T; ++t)
    if (flags[static_cast<size_t>(t)] != 0) return t;
  return -1;
}

}  // namespace b12x::embedding
