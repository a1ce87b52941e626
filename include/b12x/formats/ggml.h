// GGML block codecs in ggml's byte layout, stored [N, K/group, payload] (ModelOpt "ggml" packing):
//   Q8_0     34 bytes / 32 weights : fp16 d, int8 qs[32]
//   IQ2_XXS  66 bytes / 256 weights: fp16 d, 8 x (4 grid bytes + u32 signs/scale)
//   IQ2_XS   74 bytes / 256 weights: fp16 d, u16 qs[32] (9-bit grid | 7-bit sign), u8 scales[8]
// Decoding to FP32 is exact (gguf-py and the ggml C reference are the oracles).
#pragma once
#include <bit>
#include <cstdint>

#include "b12x/core/tensor.h"
#include "b12x/formats/format.h"

namespace b12x {

constexpr int kQ8_0Group = 32, kQ8_0Bytes = 34;
constexpr int kIq2Group = 256, kIq2xxsBytes = 66, kIq2xsBytes = 74;

// Tables transcribed from gguf-py (see src/formats/ggml_tables.cpp for the provenance note).
extern const uint64_t kIq2xxsGrid[256];
extern const uint64_t kIq2xsGrid[512];
// ksigns_iq2xs[i] = i | (parity(i) << 7): the 7 stored sign bits plus an even-parity 8th.
inline uint8_t iq2_ksigns(uint32_t i) {
  i &= 127;
  return static_cast<uint8_t>(i | ((std::popcount(i) & 1u) << 7));
}

// Single-block decoders (out receives 32 or 256 floats).
void q8_0_decode_block(const uint8_t* block, float* out);
void iq2_xxs_decode_block(const uint8_t* block, float* out);
void iq2_xs_decode_block(const uint8_t* block, float* out);

// blocks: u8 [R, C/group, payload] (or u8 [R, C/group * payload]); out: f32 [R, C].
void ggml_dequantize(Format fmt, const TensorView& blocks, const TensorView& out);

// ggml's quantize_row_q8_0_ref, bit-exact: d = amax/127, id = 1/d, qs = roundf(x * id), stored fp16(d).
// x: f32/bf16/f16 [R, C], C % 32 == 0; blocks: u8 [R, C/32, 34].
void q8_0_quantize(const TensorView& x, const TensorView& blocks);

// Fills blocks (u8 [R, C/group, payload]) with random valid blocks of fmt (any GGML format):
// finite fp16 d drawn with magnitudes in [2^-14, 2^-6] (either sign), every other bit uniform.
// Deterministic for a seed. There is no IQ2 quantizer: tests and benchmarks use this.
void ggml_random_blocks(Format fmt, const TensorView& blocks, uint64_t seed);

}  // namespace b12x
