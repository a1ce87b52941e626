// CPU reference of the Q8_0 embedding lookup. Decoding a Q8_0 row to FP32 is exact, so the only
// rounding is the final FP32 -> BF16 step (RNE); this is the oracle the GPU gather must match.
#include "b12x/embedding/reference.h"

#include <cstdint>

#include "b12x/core/error.h"
#include "b12x/formats/ggml.h"
#include "b12x/formats/scalar.h"

namespace b12x {

namespace {
int64_t load_id(const TensorView& ids, int64_t i) {
  return ids.dtype == DType::i32 ? static_cast<int64_t>(ids.ptr<const int32_t>()[i]) : ids.ptr<const int64_t>()[i];
}
}  // namespace

void reference_embedding_q8_0(const TensorView& table, const TensorView& ids, const TensorView& out) {
  // out fixes T and K; table and ids are then checked against them.
  expect(out, "out").host().dtype_in({DType::bf16, DType::f32}).ndim(2).contiguous();
  const int64_t T = out.size(0), K = out.size(1);
  B12X_CHECK_ARG(K % kQ8_0Group == 0, "out", "row length K must be a multiple of ", kQ8_0Group, " (Q8_0 group), got ",
                 K);
  const int64_t blocks = K / kQ8_0Group;
  expect(table, "table").host().dtype(DType::u8).shape({-1, blocks, kQ8_0Bytes}).contiguous();
  const int64_t V = table.size(0);
  expect(ids, "ids").host().dtype_in({DType::i32, DType::i64}).shape({T}).contiguous();

  // Every id is checked before the first write, so a bad call leaves out untouched.
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = load_id(ids, t);
    B12X_CHECK_ARG(id >= 0 && id < V, "ids", "ids[", t, "] = ", id, " is out of range [0, ", V, ")");
  }

  const uint8_t* rows = table.ptr<const uint8_t>();
  const int64_t row_bytes = blocks * kQ8_0Bytes;
  float block[kQ8_0Group];
  for (int64_t t = 0; t < T; ++t) {
    const uint8_t* row = rows + load_id(ids, t) * row_bytes;
    for (int64_t b = 0; b < blocks; ++b) {
      q8_0_decode_block(row + b * kQ8_0Bytes, block);
      const int64_t base = t * K + b * kQ8_0Group;
      for (int j = 0; j < kQ8_0Group; ++j) {
        // The FP32 value is exact, so this is the single rounding.
        if (out.dtype == DType::bf16)
          out.ptr<uint16_t>()[base + j] = f32_to_bf16(block[j]);
        else
          out.ptr<float>()[base + j] = block[j];
      }
    }
  }
}

}  // namespace b12x
