// embedding.lookup on a real GPU (label `gpu`, run on the H200): random Q8_0 tables (ggml_random_blocks,
// finite scales) and random ids (i32 and i64, repeats, first and last rows) against
// reference_embedding_q8_0 on the host, bit for bit; outputs poisoned with 0xFF (NaN) first, so an
// unwritten element fails. Also: every load width (table alignment x K), several chunks per row, a
// table beyond 4 GiB, out-of-range ids (NaN rows exactly there, status reports the first, flags
// reset themselves on the next run), T = 0, host tensors rejected by bind, and a CUDA graph replaying
// changed ids without compiling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/embedding/lookup.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"
#include "support/device.h"
#include "support/errors.h"
#include "support/weights.h"

namespace b12x {
namespace {

using namespace b12x::test;

// ---------------------------------------------------------------------------------------------
// Test data and the host oracle

HostTensor random_table(int64_t vocab, int64_t k, std::mt19937_64& rng) {
  HostTensor t(DType::u8, {vocab, k / 32, 34});
  ggml_random_blocks(Format::q8_0, t.view(), rng());
  return t;
}

// Ids as a host tensor of `dtype` from int64 values.
HostTensor ids_tensor(const std::vector<int64_t>& v, DType dtype) {
  HostTensor t(dtype, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::i32) t.ptr<int32_t>()[i] = static_cast<int32_t>(v[i]);
    else t.ptr<int64_t>()[i] = v[i];
  }
  return t;
}

// Random ids in [0, vocab): the first and last rows, repeats.
std::vector<int64_t> random_ids(std::mt19937_64& rng, int64_t vocab, int64_t T) {
  std::vector<int64_t> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int64_t> pick(0, vocab - 1);
  for (auto& id : ids) id = pick(rng);
  if (T > 0) ids[0] = vocab - 1;
  if (T > 1) ids[static_cast<size_t>(T - 1)] = 0;
  if (T > 4) ids[3] = ids[1];
  if (T > 8) ids[8] = ids[1];
  return ids;
}

// reference_embedding_q8_0 on the host; ids must be in range.
HostTensor reference_rows(const HostTensor& table, const std::vector<int64_t>& ids, DType out_dtype) {
  const int64_t T = static_cast<int64_t>(ids.size()), K = table.view().size(1) * 32;
  HostTensor out(out_dtype, {T, K});
  const HostTensor idt = ids_tensor(ids, DType::i64);
  reference_embedding_q8_0(table.view(), idt.view(), out.view());
  return out;
}

uint32_t nan_bits(DType d) { return d == DType::f32 ? 0x7FC00000u : 0x7FC0u; }

// Row by row: rows in `bad` must be NaN in every element (exact bits), every other row must equal
// the reference bytes. The reference must hold no NaN (random tables have finite scales), so the
// 0xFF poison can never pass.
void expect_rows(const std::vector<uint8_t>& got, const HostTensor& want, const std::set<int64_t>& bad,
                 const std::string& what) {
  const DType d = want.dtype();
  const int64_t T = want.view().size(0), K = want.view().size(1);
  const size_t esize = dtype_size(d), row_bytes = static_cast<size_t>(K) * esize;
  ASSERT_EQ(got.size(), static_cast<size_t>(T) * row_bytes) << what;
  std::vector<uint8_t> nan_row(row_bytes);
  const uint32_t nan = nan_bits(d);
  for (size_t i = 0; i < row_bytes; i += esize) std::memcpy(nan_row.data() + i, &nan, esize);
  int64_t bad_rows = 0;
  for (int64_t t = 0; t < T; ++t) {
    const uint8_t* g = got.data() + t * row_bytes;
    const uint8_t* w = bad.count(t) ? nan_row.data() : want.ptr<uint8_t>() + t * row_bytes;
    if (std::memcmp(g, w, row_bytes) == 0) continue;
    if (bad_rows++ < 5) {
      size_t i = 0;
      while (i < row_bytes && g[i] == w[i]) ++i;
      const int64_t e = static_cast<int64_t>(i / esize);
      uint32_t gv = 0, wv = 0;
      std::memcpy(&gv, g + e * esize, esize);
      std::memcpy(&wv, w + e * esize, esize);
      ADD_FAILURE() << what << ": row " << t << (bad.count(t) ? " (bad id)" : "") << " element " << e << " want 0x"
                    << std::hex << wv << " got 0x" << gv;
    }
  }
  EXPECT_EQ(bad_rows, 0) << what << ": " << bad_rows << " of " << T << " rows differ";
}

// One lookup on the device: a table (uploaded at table_offset bytes into its buffer), ids, an output
// poisoned with `poison`; returns the output bytes and the status.
struct Lookup {
  embedding::Plan plan;
  DeviceBuffer table, ids, out;
  DeviceScratch scratch;
  embedding::Binding binding;
  int64_t T, K;
  DType out_dtype;

