// embedding.lookup without a GPU:
//  * EmbeddingCompile: the kernel specs cover every ids x output dtype (NVRTC compiles each
//    configuration once, in tests/runtime/test_jit.cpp: Jit.EveryRegisteredKernelCompiles) and the
//    kernel's constants match the host; plan/bind reject bad arguments (naming them) before touching
//    CUDA.
//  * EmbeddingHost: the kernel's per-thread pieces (src/embedding/kernels/lookup.cuh is portable apart
//    from the __global__ function) run on the CPU - tile walk, load width, global -> registers ->
//    shared staging, decode and 16-byte stores, NaN rows and flags - and are compared with
//    reference_embedding_q8_0 bit for bit; the group decoder is compared with the dequantize path
//    (device::decode_q8_0_x32 + store_run32, checked on the GPU) for every FP16 scale.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/embedding/lookup.h"
#include "b12x/runtime/jit.h"
#include "embedding/kernels/lookup.cuh"
#include "support/errors.h"
#include "support/fake_device.h"
#include "support/weights.h"

namespace b12x {
namespace {

using namespace b12x::test;

namespace dev = b12x::device;
namespace emb = b12x::embed;

// ---------------------------------------------------------------------------------------------
// EmbeddingCompile

TEST(EmbeddingCompile, SpecsCoverIdsAndOutDtypes) {
  const auto specs = embedding::all_kernel_specs();
  ASSERT_EQ(specs.size(), 4u);
  std::vector<std::string> names;
  for (const auto& s : specs) {
    EXPECT_EQ(s.kernel, "embedding.lookup");
    EXPECT_EQ(s.source, "embedding/kernels/lookup.cuh");
    EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a", "sm_120a"}));
    EXPECT_EQ(s.options, (std::vector<std::string>{"--ftz=false", "--fmad=false"}));
    EXPECT_GT(s.max_registers, 0);
    for (const auto& n : names) EXPECT_NE(n, s.name_expression);
    names.push_back(s.name_expression);
  }
  for (DType ids : {DType::i32, DType::i64})
    for (DType out : {DType::bf16, DType::f32}) {
      const KernelSpec s = embedding::kernel_spec({32000, 4096, 64, ids, out});
      EXPECT_EQ(s.describe(), "embedding.lookup{format=q8_0, ids=" + std::string(dtype_name(ids)) +
                                  ", out=" + std::string(dtype_name(out)) + "}");
      const int ids_code = ids == DType::i32 ? emb::kIdsI32 : emb::kIdsI64;
      const int out_code = out == DType::bf16 ? dev::kOutBf16 : dev::kOutF32;
      EXPECT_EQ(s.name_expression,
                "b12x::embedding_q8_0_kernel<" + std::to_string(ids_code) + ", " + std::to_string(out_code) + ">");
      // The spec depends on the dtypes only: one kernel serves every table shape.
      EXPECT_EQ(embedding::kernel_spec({7, 32, 1, ids, out}).name_expression, s.name_expression);
    }
}

TEST(EmbeddingCompile, KernelConstantsMatchTheHost) {
  static_assert(emb::kIdsI32 == 0 && emb::kIdsI64 == 1);
  static_assert(dev::kOutBf16 == 0 && dev::kOutF32 == 2);
  static_assert(kEmbedQ8Bytes == kQ8_0Bytes);
  static_assert(kEmbedThreads == 256 && kEmbedChunkBlocks == 256 && kEmbedMinBlocksPerSm == 4);
  static_assert(kEmbedChunkBytes % 16 == 0);  // chunk offsets keep 16-byte row alignment
  static_assert(emb::kSlots<16> == 3 && emb::kSlots<4> == 9 && emb::kSlots<2> == 17);
  static_assert(emb::kGroupIters<dev::kOutBf16> == 4 && emb::kGroupIters<dev::kOutF32> == 8);
}

TEST(EmbeddingCompile, PlanRejectsBadCapsWithoutAGpu) {
  using embedding::Caps;
  expect_bad_argument([] { embedding::plan(Caps{100, 48, 8, DType::i32, DType::bf16}); }, "k");  // not 32-aligned
  expect_bad_argument([] { embedding::plan(Caps{100, 16, 8, DType::i32, DType::bf16}); }, "k");
  expect_bad_argument([] { embedding::plan(Caps{100, 0, 8, DType::i32, DType::bf16}); }, "k");
  expect_bad_argument([] { embedding::plan(Caps{100, -32, 8, DType::i32, DType::bf16}); }, "k");
  expect_bad_argument([] { embedding::plan(Caps{0, 64, 8, DType::i32, DType::bf16}); }, "vocab");
  expect_bad_argument([] { embedding::plan(Caps{-5, 64, 8, DType::i32, DType::bf16}); }, "vocab");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, 0, DType::i32, DType::bf16}); }, "max_tokens");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, int64_t{1} << 31, DType::i64, DType::bf16}); },
                      "max_tokens");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, 8, DType::f32, DType::bf16}); }, "ids_dtype");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, 8, DType::u8, DType::bf16}); }, "ids_dtype");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, 8, DType::i32, DType::f16}); }, "out_dtype");
  expect_bad_argument([] { embedding::plan(Caps{100, 64, 8, DType::i64, DType::i32}); }, "out_dtype");
  expect_bad_argument([] { embedding::kernel_spec(Caps{100, 64, 8, DType::i8, DType::bf16}); }, "ids_dtype");
  expect_bad_argument([] { embedding::kernel_spec(Caps{100, 64, 8, DType::i32, DType::f64}); }, "out_dtype");
  expect_bad_argument([] { embedding::plan(Caps{int64_t{1} << 40, int64_t{1} << 30, 8, DType::i32, DType::bf16}); },
                      "vocab");
  expect_bad_argument([] { embedding::plan(Caps{100, int64_t{1} << 35, int64_t{1} << 30, DType::i32, DType::f32}); },
                      "max_tokens");
  // Valid caps pass validation (then resolving needs a GPU, which may or may not be here).
  for (const Caps& ok : {Caps{32000, 4096, 8192, DType::i32, DType::bf16}, Caps{1, 32, 1, DType::i64, DType::f32},
                         Caps{70000, 32768, 2048, DType::i64, DType::bf16}}) {
    try {
      embedding::plan(ok);
    } catch (const BadArgument& e) {
      ADD_FAILURE() << "vocab " << ok.vocab << " k " << ok.k << ": " << e.what();
    } catch (const Error&) {
      // no CUDA device: expected on CPU-only machines
    }
  }
}

