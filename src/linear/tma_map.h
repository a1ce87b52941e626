// The linear GEMMs' TMA descriptors (prefill: x and the tile16 weight; fp8: x and the weight).
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "b12x/core/error.h"
#include "runtime/cuda_api.h"  // cuTensorMapEncodeTiled, B12X_CU_CHECK

namespace b12x::linear {

// A row-major tensor at `base` as a CUtensorMap, encoded on the host (no device access) into the 128
// bytes a kernel takes by value (__grid_constant__): dims and box innermost first, byte_strides of
// dims 1.., every element stride 1, no interleave, 256-byte L2 promotion, zeros outside the tensor.
inline void encode_tma_map(unsigned char (&out)[128], CUtensorMapDataType type, const void* base,
                           std::initializer_list<uint64_t> dims, std::initializer_list<uint64_t> byte_strides,
                           std::initializer_list<uint32_t> box, CUtensorMapSwizzle swizzle) {
  static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");
  const size_t rank = dims.size();
  B12X_CHECK_ARG(rank >= 1 && rank <= 5 && box.size() == rank && byte_strides.size() == rank - 1, "tma map",
                 "needs 1..5 dims, as many box sizes and one stride per outer dim");
  cuuint64_t d[5], s[4];
  cuuint32_t b[5], e[5];
  size_t i = 0;
  for (uint64_t v : dims) d[i++] = v;
  i = 0;
  for (uint64_t v : byte_strides) s[i++] = v;
  i = 0;
  for (uint32_t v : box) e[i] = 1, b[i++] = v;
  CUtensorMap map;
  B12X_CU_CHECK(detail::driver().cuTensorMapEncodeTiled(&map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base),
                                                        d, s, b, e, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                                        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  std::memcpy(out, &map, sizeof map);
}

}  // namespace b12x::linear
