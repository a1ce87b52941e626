// formats.tile16_pack: repack a checkpoint-layout weight into the tile16 layout on the device,
// out[i] = in[tile16_data_src(i)] (formats/kernels/tile16.cuh), byte for byte tile16_pack_host(),
// its spec (src/formats/tile16.cpp).
//
// A one-time repack, so simple rather than tuned: a thread gathers 16 destination bytes with byte
// loads (the checkpoint tensor may have any alignment; GGML blocks are 2-byte aligned), computing each
// byte's source with the shared map, and writes them with one 16-byte store (every tile16 data tensor
// is whole chunks of a multiple of 16 bytes). Then the scale tensor, one byte per thread: tile16
// order for MX / NVFP4, a straight copy for fp8_channel / fp8_block. 1-D grid-stride loops with
// 64-bit indices cover any size.
#pragma once
#include "formats/kernels/tile16.cuh"

namespace b12x {

constexpr int kTile16PackThreads = 256;
constexpr int kTile16PackMinBlocksPerSm = 4;  // caps registers at 64 (launch bounds override -maxrregcount)

// kFormat: b12x::Format as int, one with a tile16 layout. data_vectors: out_data bytes / 16 (out_data
// 16-byte aligned); scale_bytes: bytes of the scale tensors (0: none); runs = K / 32.
template <int kFormat>
__global__ void __launch_bounds__(kTile16PackThreads, kTile16PackMinBlocksPerSm)
    tile16_pack_kernel(const unsigned char* __restrict__ in_data, const unsigned char* __restrict__ in_scale,
                       unsigned char* __restrict__ out_data, unsigned char* __restrict__ out_scale,
                       long long data_vectors, long long scale_bytes, long long runs) {
  static_assert(device::tile16_supported(kFormat), "a format with a tile16 layout");
  const long long stride = static_cast<long long>(gridDim.x) * kTile16PackThreads;
  const long long first = static_cast<long long>(blockIdx.x) * kTile16PackThreads + threadIdx.x;
  for (long long v = first; v < data_vectors; v += stride) {
    // Byte b enters at the top of w3 and is shifted down one byte per step: after 16 steps byte 0 is
    // the low byte of w0. Not unrolled: one source computation (64-bit divisions) live at a time.
    unsigned w0 = 0, w1 = 0, w2 = 0, w3 = 0;
#pragma unroll 1
    for (int b = 0; b < 16; ++b) {
      const unsigned byte = device::ld_u8(in_data + device::tile16_data_src(kFormat, 16 * v + b, runs));
      w0 = (w0 >> 8) | (w1 << 24);
      w1 = (w1 >> 8) | (w2 << 24);
      w2 = (w2 >> 8) | (w3 << 24);
      w3 = (w3 >> 8) | (byte << 24);
    }
    device::st_u32x4(out_data + 16 * v, w0, w1, w2, w3);
  }
  for (long long i = first; i < scale_bytes; i += stride) {
    if constexpr (device::tile16_scale_chunk_bytes(kFormat) > 0)
      out_scale[i] = in_scale[device::tile16_scale_src(kFormat, i, runs)];
    else
      out_scale[i] = in_scale[i];
  }
}

}  // namespace b12x
