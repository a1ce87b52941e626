// The prefill kernel's (linear/kernels/wgmma_tile16.cuh) FP4 / 8-bit pair gathers on the CPU: for every
// lane of a warp and every run, the words wgmma_fp4_gather / wgmma_8bit_gather build from the lane's quad in a tile16 chunk
// hold exactly the checkpoint codes wgmma's A fragment wants (row g / g + 8, K 16s + 2t, 16s + 2t + 1
// and 16s + 8 + 2t, +1 of K step s). The GPU one-hot tests would also catch a wrong mapping, but only
// on the device; this pins the index arithmetic here, against tile16_data_src (the layout's spec).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "device/wgmma_desc.cuh"
#include "linear/kernels/wgmma_tile16.cuh"

namespace b12x::device {
namespace {

// The code of element k of `row` in a checkpoint FP4 tensor of K columns (two per byte, low nibble
// first).
unsigned fp4_code(const std::vector<uint8_t>& ckpt, long long k_cols, long long row, long long k) {
  const uint8_t b = ckpt[static_cast<size_t>(row * (k_cols / 2) + k / 2)];
  return k % 2 == 0 ? b & 0xFu : b >> 4;
}

void check_fp4_gather(int format) {
  std::mt19937 rng(7);
  const long long n = 16, k = 128, runs = k / 32;  // one tile, four runs
  std::vector<uint8_t> ckpt(static_cast<size_t>(n * k / 2));
  for (auto& b : ckpt) b = static_cast<uint8_t>(rng());
  const int chunk = tile16_chunk_bytes(format);
  ASSERT_EQ(chunk, 256);
  std::vector<uint8_t> tiled(static_cast<size_t>(runs * chunk));
  for (size_t i = 0; i < tiled.size(); ++i)
    tiled[i] = ckpt[static_cast<size_t>(tile16_data_src(format, static_cast<long long>(i), runs))];
  for (long long u = 0; u < runs; ++u)
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane & 3;
      unsigned q[8];
      for (int i = 0; i < 8; ++i) {
        const uint8_t* p = tiled.data() + u * chunk + 32 * g + 4 * i;
        q[i] = p[0] | p[1] << 8 | p[2] << 16 | static_cast<unsigned>(p[3]) << 24;
      }
      unsigned lo = 0, hi = 0;
      wgmma_fp4_gather(q, t, lo, hi);
      for (int c = 0; c < 4; ++c) {
        // Pair c: K step c / 2, the step's K 2t (c even) or 8 + 2t (c odd).
        const long long k0 = 32 * u + 16 * (c / 2) + (c % 2 ? 8 : 0) + 2 * t;
        for (int h = 0; h < 2; ++h) {  // row g (lo), row g + 8 (hi)
          const unsigned word = h == 0 ? lo : hi;
          const long long row = g + 8 * h;
          EXPECT_EQ((word >> (8 * c)) & 0xFu, fp4_code(ckpt, k, row, k0))
              << "run " << u << " lane " << lane << " pair " << c << " row " << row;
          EXPECT_EQ((word >> (8 * c + 4)) & 0xFu, fp4_code(ckpt, k, row, k0 + 1))
              << "run " << u << " lane " << lane << " pair " << c << " row " << row;
        }
      }
    }
}

TEST(WgmmaFragments, Nvfp4GatherGivesTheAFragmentPairs) { check_fp4_gather(kFmtNvfp4); }

// The 8-bit formats: FP8 (tile16's split byte order): the code bytes of pair c come out of
// e4m3x2_pack_split's byte positions (bytes 0 / 2 for pair 2i, 1 / 3 for pair 2i + 1 of word i);
// Q8_0 (natural order): out of i8x2_pack's (bytes 0 / 1 and 2 / 3). Q8_0's chunk ends in 32 bytes of
// d words, which the gather never reads.
void check_8bit_gather(int format) {
  std::mt19937 rng(11);
  const long long n = 16, k = 128, runs = k / 32;
  // Checkpoint byte of element (row, e): FP8 one byte per element; Q8_0 34-byte blocks (FP16 d, then
  // 32 int8).
  const long long row_bytes = format == kFmtQ8_0 ? runs * 34 : k;
  auto elem = [&](long long row, long long e) {
    return static_cast<size_t>(format == kFmtQ8_0 ? row * row_bytes + (e / 32) * 34 + 2 + e % 32 : row * k + e);
  };
  std::vector<uint8_t> ckpt(static_cast<size_t>(n * row_bytes));
  for (auto& b : ckpt) b = static_cast<uint8_t>(rng());
  const int chunk = tile16_chunk_bytes(format);
  const bool split = tile16_fp8_split(format);
  ASSERT_EQ(chunk, format == kFmtQ8_0 ? 544 : 512);
  ASSERT_TRUE(split || format == kFmtQ8_0);
  std::vector<uint8_t> tiled(static_cast<size_t>(runs * chunk));
  for (size_t i = 0; i < tiled.size(); ++i)
    tiled[i] = ckpt[static_cast<size_t>(tile16_data_src(format, static_cast<long long>(i), runs))];
  for (long long u = 0; u < runs; ++u)
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane >> 2, t = lane & 3;
      unsigned q[16];
      for (int i = 0; i < 16; ++i) {
        const uint8_t* p = tiled.data() + u * chunk + 64 * g + 4 * i;
        q[i] = p[0] | p[1] << 8 | p[2] << 16 | static_cast<unsigned>(p[3]) << 24;
      }
      unsigned lo[2], hi[2];
      if (split) wgmma_8bit_gather<true>(q, t, lo, hi);
      else wgmma_8bit_gather<false>(q, t, lo, hi);
      for (int c = 0; c < 4; ++c) {
        const long long k0 = 32 * u + 16 * (c / 2) + (c % 2 ? 8 : 0) + 2 * t;
        for (int h = 0; h < 2; ++h) {
          const unsigned word = h == 0 ? lo[c / 2] : hi[c / 2];
          const long long row = g + 8 * h;
          const int b0 = split ? 8 * (c % 2) : 16 * (c % 2), b1 = split ? b0 + 16 : b0 + 8;  // bit offsets
          const unsigned first = (word >> b0) & 0xFFu, second = (word >> b1) & 0xFFu;
          EXPECT_EQ(first, ckpt[elem(row, k0)]) << "run " << u << " lane " << lane << " pair " << c;
          EXPECT_EQ(second, ckpt[elem(row, k0 + 1)]) << "run " << u << " lane " << lane << " pair " << c;
        }
      }
    }
}

