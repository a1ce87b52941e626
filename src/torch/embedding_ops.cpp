// torch.ops.b12x.embedding_q8_0: out[*, K] = decode(table[ids[*]]) for a Q8_0 table u8 [V, K/32, 34],
// plus bad_ids u8 [*] (1 where the id was outside [0, V); that row of out is quiet NaN). The same
// contract on both devices, with no host synchronisation on CUDA (graph-safe; the flags are the GPU
// op's status region, embedding/lookup.h). CPU: reference_embedding_q8_0 per valid row.
#include <limits>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "b12x/core/error.h"
#include "b12x/embedding/lookup.h"
#include "b12x/embedding/reference.h"
#include "b12x/formats/ggml.h"
#include "common.h"

namespace b12x::torch_ext {

namespace {

// Plans by capacity (the next power of two of T): the kernel depends only on the dtypes, a plan's
// capacity sizes its status region.
const embedding::Plan& plan_for(const embedding::Caps& caps, int device, cudaStream_t stream) {
  static PlanCache<embedding::Plan> cache;
  const std::string key = detail::concat("embedding_q8_0{vocab=", caps.vocab, ", k=", caps.k, ", max_tokens=",
                                         caps.max_tokens, ", ids=", dtype_name(caps.ids_dtype), ", out=",
                                         dtype_name(caps.out_dtype), "} on cuda:", device);
  return cache.get(key, stream, [&] { return embedding::plan(caps, stream); });
}

int64_t capacity_for(int64_t t) {
  int64_t c = 1;
  while (c < t) c *= 2;
  return c;
}

void lookup_cpu(const at::Tensor& table, const at::Tensor& ids, at::Tensor& out, at::Tensor& bad) {
  const int64_t T = ids.numel(), V = table.size(0), K = out.size(-1);
  const at::Tensor ids64 = ids.to(at::kLong);
  const int64_t* id = ids64.const_data_ptr<int64_t>();
  const TensorView tv = view_of(table, "table");
  uint8_t* flags = bad.data_ptr<uint8_t>();
  at::Tensor out2 = out.view({T, K});
  const size_t row_bytes = static_cast<size_t>(K) * out.element_size();
  for (int64_t t = 0; t < T; ++t) {
    char* row = static_cast<char*>(out2.data_ptr()) + t * row_bytes;
    flags[t] = id[t] < 0 || id[t] >= V;
    if (flags[t]) {
      out2[t].fill_(std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    int64_t one = id[t];
    reference_embedding_q8_0(tv, TensorView(&one, DType::i64, {1}), TensorView(row, to_dtype(out.scalar_type(), "out"), {1, K}));
  }
}

// Returns bad_ids [T]: a copy of the status flags the kernel wrote into this call's scratch.
at::Tensor lookup_cuda(const at::Tensor& table, const at::Tensor& ids, at::Tensor& out) {
  const int64_t T = ids.numel();
  c10::cuda::CUDAGuard guard(table.device());
  cudaStream_t stream = current_stream(table);
  embedding::Caps caps;
  caps.vocab = table.size(0);
  caps.k = out.size(-1);
  caps.max_tokens = capacity_for(T);
  caps.ids_dtype = to_dtype(ids.scalar_type(), "ids");
  caps.out_dtype = to_dtype(out.scalar_type(), "out_dtype");
  const embedding::Plan& plan = plan_for(caps, table.get_device(), stream);
  // Scratch per call from torch's allocator (graph-safe), aligned as plans want it.
  const size_t need = plan.scratch_bytes();
  at::Tensor storage = at::empty({static_cast<int64_t>(need + ScratchLayout::kAlignment)}, table.options().dtype(at::kByte));
  const uintptr_t base = reinterpret_cast<uintptr_t>(storage.data_ptr());
  const size_t pad = (ScratchLayout::kAlignment - base % ScratchLayout::kAlignment) % ScratchLayout::kAlignment;
  const Scratch scratch{reinterpret_cast<void*>(base + pad), need, Device::cuda(table.get_device())};
  const embedding::Binding b = embedding::bind(plan, scratch, view_of(table, "table"), view_of(ids, "ids"),
                                               view_of(out.view({T, caps.k}), "out"));
  embedding::run(b, stream);
  const int64_t status_offset = static_cast<char*>(b.status.data) - static_cast<char*>(storage.data_ptr());
  return storage.narrow(0, status_offset, T).clone();
}

std::tuple<at::Tensor, at::Tensor> embedding_q8_0(const at::Tensor& table, const at::Tensor& ids_in,
                                                  std::optional<c10::ScalarType> out_dtype) {
  return guarded([&] {
    B12X_CHECK_ARG(table.dim() == 3 && table.size(2) == kQ8_0Bytes && table.scalar_type() == at::kByte, "table",
                   "must be a Q8_0 table u8 [V, K/32, ", kQ8_0Bytes, "], got ", view_of(table, "table").describe());
    B12X_CHECK_ARG(table.is_contiguous(), "table", "must be contiguous");
    B12X_CHECK_ARG(ids_in.scalar_type() == at::kInt || ids_in.scalar_type() == at::kLong, "ids",
                   "must be int32 or int64, got ", c10::toString(ids_in.scalar_type()));
    B12X_CHECK_ARG(ids_in.device() == table.device(), "ids", "must be on the table's device (", table.device().str(),
                   "), got ", ids_in.device().str());
    const c10::ScalarType od = out_dtype.value_or(at::kBFloat16);
    B12X_CHECK_ARG(od == at::kBFloat16 || od == at::kFloat, "out_dtype", "must be bfloat16 or float32, got ",
                   c10::toString(od));
    const int64_t K = table.size(1) * kQ8_0Group;
    std::vector<int64_t> shape = ids_in.sizes().vec();
    shape.push_back(K);
    at::Tensor out = at::empty(shape, table.options().dtype(od));
    const at::Tensor ids = ids_in.contiguous().view({-1});
    if (ids.numel() == 0) return std::tuple{out, at::zeros(ids_in.sizes(), table.options().dtype(at::kByte))};
    if (table.is_cuda()) {
      return std::tuple{out, lookup_cuda(table, ids, out).view(ids_in.sizes())};
    }
    at::Tensor bad = at::empty(ids_in.sizes(), table.options().dtype(at::kByte));
    lookup_cpu(table, ids, out, bad);
    return std::tuple{out, bad};
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(b12x, CPU, m) { m.impl("embedding_q8_0", &embedding_q8_0); }
TORCH_LIBRARY_IMPL(b12x, CUDA, m) { m.impl("embedding_q8_0", &embedding_q8_0); }

}  // namespace b12x::torch_ext