  Lookup(const HostTensor& host_table, const HostTensor& host_ids, DType out_dtype_, int64_t max_tokens,
         size_t table_offset = 0)
      : plan(embedding::plan({host_table.view().size(0), host_table.view().size(1) * 32, max_tokens, host_ids.dtype(),
                              out_dtype_})),
        scratch(plan.scratch_bytes()),
        T(host_ids.view().size(0)),
        K(host_table.view().size(1) * 32),
        out_dtype(out_dtype_) {
    table = DeviceBuffer(host_table.nbytes() + table_offset);
    table.upload(host_table.view().data, host_table.nbytes(), table_offset);
    ids = DeviceBuffer(std::max<size_t>(host_ids.nbytes(), 1));
    if (T) ids.upload(host_ids.view().data, host_ids.nbytes());
    out = DeviceBuffer(std::max<size_t>(out_bytes(), 1));
    const int64_t V = host_table.view().size(0);
    binding = embedding::bind(plan, scratch.scratch,
                              TensorView(table.bytes_at(table_offset), DType::u8, {V, K / 32, 34}, this_device()),
                              TensorView(T ? ids.get() : nullptr, host_ids.dtype(), {T}, this_device()),
                              TensorView(T ? out.get() : nullptr, out_dtype, {T, K}, this_device()));
  }
  size_t out_bytes() const { return static_cast<size_t>(T * K) * dtype_size(out_dtype); }
  std::vector<uint8_t> run(int poison = 0xFF) {
    out.fill(poison);
    embedding::run(binding, nullptr);
    B12X_CUDA_CHECK(cudaGetLastError());
    B12X_CUDA_CHECK(cudaDeviceSynchronize());
    if (out_bytes() == 0) return {};
    return out.download(out_bytes());
  }
  int64_t status() { return embedding::read_status(binding, nullptr); }
};

std::string label(int64_t V, int64_t K, int64_t T, DType ids, DType out, size_t offset = 0) {
  return "V=" + std::to_string(V) + " K=" + std::to_string(K) + " T=" + std::to_string(T) + " ids=" +
         std::string(dtype_name(ids)) + " out=" + std::string(dtype_name(out)) +
         (offset ? " table at +" + std::to_string(offset) : "");
}

class EmbeddingGpu : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda_available()) << "this test needs a CUDA device"; }
};

// ---------------------------------------------------------------------------------------------
// Tests

TEST_F(EmbeddingGpu, RandomTablesMatchReferenceBitExact) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    int64_t V, K, T;
  };
  // One block per row, odd and even block counts, 16-byte rows, partial and multiple 8192-wide chunks.
  const std::vector<Shape> shapes = {{1, 32, 1},      {300, 64, 7},    {1000, 96, 33},  {5000, 256, 2048},
                                     {777, 4096, 513}, {97, 8224, 40}, {50, 8448, 64},  {31, 16384, 17},
                                     {3, 24640, 5}};
  for (const Shape& s : shapes) {
    const HostTensor table = random_table(s.V, s.K, rng);
    const std::vector<int64_t> ids = random_ids(rng, s.V, s.T);
    for (DType ids_dtype : {DType::i32, DType::i64})
      for (DType out : {DType::bf16, DType::f32}) {
        const HostTensor want = reference_rows(table, ids, out);
        // max_tokens above T: the binding's T is what runs.
        Lookup l(table, ids_tensor(ids, ids_dtype), out, s.T + (ids_dtype == DType::i64 ? 3 : 0));
        expect_rows(l.run(), want, {}, label(s.V, s.K, s.T, ids_dtype, out));
        EXPECT_EQ(l.status(), -1) << label(s.V, s.K, s.T, ids_dtype, out);
      }
  }
}

