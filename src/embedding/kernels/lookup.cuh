// embedding.lookup: out[t, :] = decode(table[ids[t]]) for a Q8_0 table [V, K/32, 34], bit-exact with
// reference_embedding_q8_0() (include/b12x/embedding/reference.h) for every id in [0, V). An id
// outside [0, V) gives a row of NaN (BF16 0x7FC0, FP32 0x7FC00000) and sets bad[t] = 1; every valid
// token writes bad[t] = 0, so the flags need no reset between runs (include/b12x/embedding/lookup.h).
//
// Work unit: a tile = one chunk of up to kEmbedChunkBlocks (256) Q8_0 blocks of one token's row, i.e.
// up to 8192 elements (8704 bytes in, 16 KiB of BF16 out). Tiles are numbered token-major
// (tile = token * chunks_per_row + chunk). A CTA of 256 threads walks tiles blockIdx.x, +gridDim.x, ...
// (the host launches about as many CTAs as fit on the GPU at once) with a two-stage pipeline:
//
//   registers <- global (the tile's bytes, widest aligned loads)      [tile i+1, in flight while ...]
//   shared    <- registers, __syncthreads                              [tile i]
//   global    <- decode(shared): thread g writes 16 contiguous bytes   [... tile i is decoded]
//
// The id of tile i+2 is loaded while tile i is decoded, so the row loads of tile i+1 never wait on it.
// Rows are 34 * K/32 bytes, so row starts are 16-byte aligned only when K % 256 == 0 (and the table is):
// the load width W (16, 4 or 2 bytes) is picked at run time from (table address | row bytes), uniformly
// for the whole grid. Output stores are always 16 bytes (8 BF16 or 4 FP32 values per thread and
// group), consecutive threads writing consecutive 16-byte pieces: fully coalesced.
//
// All addressing is 64-bit (id * row bytes exceeds 2^32 for big tables). Everything but the kernel
// itself is portable (B12X_DEV), so tests/embedding/test_lookup_compile.cpp runs the same per-thread
// functions on the CPU (tile walk, loads, shared staging, decode and stores) against the reference.
#pragma once
#include "device/decode.cuh"
#include "device/pack16.cuh"  // byte_perm

