// wgmma shared-memory matrix descriptors: plain integer arithmetic, so the host tests can check it
// (tests/linear/test_wgmma_fragments.cpp); device/wgmma.cuh includes it for the kernels.
#pragma once
#include "device/convert.cuh"  // B12X_DEV

namespace b12x::device {

// Shared-memory matrix descriptor of a K-major operand tile with 128-byte swizzle, as the TMA's
// CU_TENSOR_MAP_SWIZZLE_128B writes it: rows of 128 bytes (64 16-bit elements), 8-row groups 1024
// bytes apart, tile base 1024-byte aligned. One k16 step further along K is 32 bytes further.
B12X_DEV unsigned long long wgmma_desc_sw128(unsigned smem_addr) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((smem_addr & 0x3FFFFu) >> 4);  // start address
  d |= 1ull << 16;                                                      // leading byte offset (unused)
  d |= static_cast<unsigned long long>(1024 >> 4) << 32;                // stride byte offset: 8 rows
  d |= 1ull << 62;                                                      // 128-byte swizzle
  return d;
}
// The descriptor of the tile `bytes` further on than d's (a multiple of 16): one add to the start
// field, where wgmma_desc_sw128(addr + bytes) repeats the field's mask, shift and OR for every wgmma
// (4-5 uniform-datapath instructions each, which take the warp's issue slots). Shared-memory
// addresses lie below 2^18, so the 14-bit field cannot carry into the next one.
B12X_DEV unsigned long long wgmma_desc_advance(unsigned long long d, unsigned bytes) {
  return (d & 0xFFFFFFFF00000000ull) | (static_cast<unsigned>(d) + (bytes >> 4));
}

}  // namespace b12x::device