// A plan as embedding::plan would make it, with a stand-in kernel: bind makes no CUDA call.
struct FakePlan {
  embedding::Plan plan;
  explicit FakePlan(embedding::Caps caps) {
    plan.caps = caps;
    plan.kernel = &fake_kernel();
    plan.block = dim3(256);
    plan.max_ctas = 528;
    plan.scratch.add("status", static_cast<size_t>(caps.max_tokens));
  }
};

// Device-looking tensors and scratch (never dereferenced: bind only checks them): table, ids and out
// at fake slots 0, 1 and 2, scratch at slot 4.
struct FakeDevice {
  TensorView table, ids, out;
  Scratch scratch;
  FakeDevice(int64_t vocab, int64_t k, int64_t tokens, DType ids_dtype, DType out_dtype)
      : table(fake_device_tensor(0, DType::u8, {vocab, k / 32, 34})),
        ids(fake_device_tensor(1, ids_dtype, {tokens})),
        out(fake_device_tensor(2, out_dtype, {tokens, k})),
        scratch{fake_device_ptr(4), 4096, Device::cuda(0)} {}
};

TEST(EmbeddingCompile, BindValidatesWithoutAGpu) {
  const embedding::Caps caps{1000, 256, 16, DType::i32, DType::bf16};
  FakePlan fp(caps);
  const embedding::Plan& plan = fp.plan;
  auto fresh = [] { return FakeDevice(1000, 256, 16, DType::i32, DType::bf16); };
  {
    FakeDevice d = fresh();
    const embedding::Binding b = embedding::bind(plan, d.scratch, d.table, d.ids, d.out);
    EXPECT_EQ(b.plan, &plan);
    EXPECT_EQ(b.table.data, d.table.data);
    EXPECT_EQ(b.ids.data, d.ids.data);
    EXPECT_EQ(b.out.data, d.out.data);
    EXPECT_EQ(b.status.data, d.scratch.data);  // region "status" at offset 0
    EXPECT_EQ(b.status.dtype, DType::u8);
    EXPECT_EQ(b.status.shape_vec(), (std::vector<int64_t>{16}));
    EXPECT_EQ(plan.scratch_bytes(), 16u);
  }
  {  // fewer tokens than max_tokens, and none at all
    FakeDevice d = FakeDevice(1000, 256, 3, DType::i32, DType::bf16);
    EXPECT_EQ(embedding::bind(plan, d.scratch, d.table, d.ids, d.out).status.numel(), 3);
    FakeDevice e = FakeDevice(1000, 256, 0, DType::i32, DType::bf16);
    e.ids.data = nullptr;
    e.out.data = nullptr;
    EXPECT_EQ(embedding::bind(plan, e.scratch, e.table, e.ids, e.out).status.numel(), 0);
  }
  {  // plan without a kernel
    FakeDevice d = fresh();
    embedding::Plan empty;
    empty.caps = caps;
    expect_bad_argument([&] { embedding::bind(empty, d.scratch, d.table, d.ids, d.out); }, "plan");
  }
  {  // table: rows, blocks per row, payload, dtype, host, alignment, missing
    FakeDevice d = fresh();
    d.table.shape[0] = 999;
    expect_bad_argument([&] { embedding::bind(plan, d.scratch, d.table, d.ids, d.out); }, "table");
    FakeDevice e = fresh();
    e.table.shape[1] = 9;
    expect_bad_argument([&] { embedding::bind(plan, e.scratch, e.table, e.ids, e.out); }, "table");
    FakeDevice g = fresh();
    g.table = TensorView(g.table.data, DType::u8, {1000, 8, 33}, Device::cuda(0));  // wrong payload
    expect_bad_argument([&] { embedding::bind(plan, g.scratch, g.table, g.ids, g.out); }, "table");
    FakeDevice h = fresh();
    h.table = TensorView(h.table.data, DType::u8, {1000, 8 * 34}, Device::cuda(0));  // 2-D
    expect_bad_argument([&] { embedding::bind(plan, h.scratch, h.table, h.ids, h.out); }, "table");
    FakeDevice m = fresh();
    m.table.dtype = DType::i8;
    expect_bad_argument([&] { embedding::bind(plan, m.scratch, m.table, m.ids, m.out); }, "table");
    FakeDevice n = fresh();
    n.table.device = Device::host();
    expect_bad_argument([&] { embedding::bind(plan, n.scratch, n.table, n.ids, n.out); }, "table",
                        {"must be a CUDA device tensor, got ", "host"});
    FakeDevice o = fresh();
    o.table.data = static_cast<char*>(o.table.data) + 1;
    expect_bad_argument([&] { embedding::bind(plan, o.scratch, o.table, o.ids, o.out); }, "table");
    o.table.data = static_cast<char*>(o.table.data) + 1;  // 2-byte aligned is enough
    EXPECT_NO_THROW(embedding::bind(plan, o.scratch, o.table, o.ids, o.out));
    FakeDevice q = fresh();
    q.table.data = nullptr;
    expect_bad_argument([&] { embedding::bind(plan, q.scratch, q.table, q.ids, q.out); }, "table");
  }
  {  // ids: dtype other than planned, 2-D, T > max_tokens, host, other device, alignment, missing
    FakeDevice d = FakeDevice(1000, 256, 16, DType::i64, DType::bf16);
    expect_bad_argument([&] { embedding::bind(plan, d.scratch, d.table, d.ids, d.out); }, "ids");
    FakeDevice e = fresh();
    e.ids = TensorView(e.ids.data, DType::i32, {4, 4}, Device::cuda(0));
    expect_bad_argument([&] { embedding::bind(plan, e.scratch, e.table, e.ids, e.out); }, "ids");
    FakeDevice g = FakeDevice(1000, 256, 17, DType::i32, DType::bf16);
    expect_bad_argument([&] { embedding::bind(plan, g.scratch, g.table, g.ids, g.out); }, "ids");
    FakeDevice h = fresh();
    h.ids.device = Device::host();
    expect_bad_argument([&] { embedding::bind(plan, h.scratch, h.table, h.ids, h.out); }, "ids",
                        {"must be a CUDA device tensor, got ", "host"});
    FakeDevice m = fresh();
    m.ids.device = Device::cuda(1);
    expect_bad_argument([&] { embedding::bind(plan, m.scratch, m.table, m.ids, m.out); }, "ids",
                        {"must be on the table's device, got ", " with table "});
    FakeDevice n = fresh();
    n.ids.data = static_cast<char*>(n.ids.data) + 2;
    expect_bad_argument([&] { embedding::bind(plan, n.scratch, n.table, n.ids, n.out); }, "ids");
    FakeDevice o = fresh();
    o.ids.data = nullptr;
    expect_bad_argument([&] { embedding::bind(plan, o.scratch, o.table, o.ids, o.out); }, "ids");
    FakePlan fp64({1000, 256, 16, DType::i64, DType::bf16});
    FakeDevice q = FakeDevice(1000, 256, 16, DType::i64, DType::bf16);
    q.ids.data = static_cast<char*>(q.ids.data) + 4;  // i64 needs 8
    expect_bad_argument([&] { embedding::bind(fp64.plan, q.scratch, q.table, q.ids, q.out); }, "ids");
    q.ids.data = static_cast<char*>(q.ids.data) + 4;
    EXPECT_NO_THROW(embedding::bind(fp64.plan, q.scratch, q.table, q.ids, q.out));
  }
  {  // out: dtype, shape, host, other device, alignment, missing
    FakeDevice d = FakeDevice(1000, 256, 16, DType::i32, DType::f32);
    expect_bad_argument([&] { embedding::bind(plan, d.scratch, d.table, d.ids, d.out); }, "out");
    FakeDevice e = fresh();
    e.out.shape[0] = 15;
    expect_bad_argument([&] { embedding::bind(plan, e.scratch, e.table, e.ids, e.out); }, "out");
    FakeDevice g = fresh();
    g.out.shape[1] = 288;
    expect_bad_argument([&] { embedding::bind(plan, g.scratch, g.table, g.ids, g.out); }, "out");
    FakeDevice h = fresh();
    h.out.device = Device::host();
    expect_bad_argument([&] { embedding::bind(plan, h.scratch, h.table, h.ids, h.out); }, "out");
    FakeDevice m = fresh();
    m.out.device = Device::cuda(1);
    expect_bad_argument([&] { embedding::bind(plan, m.scratch, m.table, m.ids, m.out); }, "out",
                        {"must be on the table's device, got ", " with table "});
    FakeDevice n = fresh();
    n.out.data = static_cast<char*>(n.out.data) + 2;
    expect_bad_argument([&] { embedding::bind(plan, n.scratch, n.table, n.ids, n.out); }, "out");
    FakeDevice o = fresh();
    o.out.data = nullptr;
    expect_bad_argument([&] { embedding::bind(plan, o.scratch, o.table, o.ids, o.out); }, "out");
  }
  {  // scratch: missing, too small, misaligned, host, other device
    FakeDevice d = fresh();
    d.scratch.data = nullptr;
    expect_bad_argument([&] { embedding::bind(plan, d.scratch, d.table, d.ids, d.out); }, "scratch");
    FakeDevice e = fresh();
    e.scratch.bytes = 15;
    expect_bad_argument([&] { embedding::bind(plan, e.scratch, e.table, e.ids, e.out); }, "scratch");
    FakeDevice g = fresh();
    g.scratch.data = static_cast<char*>(g.scratch.data) + 256;
    expect_bad_argument([&] { embedding::bind(plan, g.scratch, g.table, g.ids, g.out); }, "scratch");
    FakeDevice h = fresh();
    h.scratch.device = Device::host();
    expect_bad_argument([&] { embedding::bind(plan, h.scratch, h.table, h.ids, h.out); }, "scratch");
    FakeDevice m = fresh();
    m.scratch.device = Device::cuda(1);
    expect_bad_argument([&] { embedding::bind(plan, m.scratch, m.table, m.ids, m.out); }, "scratch");
  }
}