TEST(WgmmaFragments, Fp8GatherGivesTheAFragmentPairs) {
  for (int f : {kFmtFp8Tensor, kFmtFp8Channel, kFmtFp8Block, kFmtMxfp8}) check_8bit_gather(f);
}
TEST(WgmmaFragments, Q8_0GatherGivesTheAFragmentPairs) { check_8bit_gather(kFmtQ8_0); }
TEST(WgmmaFragments, Mxfp4GatherGivesTheAFragmentPairs) { check_fp4_gather(kFmtMxfp4); }

// NVFP4's scales in the gather order: a lane's pairs of K step s lie in 16-element group s of the run,
// whose E4M3 bytes for rows g and g + 8 the kernel reads at 16 s + 2 g of the run's scale chunk.
TEST(WgmmaFragments, Nvfp4ScaleChunkHoldsGroupSRowsGAndG8At16sPlus2g) {
  const long long n = 16, k = 64, runs = k / 32;
  const int sc = tile16_scale_chunk_bytes(kFmtNvfp4);
  ASSERT_EQ(sc, 32);
  for (long long u = 0; u < runs; ++u)
    for (int s = 0; s < 2; ++s)
      for (int g = 0; g < 8; ++g)
        for (int h = 0; h < 2; ++h) {
          const long long i = u * sc + 16 * s + 2 * g + h;  // the byte the kernel reads
          const long long row = g + 8 * h, group = 2 * u + s;  // checkpoint scale [N, K / 16]
          EXPECT_EQ(tile16_scale_src(kFmtNvfp4, i, runs), row * (k / 16) + group) << "byte " << i;
        }
  (void)n;
}

// The kernels build one descriptor per stage and move it per wgmma with wgmma_desc_advance: that must
// be the descriptor of the moved address for every 1024-byte aligned tile base of a CTA's shared
// memory (227 KiB on sm_90a) and every 16-byte multiple that stays inside it.
TEST(WgmmaDescriptor, AdvanceGivesTheDescriptorOfTheMovedAddress) {
  EXPECT_EQ(wgmma_desc_sw128(0x12340u), 0x4000004000011234ull);  // start 0x1234, LBO 1, SBO 64, 128B swizzle
  constexpr unsigned kSmem = 227u * 1024u;
  long long checked = 0;
  for (unsigned a = 0; a < kSmem; a += 1024)
    for (unsigned b = 0; a + b < kSmem; b += 16, ++checked)
      ASSERT_EQ(wgmma_desc_advance(wgmma_desc_sw128(a), b), wgmma_desc_sw128(a + b)) << a << " + " << b;
  EXPECT_GT(checked, 1000000);
}

}  // namespace
}  // namespace b12x::device