// The kernel picks 16-, 4- or 2-byte loads from the table address and the row length.
TEST_F(EmbeddingGpu, EveryLoadWidthAndTableOffset) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t K : {int64_t{256}, int64_t{64}, int64_t{8448}, int64_t{8224}}) {
    const int64_t V = 203, T = 150;
    const HostTensor table = random_table(V, K, rng);
    const std::vector<int64_t> ids = random_ids(rng, V, T);
    const HostTensor want = reference_rows(table, ids, DType::bf16);
    for (size_t offset : {0, 2, 4, 6, 8, 34})
      expect_rows(Lookup(table, ids_tensor(ids, DType::i32), DType::bf16, T, offset).run(), want, {},
                  label(V, K, T, DType::i32, DType::bf16, offset));
  }
}

// vocab x row bytes > 2^32: 129980 rows of K = 32768 (34816 bytes each) is 4.5 GB. A 97-row random
// tile is repeated down the table on the device; every looked-up row then gets its own block scales
// (first and last block), so a row read from a wrong (e.g. 32-bit wrapped) offset cannot pass.
TEST_F(EmbeddingGpu, TableBeyondFourGiB) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t R = 97, V = R * 1340, K = 32768, T = 2048;
  const size_t row_bytes = static_cast<size_t>(K / 32 * 34), table_bytes = static_cast<size_t>(V) * row_bytes;
  ASSERT_GT(table_bytes, size_t{1} << 32);
  size_t free_bytes = 0, total_bytes = 0;
  B12X_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  if (free_bytes < table_bytes + (size_t{1} << 30)) GTEST_SKIP() << "needs " << table_bytes << " bytes of device memory";

  const HostTensor tile = random_table(R, K, rng);
  DeviceBuffer table(table_bytes);
  table.upload(tile.view().data, tile.nbytes());
  for (size_t filled = tile.nbytes(); filled < table_bytes;) {
    const size_t n = std::min(filled, table_bytes - filled);
    B12X_CUDA_CHECK(cudaMemcpy(table.bytes_at(filled), table.get(), n, cudaMemcpyDeviceToDevice));
    filled += n;
  }

  // Ids: most rows past the 4 GiB mark (row 123362 on), plus the first and last rows and repeats.
  std::vector<int64_t> ids = random_ids(rng, V, T);
  std::uniform_int_distribution<int64_t> high(123000, V - 1);
  for (size_t i = 10; i < ids.size(); i += 2) ids[i] = high(rng);

  // Per-row scales: finite FP16 (exponent field 1..16), different for every row.
  auto scale_of = [](int64_t id, int which) {
    const uint32_t h = static_cast<uint32_t>(id) * 2654435761u + static_cast<uint32_t>(which) * 40503u;
    return static_cast<uint16_t>(((1 + (h >> 28)) << 10) | (h & 0x3FFu) | ((h >> 12) & 0x8000u));
  };
  HostTensor gathered(DType::u8, {T, K / 32, 34});  // the rows the ids select, as the device holds them
  std::set<int64_t> patched;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = ids[static_cast<size_t>(t)];
    uint8_t* row = gathered.ptr<uint8_t>() + t * row_bytes;
    std::memcpy(row, tile.ptr<uint8_t>() + (id % R) * row_bytes, row_bytes);
    const uint16_t first = scale_of(id, 0), last = scale_of(id, 1);
    std::memcpy(row, &first, 2);
    std::memcpy(row + row_bytes - 34, &last, 2);
    if (patched.insert(id).second) {
      table.upload(&first, 2, static_cast<size_t>(id) * row_bytes);
      table.upload(&last, 2, static_cast<size_t>(id) * row_bytes + row_bytes - 34);
    }
  }
  std::vector<int64_t> iota(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) iota[static_cast<size_t>(t)] = t;

  for (const auto& [ids_dtype, out_dtype] : {std::pair{DType::i64, DType::bf16}, std::pair{DType::i32, DType::f32}}) {
    const HostTensor want = reference_rows(gathered, iota, out_dtype);
    const embedding::Plan plan = embedding::plan({V, K, T, ids_dtype, out_dtype});
    DeviceScratch scratch(plan.scratch_bytes());
    const HostTensor host_ids = ids_tensor(ids, ids_dtype);
    DeviceBuffer d_ids(host_ids.nbytes());
    d_ids.upload(host_ids.view().data, host_ids.nbytes());
    const size_t out_bytes = static_cast<size_t>(T * K) * dtype_size(out_dtype);
    DeviceBuffer out(out_bytes);
    out.fill(0xFF);
    const embedding::Binding b = embedding::bind(plan, scratch.scratch,
                                                 TensorView(table.get(), DType::u8, {V, K / 32, 34}, this_device()),
                                                 TensorView(d_ids.get(), ids_dtype, {T}, this_device()),
                                                 TensorView(out.get(), out_dtype, {T, K}, this_device()));
    embedding::run(b, nullptr);
    B12X_CUDA_CHECK(cudaGetLastError());
    B12X_CUDA_CHECK(cudaDeviceSynchronize());
    expect_rows(out.download(out_bytes), want, {}, label(V, K, T, ids_dtype, out_dtype));
    EXPECT_EQ(embedding::read_status(b, nullptr), -1);
  }
}