// ---------------------------------------------------------------------------------------------
// EmbeddingHost: the kernel's per-thread code on the CPU

template <class Fn>
void with_out(DType d, Fn&& fn) {
  if (d == DType::bf16) return fn(std::integral_constant<int, dev::kOutBf16>{});
  return fn(std::integral_constant<int, dev::kOutF32>{});
}

// 16-byte aligned host bytes at a chosen offset from a 16-byte boundary.
struct AlignedBytes {
  std::vector<uint8_t> storage;
  uint8_t* p = nullptr;
  AlignedBytes(size_t n, size_t offset, uint8_t fill) : storage(n + offset + 16, fill) {
    p = storage.data() + (16 - reinterpret_cast<uintptr_t>(storage.data()) % 16) % 16 + offset;
  }
};

// What the CTAs of embedding_q8_0_kernel compute, phase by phase: CTA c walks tiles c, c + grid, ...;
// per tile every thread loads its words (load_chunk), then every thread stages them (store_chunk),
// then every thread decodes and stores its groups (write_chunk); thread 0 of a row's first chunk
// writes the flag. Returns the load width the kernel would pick.
template <int W, int kIds, int kOut>
void emulate_tiles(const uint8_t* table, const void* ids, uint8_t* out, uint8_t* bad, int64_t vocab, int64_t tokens,
                   int64_t blocks_per_row, int64_t grid) {
  const long long chunks = emb::chunks_per_row(blocks_per_row);
  const long long tiles = tokens * chunks;
  alignas(16) uint8_t smem[kEmbedSmemBytes];
  std::vector<emb::ChunkRegs<W>> regs(kEmbedThreads);
  for (int64_t cta = 0; cta < grid; ++cta)
    for (long long tile = cta; tile < tiles; tile += grid) {
      const emb::Tile t = emb::tile_at(tile, blocks_per_row, chunks);
      const long long id = emb::load_id<kIds>(ids, t.token);
      const bool valid = emb::id_valid(id, vocab);
      std::memset(smem, 0xCD, sizeof smem);  // stale bytes must never reach the output
      if (valid) {
        for (int tid = 0; tid < kEmbedThreads; ++tid)
          emb::load_chunk<W>(emb::tile_src(table, id, blocks_per_row, t.chunk), t.nblk * kEmbedQ8Bytes, tid, regs[tid]);
        for (int tid = 0; tid < kEmbedThreads; ++tid)
          emb::store_chunk<W>(smem, t.nblk * kEmbedQ8Bytes, tid, regs[tid]);
      }
      for (int tid = 0; tid < kEmbedThreads; ++tid)
        emb::write_chunk<kOut>(smem, t.nblk, valid, emb::tile_dst<kOut>(out, t.token, blocks_per_row, t.chunk), tid);
      if (t.chunk == 0) bad[t.token] = valid ? 0 : 1;
    }
}