namespace b12x {

constexpr int kEmbedThreads = 256;
constexpr int kEmbedMinBlocksPerSm = 4;  // caps registers at 64; the host launches sm_count * 4 CTAs
constexpr int kEmbedChunkBlocks = 256;   // Q8_0 blocks per tile
constexpr int kEmbedQ8Bytes = 34;        // bytes per Q8_0 block: fp16 d, int8 qs[32]
constexpr int kEmbedChunkBytes = kEmbedChunkBlocks * kEmbedQ8Bytes;  // 8704: one chunk's bytes
constexpr int kEmbedSmemBytes = kEmbedChunkBytes + 16;  // the staging buffer: decode_group reads past a chunk

namespace embed {

// Template codes (the host passes the same numbers; tests check them).
enum IdsDType : int { kIdsI32 = 0, kIdsI64 = 1 };

// ---------------------------------------------------------------------------------------------
// Tiles

struct Tile {
  long long token;  // row of out, index into ids
  long long chunk;  // chunk of the row
  int nblk;         // Q8_0 blocks in this chunk (kEmbedChunkBlocks except maybe the last chunk)
};

B12X_DEV long long chunks_per_row(long long blocks_per_row) {
  return (blocks_per_row + kEmbedChunkBlocks - 1) / kEmbedChunkBlocks;
}

B12X_DEV Tile tile_at(long long tile, long long blocks_per_row, long long chunks) {
  Tile t;
  t.token = chunks == 1 ? tile : tile / chunks;
  t.chunk = tile - t.token * chunks;
  const long long left = blocks_per_row - t.chunk * kEmbedChunkBlocks;
  t.nblk = static_cast<int>(left < kEmbedChunkBlocks ? left : kEmbedChunkBlocks);
  return t;
}

template <int kIds>
B12X_DEV long long load_id(const void* ids, long long token) {
  if constexpr (kIds == kIdsI32) {
    return static_cast<long long>(static_cast<const int*>(ids)[token]);
  } else {
    static_assert(kIds == kIdsI64, "ids must be i32 or i64");
    return static_cast<const long long*>(ids)[token];
  }
}

B12X_DEV bool id_valid(long long id, long long vocab) { return id >= 0 && id < vocab; }

// First byte of the tile's blocks in the table (id valid).
B12X_DEV const unsigned char* tile_src(const unsigned char* table, long long id, long long blocks_per_row,
                                       long long chunk) {
  return table + id * (blocks_per_row * kEmbedQ8Bytes) + chunk * kEmbedChunkBytes;
}

// First output byte of the tile: element (token, chunk * 8192) of out [T, K].
template <int kOut>
B12X_DEV unsigned char* tile_dst(unsigned char* out, long long token, long long blocks_per_row, long long chunk) {
  constexpr long long kBytes = device::OutTraits<kOut>::bytes;
  return out + (token * blocks_per_row * 32 + chunk * (kEmbedChunkBlocks * 32)) * kBytes;
}

// The widest load every row start and every chunk offset is aligned to: 16, 4 or 2 bytes.
B12X_DEV int load_width(const void* table, long long blocks_per_row) {
  const unsigned long long a = reinterpret_cast<unsigned long long>(table) |
                               static_cast<unsigned long long>(blocks_per_row * kEmbedQ8Bytes);
  return (a & 15ull) == 0 ? 16 : (a & 3ull) == 0 ? 4 : 2;
}

// ---------------------------------------------------------------------------------------------
// Global -> registers -> shared, W bytes per load

template <int W>
struct Word;
template <>
struct Word<16> {
  using type = device::U32x4;
};
template <>
struct Word<4> {
  using type = unsigned;
};
template <>
struct Word<2> {
  using type = unsigned;
};

// Read-only (non-coherent) global loads on the device; memcpy on the host.
template <int W>
B12X_DEV typename Word<W>::type ld_global(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  if constexpr (W == 16) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    return {v.x, v.y, v.z, v.w};
  } else if constexpr (W == 4) {
    return __ldg(reinterpret_cast<const unsigned*>(p));
  } else {
    return __ldg(reinterpret_cast<const unsigned short*>(p));
  }
#else
  typename Word<W>::type v{};
  __builtin_memcpy(&v, p, W);  // little-endian: a u16 lands in the low half of the unsigned
  return v;
#endif
}

template <int W>
B12X_DEV void st_shared(unsigned char* p, const typename Word<W>::type& v) {
#if defined(__CUDA_ARCH__)
  if constexpr (W == 16) {
    *reinterpret_cast<uint4*>(p) = make_uint4(v.x, v.y, v.z, v.w);
  } else if constexpr (W == 4) {
    *reinterpret_cast<unsigned*>(p) = v;
  } else {
    *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(v);
  }
#else
  __builtin_memcpy(p, &v, W);
#endif
}

// Loads per thread for a full chunk: 3 (W = 16), 9 (W = 4), 17 (W = 2).
template <int W>
constexpr int kSlots = (kEmbedChunkBytes / W + kEmbedThreads - 1) / kEmbedThreads;

template <int W>
struct ChunkRegs {
  typename Word<W>::type w[kSlots<W>];
};

// Thread tid's share of the tile's `bytes` bytes at src (W-aligned; bytes % W == 0): word
// tid + i * kEmbedThreads for slot i. All loads are issued before any is used.
template <int W>
B12X_DEV void load_chunk(const unsigned char* src, int bytes, int tid, ChunkRegs<W>& r) {
  B12X_UNROLL
  for (int i = 0; i < kSlots<W>; ++i) {
    const int off = (tid + i * kEmbedThreads) * W;
    if (off < bytes) r.w[i] = ld_global<W>(src + off);
  }
}

template <int W>
B12X_DEV void store_chunk(unsigned char* smem, int bytes, int tid, const ChunkRegs<W>& r) {
  B12X_UNROLL
  for (int i = 0; i < kSlots<W>; ++i) {
    const int off = (tid + i * kEmbedThreads) * W;
    if (off < bytes) st_shared<W>(smem + off, r.w[i]);
  }
}

// ---------------------------------------------------------------------------------------------
// Shared -> decode -> global, 16 bytes per store

template <int kOut>
constexpr int kGroupElems = 16 / device::OutTraits<kOut>::bytes;  // 8 (bf16) or 4 (f32) per store

// decode_group with aligned word loads (the decoder measured on the H200 for BF16 output: 16 ->
// ~9 instructions per element, 73 -> 81% of copy; NOTES.md 2026-12-04). The E int8 codes sit at a
// 2-byte aligned address (34-byte blocks), so they are read as the E/4 + 1 aligned words around
// them and realigned with a byte permute (up to 4 bytes past the codes are read: the staging buffer
// has kEmbedSmemBytes); each code then becomes an FP32 2^23 + (q + 128) with one more byte permute.
template <int kOut>
B12X_DEV void decode_group_words(const unsigned char* block, int part, unsigned char* dst) {
  static_assert(kOut == device::kOutBf16, "the word decoder writes bf16");
  constexpr int E = kGroupElems<kOut>;
  const unsigned d_bits = device::ld_u16(block);
  const float d = device::f16_to_f32(d_bits);
  // A finite d makes every q * d finite (|q * d| <= 128 * 65504): no NaN to re-encode like the host.
  const bool finite = (d_bits & 0x7C00u) != 0x7C00u;
  const unsigned char* qs = block + 2 + E * part;
  const unsigned misalign = static_cast<unsigned>(reinterpret_cast<unsigned long long>(qs) & 3u);  // 0 or 2
  const unsigned char* base = qs - misalign;
  const unsigned realign = misalign ? 0x5432u : 0x3210u;
  unsigned w[E / 4 + 1];
  B12X_UNROLL
  for (int i = 0; i <= E / 4; ++i) w[i] = *reinterpret_cast<const unsigned*>(base + 4 * i);
  float v[E];
  B12X_UNROLL
  for (int i = 0; i < E / 4; ++i) {
    // Codes 4i .. 4i+3 with their top bits flipped: byte q + 128.
    const unsigned q = device::byte_perm(w[i], w[i + 1], realign) ^ 0x80808080u;
    B12X_UNROLL
    for (int j = 0; j < 4; ++j) {
      // int8 q exactly: (2^23 + (q + 128)) - (2^23 + 128); the byte goes under the exponent 0x4B.
      const float biased = device::f32_from_bits(device::byte_perm(q, 0x4B000000u, 0x7440u | static_cast<unsigned>(j)));
      v[4 * i + j] = device::mul_rn(device::add_rn(biased, -8388736.0f), d);
    }
  }
  if (finite) {
    device::st_u32x4(dst, device::pack_bf16x2_not_nan(v[0], v[1]), device::pack_bf16x2_not_nan(v[2], v[3]),
                     device::pack_bf16x2_not_nan(v[4], v[5]), device::pack_bf16x2_not_nan(v[6], v[7]));
  } else {
    device::st_u32x4(dst, device::pack_bf16x2(v[0], v[1]), device::pack_bf16x2(v[2], v[3]),
                     device::pack_bf16x2(v[4], v[5]), device::pack_bf16x2(v[6], v[7]));
  }
}

// decode_group with 16-bit loads of the codes and the NaN-aware pack for every element: fewer live
// registers. F32 output, and BF16 on sm_120a, keep it: there the word decoder spills at the
// 64-register cap (CI's compile check, NVRTC, 2026-12-04).
template <int kOut>
B12X_DEV void decode_group_u16(const unsigned char* block, int part, unsigned char* dst) {
  constexpr int E = kGroupElems<kOut>;
  const float d = device::f16_to_f32(device::ld_u16(block));
  const unsigned char* qs = block + 2 + E * part;
  float v[E];
  B12X_UNROLL
  for (int i = 0; i < E / 2; ++i) {
    const unsigned pair = device::ld_u16(qs + 2 * i);
    B12X_UNROLL
    for (int h = 0; h < 2; ++h) {
      // int8 q exactly: (2^23 + (q + 128)) - (2^23 + 128); q + 128 is the byte with its top bit flipped.
      const unsigned biased = ((pair >> (8 * h)) & 0xFFu) ^ 0x80u;
      const float q = device::add_rn(device::f32_from_bits(0x4B000000u | biased), -8388736.0f);
      v[2 * i + h] = device::mul_rn(q, d);
    }
  }
  if constexpr (kOut == device::kOutF32) {
    device::st_u32x4(dst, device::f32_out_bits(v[0]), device::f32_out_bits(v[1]), device::f32_out_bits(v[2]),
                     device::f32_out_bits(v[3]));
  } else {
    device::st_u32x4(dst, device::pack_bf16x2(v[0], v[1]), device::pack_bf16x2(v[2], v[3]),
                     device::pack_bf16x2(v[4], v[5]), device::pack_bf16x2(v[6], v[7]));
  }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr bool kEmbedWordDecoder = false;  // sm_120a: decode_group_words spills (see decode_group_u16)
#else
constexpr bool kEmbedWordDecoder = true;
#endif

// Elements E*part .. E*part+E-1 of the Q8_0 block at `block` (2-byte aligned), decoded exactly like
// device::decode_q8_0_x32 (int8 * fp16(d), exact) and written as one 16-byte store at dst (16-byte
// aligned) rounded like store_f32 on the host. Both decoders give the same bytes (tests/embedding).
template <int kOut>
B12X_DEV void decode_group(const unsigned char* block, int part, unsigned char* dst) {
  static_assert(kOut == device::kOutBf16 || kOut == device::kOutF32, "embedding writes bf16 or f32");
  if constexpr (kOut == device::kOutBf16 && kEmbedWordDecoder) decode_group_words<kOut>(block, part, dst);
  else decode_group_u16<kOut>(block, part, dst);
}

// The out-of-range row: quiet NaN in every element.
template <int kOut>
B12X_DEV void nan_group(unsigned char* dst) {
  constexpr unsigned w = kOut == device::kOutF32 ? 0x7FC00000u : 0x7FC07FC0u;
  device::st_u32x4(dst, w, w, w, w);
}

// Groups (16-byte stores) per thread for a full chunk: 4 (bf16) or 8 (f32).
template <int kOut>
constexpr int kGroupIters = kEmbedChunkBlocks * (32 / kGroupElems<kOut>) / kEmbedThreads;

// Thread tid's groups of the tile: group g = tid + i * kEmbedThreads covers elements E*g .. E*g+E-1
// of the chunk (block g / (32/E), part g % (32/E)). smem holds the chunk's nblk blocks when valid.
template <int kOut>
B12X_DEV void write_chunk(const unsigned char* smem, int nblk, bool valid, unsigned char* dst, int tid) {
  constexpr int kParts = 32 / kGroupElems<kOut>;
  const int groups = nblk * kParts;
  B12X_UNROLL
  for (int i = 0; i < kGroupIters<kOut>; ++i) {
    const int g = tid + i * kEmbedThreads;
    if (g < groups) {
      if (valid)
        decode_group<kOut>(smem + (g / kParts) * kEmbedQ8Bytes, g % kParts, dst + 16 * g);
      else
        nan_group<kOut>(dst + 16 * g);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The tile walk of one CTA (device only: shared memory and barriers)

#if defined(__CUDACC__)
template <int W, int kIds, int kOut>
__device__ __forceinline__ void lookup_tiles(unsigned char* smem, const unsigned char* __restrict__ table,
                                             const void* __restrict__ ids, unsigned char* __restrict__ out,
                                             unsigned char* __restrict__ bad, long long vocab, long long tokens,
                                             long long blocks_per_row) {
  const int tid = static_cast<int>(threadIdx.x);
  const long long chunks = chunks_per_row(blocks_per_row);
  const long long tiles = tokens * chunks;
  const long long stride = gridDim.x;
  long long tile = blockIdx.x;
  if (tile >= tiles) return;  // uniform per CTA

  ChunkRegs<W> regs{};
  Tile cur = tile_at(tile, blocks_per_row, chunks);
  long long cur_id = load_id<kIds>(ids, cur.token);
  if (id_valid(cur_id, vocab))
    load_chunk<W>(tile_src(table, cur_id, blocks_per_row, cur.chunk), cur.nblk * kEmbedQ8Bytes, tid, regs);
  long long next = tile + stride;
  long long next_id = next < tiles ? load_id<kIds>(ids, tile_at(next, blocks_per_row, chunks).token) : 0;

  while (true) {
    // Everything below is uniform per CTA (cur, cur_id, next are the same in every thread).
    const bool valid = id_valid(cur_id, vocab);
    __syncthreads();  // every thread is done reading the previous tile from smem
    if (valid) store_chunk<W>(smem, cur.nblk * kEmbedQ8Bytes, tid, regs);
    __syncthreads();  // the tile is in smem

    // Prefetch: the next tile's bytes (with the id loaded one iteration ago) and the id after it.
    Tile nxt{0, 0, 0};
    long long after_id = 0;
    if (next < tiles) {
      nxt = tile_at(next, blocks_per_row, chunks);
      if (id_valid(next_id, vocab))
        load_chunk<W>(tile_src(table, next_id, blocks_per_row, nxt.chunk), nxt.nblk * kEmbedQ8Bytes, tid, regs);
      const long long after = next + stride;
      if (after < tiles) after_id = load_id<kIds>(ids, tile_at(after, blocks_per_row, chunks).token);
    }

    write_chunk<kOut>(smem, cur.nblk, valid, tile_dst<kOut>(out, cur.token, blocks_per_row, cur.chunk), tid);
    if (tid == 0 && cur.chunk == 0) bad[cur.token] = valid ? 0 : 1;

    if (next >= tiles) break;
    cur = nxt;
    cur_id = next_id;
    next_id = after_id;
    next += stride;
  }
}
#endif

}  // namespace embed

#if defined(__CUDACC__)
// kIds: embed::IdsDType; kOut: device::OutDType (bf16 or f32).
// table: u8 [V, blocks_per_row, 34], 2-byte aligned; ids: [tokens] i32 / i64; out: [tokens, 32 *
// blocks_per_row] of kOut, 16-byte aligned; bad: u8 [tokens] (1 where the id is out of range, else 0).
template <int kIds, int kOut>
__global__ void __launch_bounds__(kEmbedThreads, kEmbedMinBlocksPerSm)
    embedding_q8_0_kernel(const unsigned char* __restrict__ table, const void* __restrict__ ids,
                          unsigned char* __restrict__ out, unsigned char* __restrict__ bad, long long vocab,
                          long long tokens, long long blocks_per_row) {
  __shared__ uint4 smem_words[kEmbedSmemBytes / 16];  // uint4: 16-byte aligned for the 16-byte stores
  unsigned char* smem = reinterpret_cast<unsigned char*>(smem_words);
  const int w = embed::load_width(table, blocks_per_row);  // the same in every thread of the grid
  if (w == 16)
    embed::lookup_tiles<16, kIds, kOut>(smem, table, ids, out, bad, vocab, tokens, blocks_per_row);
  else if (w == 4)
    embed::lookup_tiles<4, kIds, kOut>(smem, table, ids, out, bad, vocab, tokens, blocks_per_row);
  else
    embed::lookup_tiles<2, kIds, kOut>(smem, table, ids, out, bad, vocab, tokens, blocks_per_row);
}
#endif

}  // namespace b12x