TEST_F(EmbeddingGpu, OutOfRangeIdsGiveNaNRowsAndStatus) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t K : {int64_t{256}, int64_t{8224}}) {
    const int64_t V = 1000, T = 300;
    const HostTensor table = random_table(V, K, rng);
    for (DType ids_dtype : {DType::i32, DType::i64})
      for (DType out : {DType::bf16, DType::f32}) {
        const std::string what = label(V, K, T, ids_dtype, out);
        std::vector<int64_t> ids = random_ids(rng, V, T);
        const std::vector<int64_t> bad_pos = {17, 150, 151, 299};
        const std::vector<int64_t> bad_values = {
            -1, V, ids_dtype == DType::i32 ? int64_t{std::numeric_limits<int32_t>::min()} : int64_t{1} << 40,
            ids_dtype == DType::i32 ? int64_t{std::numeric_limits<int32_t>::max()} : std::numeric_limits<int64_t>::min()};
        std::vector<int64_t> fixed = ids;  // the reference sees row 0 at the bad positions (not compared)
        for (size_t i = 0; i < bad_pos.size(); ++i) {
          ids[static_cast<size_t>(bad_pos[i])] = bad_values[i];
          fixed[static_cast<size_t>(bad_pos[i])] = 0;
        }
        const HostTensor want = reference_rows(table, fixed, out);
        Lookup l(table, ids_tensor(ids, ids_dtype), out, T);
        const std::set<int64_t> bad(bad_pos.begin(), bad_pos.end());
        expect_rows(l.run(), want, bad, what + " with bad ids");
        EXPECT_EQ(l.status(), 17) << what;
        expect_rows(l.run(0x00), want, bad, what + " with bad ids, zero poison");  // NaN rows are written too
        EXPECT_EQ(l.status(), 17) << what;

        // Same binding, only the last id bad: the flags of the previous run are gone.
        std::vector<int64_t> ids2 = fixed;
        ids2[299] = V + 5;
        const HostTensor host_ids2 = ids_tensor(ids2, ids_dtype);
        l.ids.upload(host_ids2.view().data, host_ids2.nbytes());
        expect_rows(l.run(), want, {299}, what + " with one bad id");
        EXPECT_EQ(l.status(), 299) << what;

        // All valid again: status -1.
        const HostTensor host_fixed = ids_tensor(fixed, ids_dtype);
        l.ids.upload(host_fixed.view().data, host_fixed.nbytes());
        expect_rows(l.run(), want, {}, what + " all valid");
        EXPECT_EQ(l.status(), -1) << what;
      }
  }
}

TEST_F(EmbeddingGpu, ZeroTokensLaunchNothing) {
  std::mt19937_64 rng(fresh_seed());
  const HostTensor table = random_table(10, 64, rng);
  Lookup l(table, ids_tensor({}, DType::i32), DType::bf16, 4);
  EXPECT_TRUE(l.run().empty());
  EXPECT_EQ(l.status(), -1);
}