int emulate_kernel(const uint8_t* table, const TensorView& ids, uint8_t* out, uint8_t* bad, int64_t vocab, int64_t k,
                   DType out_dtype, int64_t grid) {
  const int64_t bpr = k / 32;
  const int w = emb::load_width(table, bpr);
  auto go = [&](auto wc, auto ic, auto oc) {
    emulate_tiles<decltype(wc)::value, decltype(ic)::value, decltype(oc)::value>(table, ids.data, out, bad, vocab,
                                                                                 ids.size(0), bpr, grid);
  };
  with_out(out_dtype, [&](auto oc) {
    auto by_ids = [&](auto wc) {
      if (ids.dtype == DType::i32) go(wc, std::integral_constant<int, emb::kIdsI32>{}, oc);
      else go(wc, std::integral_constant<int, emb::kIdsI64>{}, oc);
    };
    if (w == 16) by_ids(std::integral_constant<int, 16>{});
    else if (w == 4) by_ids(std::integral_constant<int, 4>{});
    else by_ids(std::integral_constant<int, 2>{});
  });
  return w;
}

// Random ids in [0, vocab) with the first and last rows and repeats; `bad` positions get ids outside.
template <class I>
std::vector<I> make_ids(std::mt19937_64& rng, int64_t vocab, int64_t T, const std::vector<int64_t>& bad_pos,
                        const std::vector<I>& bad_values) {
  std::vector<I> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (auto& id : ids) id = static_cast<I>(pick(rng));
  if (T > 0) ids[0] = 0;
  if (T > 1) ids[static_cast<size_t>(T - 1)] = static_cast<I>(vocab - 1);
  if (T > 3) ids[2] = ids[1];  // a repeat
  for (size_t i = 0; i < bad_pos.size(); ++i) ids[static_cast<size_t>(bad_pos[i])] = bad_values[i % bad_values.size()];
  return ids;
}

