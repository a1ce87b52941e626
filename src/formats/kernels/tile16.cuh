// The tile16 weight layout: the lossless repack of a checkpoint weight that the linear op's streaming
// kernel reads (src/linear/kernels/mma_tile16.cuh). Same tensors, dtypes, shapes and byte counts as
// the checkpoint layout (formats/weight.h); only the byte order differs. docs/FORMATS.md#tile16.
//
// Why: in the checkpoint layout a 16-row MMA tile's bytes for one 32-element run are 16 scattered row
// pieces, so every lane issues one small load per row and run. In tile16 a tile's run is one
// contiguous chunk in exactly the order the MMA fragments want, so a warp copies several runs with
// one bulk copy and every lane then reads its part of each run with one 16-byte shared-memory load.
//
// Definitions: N % 16 == 0, K % 32 == 0; tile T = rows 16T .. 16T+15; run j = elements 32j .. 32j+31
// of a row; R = K / 32 runs per row; lane l = 4g + t (g = 0..7, t = 0..3) owns rows g and g + 8 of
// the tile and elements 8t .. 8t+7 of each run (the MMA kernel's fragment, see mma.cuh).
//  * data: chunk (T, j) of tile16_chunk_bytes(format) at byte (T * R + j) * chunk. Inside it, lane l's
//    slot of 2 * E bytes at l * 2 * E holds row g's elements 8t .. 8t+7 of run j, then row g + 8's,
//    each as the checkpoint stores them (E = 16, 8, 4 bytes for 16-bit, 8-bit, FP4 elements; FP4
//    keeps the checkpoint's nibble order), except that E4M3 data (fp8_*, mxfp8) stores each 4-byte
//    word's elements 0, 1, 2, 3 in bytes 0, 2, 1, 3: a BF16 pair is then the word's bytes h and h+2,
//    one shift and two masks away (device/pack16.cuh, e4m3x2_pack_split). Q8_0 (E = 8, the int8
//    qs) adds 32 bytes after the 512 bytes of slots: word g = d(row g) | d(row g + 8) << 16, the
//    blocks' FP16 d.
//  * scale: MXFP8 / MXFP4 (one UE8M0 byte per row and run): 16 bytes per (T, j) at (T * R + j) * 16,
//    byte 2g + h = row g + 8h. NVFP4 (two E4M3 bytes per row and run, for elements 0..15 and 16..31):
//    32 bytes per (T, j) at (T * R + j) * 32, byte 16q + 2g + h = group q of row g + 8h. A lane reads
//    its two rows' byte pair as one 16-bit word (NVFP4: of group t / 2). fp8_channel and fp8_block
//    scales keep their checkpoint layout; BF16, F16 and fp8_tensor have no scale tensor.
//  * IQ2_XXS / IQ2_XS (K % 256 == 0, B = K / 256 blocks of 66 / 74 bytes per row): chunk (T, b) of
//    16 blocks (16 * 66 = 1056 / 16 * 74 = 1184 bytes) at byte (T * B + b) * chunk, read by
//    linear/kernels/mma_iq2.cuh: bytes 0..31 are the d words as Q8_0's (word g = d(row g) |
//    d(row g + 8) << 16); then, for sub-block (run) r = 0..7, 128 bytes at 32 + 128 r: byte 16 g +
//    8 h + i = byte i of row g + 8h's 8 qs bytes of the sub-block (IQ2_XXS: 4 grid indices, then the
//    sign / scale word; IQ2_XS: 4 16-bit grid|sign units); IQ2_XS then has 128 bytes of sub-block
//    scales at 1056: byte 16 r + 2 g + h = row g + 8h's scale byte of sub-block r.
//
// tile16_data_src / tile16_scale_src map a tile16 byte offset to the checkpoint byte offset holding
// the same byte: packing is out[i] = in[src(i)], unpacking in[src(i)] = out[i]. Host and device share
// them (the CPU pack is the executable spec of the GPU pack).
#pragma once
#include "device/decode.cuh"

