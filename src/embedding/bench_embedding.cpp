// `b12x bench --suite embedding`: the Q8_0 embedding lookup (8192 random ids into a 32000 x 8192
// table -> BF16) through embedding::plan/bind/run, checked bit-exact against reference_embedding_q8_0
// on the host, then timed. Bytes moved = the looked-up rows read (T x K/32 x 34) + T x K x 2 written,
// so the column to read is % of copy bandwidth. Compiled into the CLI only (the library globs skip
// bench_*.cpp).
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/embedding/lookup.h"
#include "b12x/runtime/device.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {
namespace {

struct EmbeddingShape {
  int64_t tokens, vocab, k;
};

// A prefill-sized lookup into a Llama-like vocabulary.
const std::vector<EmbeddingShape> kShapes = {{8192, 32000, 8192}};

// Random blocks for the whole 278 MB table would take the host longer than the quick suite may, so a
// tile of rows is made on the host and repeated down the table on the device (the tile row count
// divides the vocabulary).
constexpr int64_t kTileRows = 256;

void bench_embedding(Context& ctx, const EmbeddingShape& s, Result& r) {
  const int64_t T = s.tokens, V = s.vocab, K = s.k;
  const embedding::Plan plan = embedding::plan({V, K, T, DType::i32, DType::bf16}, ctx.stream());  // compiles on first use
  r.path = detail::concat(plan.kernel->describe(), " grid <= ", plan.max_ctas, " block ", plan.block.x);

  std::random_device rd;
  const uint64_t seed = (static_cast<uint64_t>(rd()) << 32) | rd();
  std::mt19937_64 rng(seed);
  const int64_t tile_rows = V % kTileRows == 0 ? kTileRows : V;
  HostTensor tile(DType::u8, {tile_rows, K / 32, 34});
  ggml_random_blocks(Format::q8_0, tile.view(), rng());
  const size_t row_bytes = static_cast<size_t>(K / 32 * 34);

  DeviceBuffer table(static_cast<size_t>(V) * row_bytes);
  table.upload(tile.view().data, tile.nbytes());
  replicate_prefix(table.get(), tile.nbytes(), table.bytes());

  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(V - 1));
  for (auto& id : ids) id = pick(rng);
  ids.front() = 0;
  ids.back() = static_cast<int32_t>(V - 1);
  DeviceBuffer d_ids(ids.size() * sizeof(int32_t));
  d_ids.upload(ids.data(), d_ids.bytes());
  r.bytes = static_cast<double>(T) * static_cast<double>(row_bytes) + 2.0 * static_cast<double>(T * K);

  DeviceBuffer out(static_cast<size_t>(T * K) * 2);
  out.fill(0xFF);  // NaN poison: an unwritten element cannot match
  const Device dev = Device::cuda(current_device());
  // The plan's scratch (the per-token status flags), 1024-byte aligned as ScratchLayout requires.
  DeviceBuffer scratch(plan.scratch_bytes() + ScratchLayout::kAlignment);
  const embedding::Binding binding = embedding::bind(
      plan, aligned_scratch(scratch.get(), scratch.bytes(), plan.scratch_bytes(), dev), TensorView(table.get(), DType::u8, {V, K / 32, 34}, dev),
      TensorView(d_ids.get(), DType::i32, {T}, dev), TensorView(out.get(), DType::bf16, {T, K}, dev));
  embedding::run(binding, ctx.stream());
  B12X_CUDA_CHECK(cudaGetLastError());
  const int64_t status = embedding::read_status(binding, ctx.stream());  // synchronizes the stream

  // Expected: the reference on the same rows (row id of the device table = row id % tile_rows of the tile).
  std::vector<int32_t> tile_ids(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) tile_ids[i] = static_cast<int32_t>(ids[i] % tile_rows);
  HostTensor want(DType::bf16, {T, K});
  reference_embedding_q8_0(tile.view(), TensorView(tile_ids.data(), DType::i32, {T}), want.view());
  std::vector<uint16_t> got(static_cast<size_t>(T * K));
  out.download(got.data(), out.bytes());
  int64_t bad_rows = 0, first_bad = -1;
  for (int64_t t = 0; t < T; ++t) {
    const uint16_t* g = got.data() + t * K;
    const uint16_t* w = want.ptr<uint16_t>() + t * K;
    if (std::memcmp(g, w, static_cast<size_t>(K) * 2) == 0) continue;
    if (bad_rows++ == 0)
      for (int64_t i = 0; i < K && first_bad < 0; ++i)
        if (g[i] != w[i]) first_bad = t * K + i;
  }
  r.check = bad_rows == 0 && status == -1 ? Check::pass : Check::fail;
  r.check_detail = detail::concat("bit-exact vs host reference_embedding_q8_0 over all ", T * K, " elements (", T,
                                  " ids into ", V, " rows, a ", tile_rows, "-row tile repeated): ", bad_rows,
                                  " rows differ; status ", status, " (want -1)");
  if (first_bad >= 0) {
    char bits[64];
    std::snprintf(bits, sizeof bits, "want 0x%04x got 0x%04x", want.ptr<uint16_t>()[first_bad],
                  got[static_cast<size_t>(first_bad)]);
    r.check_detail += detail::concat(", first at (", first_bad / K, ", ", first_bad % K, ") ", bits);
  }
  r.check_detail += detail::concat("; seed ", seed);
  if (r.check != Check::pass) return;

  r.time = ctx.timer().time([&](cudaStream_t st) { embedding::run(binding, st); });
}

std::vector<Case> embedding_cases(const std::vector<Shape>&) {
  std::vector<Case> cases;
  for (const EmbeddingShape& s : kShapes)
    cases.push_back({"embedding", "q8_0", std::to_string(s.tokens) + "x" + std::to_string(s.k), Ceiling::none,
                     [s](Context& ctx, Result& r) { bench_embedding(ctx, s, r); }});
  return cases;
}

const SuiteRegistrar kEmbedding({.name = "embedding",
                                 .description = "Q8_0 embedding lookup (ids -> BF16 rows) on the GPU, bit-exact vs "
                                                "the host; TB/s and % of copy bandwidth",
                                 .order = 20,
                                 .quick = true,
                                 .takes_shapes = false,
                                 .shape_use = "",
                                 .cases = embedding_cases});

}  // namespace
}  // namespace b12x::bench