struct HostCase {
  int64_t vocab, k, T;
  size_t table_offset;  // from a 16-byte boundary: picks the load width with K
  int want_width;
};

template <class I>
void check_emulation(const HostCase& c, DType ids_dtype, DType out_dtype, int64_t grid, std::mt19937_64& rng) {
  const int64_t bpr = c.k / 32;
  const std::string what = "V=" + std::to_string(c.vocab) + " K=" + std::to_string(c.k) + " T=" + std::to_string(c.T) +
                           " offset=" + std::to_string(c.table_offset) + " ids=" + std::string(dtype_name(ids_dtype)) +
                           " out=" + std::string(dtype_name(out_dtype)) + " grid=" + std::to_string(grid);
  SCOPED_TRACE(what);
  const size_t table_bytes = static_cast<size_t>(c.vocab * bpr * 34);
  AlignedBytes table(table_bytes, c.table_offset, 0);
  HostTensor blocks(DType::u8, {c.vocab, bpr, 34});
  ggml_random_blocks(Format::q8_0, blocks.view(), rng());
  std::memcpy(table.p, blocks.ptr<uint8_t>(), table_bytes);

  // Out-of-range ids at a few positions (none for T < 4).
  std::vector<int64_t> bad_pos;
  if (c.T >= 4) bad_pos = {c.T / 2, c.T - 2, 1};
  const std::vector<I> bad_values = {static_cast<I>(-1), static_cast<I>(c.vocab), std::numeric_limits<I>::min(),
                                     std::numeric_limits<I>::max()};
  std::vector<I> ids = make_ids<I>(rng, c.vocab, c.T, bad_pos, bad_values);
  const TensorView ids_view(ids.data(), ids_dtype, {c.T});

  const size_t esize = dtype_size(out_dtype);
  const size_t out_bytes = static_cast<size_t>(c.T * c.k) * esize;
  AlignedBytes out(out_bytes, 0, 0xFF);  // NaN poison
  std::vector<uint8_t> flags(static_cast<size_t>(c.T), 0xEE);
  const int w = emulate_kernel(table.p, ids_view, out.p, flags.data(), c.vocab, c.k, out_dtype, grid);
  EXPECT_EQ(w, c.want_width);

  // Expected: the reference with the bad ids replaced by 0 (those rows are checked separately).
  std::vector<I> fixed = ids;
  std::vector<bool> is_bad(static_cast<size_t>(c.T), false);
  for (int64_t p : bad_pos) {
    fixed[static_cast<size_t>(p)] = 0;
    is_bad[static_cast<size_t>(p)] = true;
  }
  HostTensor ref(out_dtype, {c.T, c.k});
  reference_embedding_q8_0(blocks.view(), TensorView(fixed.data(), ids_dtype, {c.T}), ref.view());
  const size_t row_bytes = static_cast<size_t>(c.k) * esize;
  std::vector<uint8_t> nan_row(row_bytes);
  for (size_t i = 0; i < row_bytes; i += esize) {
    const uint32_t nan = out_dtype == DType::f32 ? 0x7FC00000u : 0x7FC0u;
    std::memcpy(nan_row.data() + i, &nan, esize);
  }
  int64_t bad_rows = 0;
  for (int64_t t = 0; t < c.T; ++t) {
    const uint8_t* got = out.p + t * row_bytes;
    const uint8_t* want = is_bad[static_cast<size_t>(t)] ? nan_row.data() : ref.ptr<uint8_t>() + t * row_bytes;
    if (std::memcmp(got, want, row_bytes) != 0 && bad_rows++ < 4) ADD_FAILURE() << "row " << t << " differs";
    EXPECT_EQ(flags[static_cast<size_t>(t)], is_bad[static_cast<size_t>(t)] ? 1 : 0) << "flag " << t;
  }
  EXPECT_EQ(bad_rows, 0);
}