namespace b12x::device {

constexpr bool tile16_supported(int format) {
  return format == kFmtBf16 || format == kFmtF16 || format == kFmtFp8Tensor || format == kFmtFp8Channel ||
         format == kFmtFp8Block || format == kFmtMxfp8 || format == kFmtNvfp4 || format == kFmtMxfp4 ||
         format == kFmtQ8_0 || format == kFmtIq2xxs || format == kFmtIq2xs;
}

// IQ2 formats: one chunk per (tile, 256-element block) instead of per (tile, run).
constexpr bool tile16_iq2(int format) { return format == kFmtIq2xxs || format == kFmtIq2xs; }
// Bytes of one IQ2 block (one row's 256 elements).
constexpr int tile16_iq2_block_bytes(int format) { return format == kFmtIq2xxs ? 66 : 74; }

// E4M3 data whose words hold elements 0, 1, 2, 3 in bytes 0, 2, 1, 3 (the byte order above).
constexpr bool tile16_fp8_split(int format) {
  return format == kFmtFp8Tensor || format == kFmtFp8Channel || format == kFmtFp8Block || format == kFmtMxfp8;
}

// Bytes of one row's 8 elements in a lane slot (E above).
constexpr int tile16_lane_row_bytes(int format) {
  return format == kFmtBf16 || format == kFmtF16 ? 16 : format == kFmtNvfp4 || format == kFmtMxfp4 ? 4 : 8;
}

// Bytes of one (tile, run) chunk of the data tensor; IQ2: of one (tile, block) chunk.
constexpr int tile16_chunk_bytes(int format) {
  return tile16_iq2(format) ? 16 * tile16_iq2_block_bytes(format)
                            : 64 * tile16_lane_row_bytes(format) + (format == kFmtQ8_0 ? 32 : 0);
}

// Bytes of one (tile, run) chunk of the scale tensor (0: the scale keeps its checkpoint layout).
constexpr int tile16_scale_chunk_bytes(int format) {
  return format == kFmtMxfp8 || format == kFmtMxfp4 ? 16 : format == kFmtNvfp4 ? 32 : 0;
}

// Checkpoint byte offset of tile16 data byte i; runs = K / 32.
B12X_DEV long long tile16_data_src(int format, long long i, long long runs) {
  const long long chunk = tile16_chunk_bytes(format);
  if (tile16_iq2(format)) {
    const long long blocks = runs / 8, bb = tile16_iq2_block_bytes(format);
    const long long tb = i / chunk;  // T * blocks + b
    const int c = static_cast<int>(i - tb * chunk);
    const long long tile = tb / blocks, b = tb - tile * blocks;
    int g, h, at;  // row g + 8h of the tile, byte `at` of its block b
    if (c < 32) {  // d words: byte 4g + 2h + i
      g = c >> 2, h = (c >> 1) & 1, at = c & 1;
    } else if (c < 1056) {  // qs: 32 + 128r + 16g + 8h + i
      const int o = c - 32;
      g = (o >> 4) & 7, h = (o >> 3) & 1, at = 2 + 8 * (o >> 7) + (o & 7);
    } else {  // IQ2_XS scales: 1056 + 16r + 2g + h
      const int o = c - 1056;
      g = (o >> 1) & 7, h = o & 1, at = 66 + (o >> 4);
    }
    return (16 * tile + g + 8 * h) * blocks * bb + b * bb + at;
  }
  const long long tr = i / chunk;  // T * runs + j
  const int c = static_cast<int>(i - tr * chunk);
  const long long tile = tr / runs, j = tr - tile * runs;
  const int e = tile16_lane_row_bytes(format);
  if (format == kFmtQ8_0) {
    const long long block_row = 34 * runs;  // bytes of one row: runs blocks of 34
    if (c >= 512) {  // d words: byte 4g + 2h + b
      const int w = c - 512, g = w >> 2, h = (w >> 1) & 1, b = w & 1;
      return (16 * tile + g + 8 * h) * block_row + 34 * j + b;
    }
    const int lane = c / 16, h = (c / 8) & 1, b = c & 7;
    return (16 * tile + (lane >> 2) + 8 * h) * block_row + 34 * j + 2 + 8 * (lane & 3) + b;
  }
  const int lane = c / (2 * e), h = (c / e) & 1;
  int b = c % e;
  if (tile16_fp8_split(format)) b = (b & ~3) | ((b & 1) << 1) | ((b >> 1) & 1);  // bytes 1 and 2 swap
  const long long row_bytes = 4LL * e * runs;  // a run is 4 lane pieces of e bytes
  return (16 * tile + (lane >> 2) + 8 * h) * row_bytes + 4LL * e * j + static_cast<long long>(e) * (lane & 3) + b;
}

// Checkpoint byte offset of tile16 scale byte i (formats with tile16_scale_chunk_bytes > 0).
B12X_DEV long long tile16_scale_src(int format, long long i, long long runs) {
  const long long chunk = tile16_scale_chunk_bytes(format);
  const long long tr = i / chunk;
  const int c = static_cast<int>(i - tr * chunk);
  const long long tile = tr / runs, j = tr - tile * runs;
  if (format == kFmtNvfp4) {  // [N, 2 runs]: byte 16q + 2g + h
    const int q = c >> 4, g = (c >> 1) & 7, h = c & 1;
    return (16 * tile + g + 8 * h) * 2 * runs + 2 * j + q;
  }
  const int g = c >> 1, h = c & 1;  // MX: [N, runs]: byte 2g + h
  return (16 * tile + g + 8 * h) * runs + j;
}

}  // namespace b12x::device
