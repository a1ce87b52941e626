// Shared-memory addresses and loads at 32-bit shared addresses (half the registers of generic
// pointers, and no generic-to-shared conversion per access). CUDA only.
#pragma once
#include "device/convert.cuh"

#if defined(__CUDACC__)
namespace b12x::device {

B12X_DEV unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

// The first kAlign-aligned byte at or after p (shared memory; kAlign a power of two), as an offset
// from p, not through an integer: the compiler then still knows the result is shared memory and
// reads through it with LDS, not with generic loads (measured: docs/perf/NOTES.md, 2026-12-06).
template <unsigned kAlign>
B12X_DEV unsigned char* smem_align(unsigned char* p) {
  static_assert((kAlign & (kAlign - 1)) == 0, "a power of two");
  return p + ((kAlign - (smem_u32(p) & (kAlign - 1))) & (kAlign - 1));
}

// volatile: each load stays after the barrier wait (or __syncwarp) that makes its bytes visible.
// 16 bytes (16-byte aligned address).
B12X_DEV U32x4 lds_u32x4(unsigned addr) {
  U32x4 v;
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
B12X_DEV unsigned lds_u32(unsigned addr) {
  unsigned v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
  return v;
}
// ldmatrix.x4 (8x8 matrices of 16-bit elements): lanes 8j .. 8j + 7 give the 16-byte rows of
// matrix j, and r[j] gets row lane / 4, bytes 4 (lane % 4) .. + 3 of it: for 8-bit data exactly the
// mma.m16n8k32 / wgmma k32 A fragment when the matrices are (rows 0-7, 8-15) x (k 0-15, 16-31).
B12X_DEV void ldsm_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
B12X_DEV unsigned lds_u16(unsigned addr) {
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}

}  // namespace b12x::device
#endif