TEST(EmbeddingHost, KernelPathMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::vector<HostCase> cases = {
      {7, 32, 1, 0, 2},         // one block per row: rows 2-byte aligned
      {9, 64, 6, 0, 4},         // even blocks per row: 4-byte loads
      {9, 64, 5, 2, 2},         // table at +2: 2-byte loads
      {11, 96, 9, 0, 2},        // odd blocks per row
      {13, 256, 12, 0, 16},     // 8 blocks per row: 16-byte loads
      {13, 256, 12, 4, 4},      // table at +4
      {13, 256, 12, 8, 4},      // table at +8
      {5, 8224, 6, 0, 2},       // 257 blocks: a full chunk and a 1-block chunk
      {5, 8448, 7, 0, 16},      // 264 blocks: a full chunk and an 8-block chunk
      {4, 16384, 5, 0, 16},     // two full chunks
      {3, 8192 * 3 + 64, 4, 0, 4},  // three full chunks and a 2-block chunk
  };
  for (const HostCase& c : cases)
    for (DType out : {DType::bf16, DType::f32}) {
      check_emulation<int32_t>(c, DType::i32, out, 3, rng);
      check_emulation<int64_t>(c, DType::i64, out, 1000, rng);  // more CTAs than tiles
    }
}

// decode_group equals the dequantize path (decode_q8_0_x32 + store_run32, GPU-verified) for every
// FP16 block scale, Inf and NaN included, and random int8 values.
TEST(EmbeddingHost, GroupDecoderMatchesDequantizeForEveryScale) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  alignas(16) uint8_t block[36];
  for (uint32_t d = 0; d < 65536; ++d) {
    block[0] = static_cast<uint8_t>(d);
    block[1] = static_cast<uint8_t>(d >> 8);
    for (int j = 2; j < 34; ++j) block[j] = static_cast<uint8_t>(rng());
    float v[32];
    dev::decode_q8_0_x32(block, v);
    for (DType out : {DType::bf16, DType::f32})
      with_out(out, [&](auto oc) {
        constexpr int kOut = decltype(oc)::value;
        alignas(16) uint8_t want[128], got[128];
        dev::store_run32<kOut>(want, v);
        constexpr int E = emb::kGroupElems<kOut>;
        for (int part = 0; part < 32 / E; ++part) emb::decode_group_u16<kOut>(block, part, got + 16 * part);
        ASSERT_EQ(std::memcmp(want, got, 32 * dtype_size(out)), 0) << "u16 decoder, d = 0x" << std::hex << d
                                                                   << " out " << dtype_name(out);
        if constexpr (kOut == dev::kOutBf16) {  // the word decoder (BF16 on sm_90a), from both alignments
          alignas(16) uint8_t shifted[40];
          for (int at : {0, 2}) {
            std::memcpy(shifted + at, block, 34);
            for (int part = 0; part < 32 / E; ++part) emb::decode_group_words<kOut>(shifted + at, part, got + 16 * part);
            ASSERT_EQ(std::memcmp(want, got, 64), 0) << "word decoder at offset " << at << ", d = 0x" << std::hex << d;
          }
        }
      });
  }
}

