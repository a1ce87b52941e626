// formats.tile16_pack on a real GPU (label `gpu`, run on the H200): byte-identical to
// tile16_pack_host (the spec) for every format on fresh random bytes, written under two poisons so an
// unwritten byte fails; GGML payloads (Q8_0, IQ2_XS) at 2-byte offsets; a non-default stream; overlap refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/tile16.h"
#include "support/device.h"
#include "support/errors.h"
#include "support/weights.h"
#include "runtime/cuda_api.h"

namespace b12x {
namespace {

using namespace b12x::test;

std::string label(const PackedWeight& p) {
  return std::string(format_info(p.format).name) + " " + std::to_string(p.n) + "x" + std::to_string(p.k);
}

// Random bytes in every tensor: the repack moves bytes whatever they encode.
PackedWeight random_bytes(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  PackedWeight p = allocate_weight(f, n, k);
  for (auto& b : p.data.bytes()) b = static_cast<uint8_t>(rng());
  for (auto& b : p.scale.bytes()) b = static_cast<uint8_t>(rng());
  return p;
}

// Device buffers for a tile16 copy of p, every byte set to `poison`.
struct DeviceTile16 {
  DeviceBuffer data, scale;
  WeightView view;
  DeviceTile16(const PackedWeight& p, int poison) : data(p.data.nbytes()) {
    view = p.view();
    view.layout = WeightLayout::tile16;
    view.data.data = data.get();
    view.data.device = this_device();
    data.fill(poison);
    if (!p.scale.view().empty()) {
      scale = DeviceBuffer(p.scale.nbytes());
      scale.fill(poison);
      view.scale.data = scale.get();
      view.scale.device = this_device();
    }
  }
};

// tile16_pack of p on `stream` (payload at data_offset) must equal to_tile16, under both poisons.
void expect_matches_host(const PackedWeight& p, cudaStream_t stream = nullptr, size_t data_offset = 0) {
  const PackedWeight want = to_tile16(p.view());
  DeviceWeight in(p, data_offset);
  for (int poison : {0xA5, 0x5A}) {
    DeviceTile16 out(p, poison);
    B12X_CUDA_CHECK(cudaDeviceSynchronize());  // the fills ran on the legacy stream
    tile16_pack(in.view, out.view, stream);
    B12X_CUDA_CHECK(cudaGetLastError());
    B12X_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(out.data.download() == want.data.bytes()) << label(p) << " data, poison " << poison;
    if (!p.scale.view().empty()) {
      EXPECT_TRUE(out.scale.download() == want.scale.bytes()) << label(p) << " scale, poison " << poison;
    }
  }
}

class Tile16Gpu : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda_available()) << "this test needs a CUDA device"; }
};

TEST_F(Tile16Gpu, PackMatchesHostForEveryFormat) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& info : all_formats()) {
    if (!has_tile16_layout(info.format)) continue;
    // One tile and run; 11 runs; several tiles with partial fp8 blocks; a layer-sized weight. IQ2
    // (K % 256 == 0): one tile and block; 3 blocks; 19 tiles of 11 blocks; the layer-sized weight.
    const bool iq2 = info.format == Format::iq2_xxs || info.format == Format::iq2_xs;
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        iq2 ? std::vector<std::pair<int64_t, int64_t>>{{16, 256}, {48, 768}, {304, 2816}, {4096, 4096}}
            : std::vector<std::pair<int64_t, int64_t>>{{16, 32}, {48, 352}, {304, 2848}, {4096, 4096}};
    for (const auto& [n, k] : shapes) expect_matches_host(random_bytes(info.format, n, k, rng));
  }
}

TEST_F(Tile16Gpu, GgmlPayloadAtTwoByteOffsetsAndAStream) {
  std::mt19937_64 rng(fresh_seed());
  for (size_t offset : {2, 6, 34}) {
    expect_matches_host(random_bytes(Format::q8_0, 48, 352, rng), nullptr, offset);
    expect_matches_host(random_bytes(Format::iq2_xs, 48, 512, rng), nullptr, offset);
  }
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  expect_matches_host(random_bytes(Format::nvfp4, 256, 1024, rng), stream);
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_F(Tile16Gpu, RefusesOverlapAndHostTensors) {
  std::mt19937_64 rng(fresh_seed());
  const PackedWeight p = random_bytes(Format::mxfp8, 64, 256, rng);
  DeviceWeight in(p);
  DeviceTile16 out(p, 0);
  WeightView aliased = out.view;
  aliased.data.data = in.view.data.data;
  expect_bad_argument([&] { tile16_pack(in.view, aliased, nullptr); }, "out", {"overlaps"});
  expect_bad_argument([&] { tile16_pack(p.view(), out.view, nullptr); }, "in", {"CUDA device"});
  PackedWeight host_out = allocate_weight(Format::mxfp8, 64, 256);
  host_out.layout = WeightLayout::tile16;
  expect_bad_argument([&] { tile16_pack(in.view, host_out.view(), nullptr); }, "out", {"CUDA device"});
}

}  // namespace
}  // namespace b12x