TEST_F(EmbeddingGpu, BindRejectsHostTensors) {
  std::mt19937_64 rng(fresh_seed());
  const int64_t V = 64, K = 128, T = 8;
  const HostTensor table = random_table(V, K, rng);
  const HostTensor ids = ids_tensor(random_ids(rng, V, T), DType::i32);
  DeviceBuffer d_table(table.nbytes()), d_ids(ids.nbytes()), d_out(static_cast<size_t>(T * K) * 2);
  const TensorView tv(d_table.get(), DType::u8, {V, K / 32, 34}, this_device());
  const TensorView iv(d_ids.get(), DType::i32, {T}, this_device());
  const TensorView ov(d_out.get(), DType::bf16, {T, K}, this_device());
  const embedding::Plan plan = embedding::plan({V, K, T, DType::i32, DType::bf16});
  DeviceScratch scratch(plan.scratch_bytes());
  expect_bad_argument([&] { embedding::bind(plan, scratch.scratch, table.view(), iv, ov); }, "table");
  expect_bad_argument([&] { embedding::bind(plan, scratch.scratch, tv, ids.view(), ov); }, "ids");
  HostTensor host_out(DType::bf16, {T, K});
  expect_bad_argument([&] { embedding::bind(plan, scratch.scratch, tv, iv, host_out.view()); }, "out");
  Scratch host_scratch = scratch.scratch;
  host_scratch.device = Device::host();
  expect_bad_argument([&] { embedding::bind(plan, host_scratch, tv, iv, ov); }, "scratch");
  EXPECT_NO_THROW(embedding::bind(plan, scratch.scratch, tv, iv, ov));
}

TEST_F(EmbeddingGpu, GraphCaptureReplaysChangedIdsWithoutCompiling) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const int64_t V = 4000, K = 8448, T = 96;
  const HostTensor table = random_table(V, K, rng);
  for (DType ids_dtype : {DType::i32, DType::i64}) {
    const std::vector<int64_t> ids_a = random_ids(rng, V, T), ids_b = random_ids(rng, V, T);
    std::vector<int64_t> ids_c = ids_b;
    ids_c[40] = -3;  // a bad id in the third replay
    const HostTensor ha = ids_tensor(ids_a, ids_dtype), hb = ids_tensor(ids_b, ids_dtype),
                     hc = ids_tensor(ids_c, ids_dtype);

    // Plan and bind outside capture (plan compiles on first use).
    Lookup l(table, ha, DType::bf16, T);
    const uint64_t misses = compile_cache_info().misses;
    const embedding::Plan plan2 = embedding::plan({V, K, T, ids_dtype, DType::bf16}, stream);
    EXPECT_EQ(compile_cache_info().misses, misses) << "a second plan of the same configuration must not compile";
    EXPECT_NE(plan2.kernel, nullptr);

    cudaGraph_t graph;
    B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    embedding::run(l.binding, stream);
    B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    const std::vector<std::pair<const HostTensor*, const std::vector<int64_t>*>> replays = {
        {&ha, &ids_a}, {&hb, &ids_b}, {&hc, &ids_c}};
    for (size_t r = 0; r < replays.size(); ++r) {
      const std::string what = label(V, K, T, ids_dtype, DType::bf16) + " graph replay " + std::to_string(r);
      l.ids.upload(replays[r].first->view().data, replays[r].first->nbytes());  // same buffer, new ids
      B12X_CUDA_CHECK(cudaMemsetAsync(l.out.get(), 0xFF, l.out_bytes(), stream));
      B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      std::vector<int64_t> fixed = *replays[r].second;
      std::set<int64_t> bad;
      if (r == 2) {
        fixed[40] = 0;
        bad = {40};
      }
      EXPECT_EQ(embedding::read_status(l.binding, stream), r == 2 ? 40 : -1) << what;  // synchronizes the stream
      expect_rows(l.out.download(l.out_bytes()), reference_rows(table, fixed, DType::bf16), bad, what);
    }
    EXPECT_EQ(compile_cache_info().misses, misses);
    B12X_CUDA_CHECK(cudaGraphExecDestroy(exec));
    B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

// read_status synchronizes: refused while the stream is capturing.
TEST_F(EmbeddingGpu, ReadStatusRefusesCapture) {
  std::mt19937_64 rng(fresh_seed());
  const HostTensor table = random_table(16, 64, rng);
  Lookup l(table, ids_tensor(random_ids(rng, 16, 4), DType::i32), DType::bf16, 4);
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  embedding::run(l.binding, stream);
  EXPECT_THROW(embedding::read_status(l.binding, stream), Error);
  B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace b12x