TEST(EmbeddingHost, TileWalkCoversEveryTileOnce) {
  for (int64_t bpr : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{1024}, int64_t{1025}}) {
    const long long chunks = emb::chunks_per_row(bpr);
    EXPECT_EQ(chunks, (bpr + 255) / 256);
    int64_t blocks = 0;
    for (long long tile = 0; tile < 3 * chunks; ++tile) {
      const emb::Tile t = emb::tile_at(tile, bpr, chunks);
      EXPECT_EQ(t.token, tile / chunks);
      EXPECT_EQ(t.chunk, tile % chunks);
      EXPECT_GT(t.nblk, 0);
      EXPECT_LE(t.nblk, kEmbedChunkBlocks);
      blocks += t.nblk;
    }
    EXPECT_EQ(blocks, 3 * bpr);
  }
  // 64-bit addressing: a table of 130000 rows of 32768 elements spans 4.5 GB.
  static uint8_t anchor[16];
  const uint8_t* base = anchor;
  const long long bpr = 1024;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(emb::tile_src(base, 129999, bpr, 3)) - reinterpret_cast<uintptr_t>(base),
            129999ull * 34816 + 3 * 8704);
  uint8_t* obase = anchor;
  auto dist = [&](const uint8_t* p) { return reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(obase); };
  EXPECT_EQ(dist(emb::tile_dst<dev::kOutBf16>(obase, 70000, bpr, 2)), (70000ull * 32768 + 2 * 8192) * 2);
  EXPECT_EQ(dist(emb::tile_dst<dev::kOutF32>(obase, 70000, bpr, 2)), (70000ull * 32768 + 2 * 8192) * 4);
}

}  // namespace
}  // namespace b12x
