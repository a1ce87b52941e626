// The two cache levels and kernel resolution: loaded kernels per device in memory, cubins in memory
// and on disk; freeze and capture checks sit after the in-memory miss.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "b12x/core/error.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/freeze.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"
#include "runtime/disk_cache.h"
#include "runtime/env.h"

namespace b12x {

namespace {

struct Stats {
  std::atomic<uint64_t> memory_hits{0}, disk_hits{0}, misses{0}, corrupt{0};
  std::mutex mu;
  double compile_seconds = 0;
};
Stats& stats() {
  static Stats s;
  return s;
}

struct CubinSlot {
  std::mutex mu;
  std::shared_ptr<const CompiledCubin> value;
};
struct KernelSlot {
  std::mutex mu;
  const Kernel* value = nullptr;
};

std::mutex g_maps_mu;
std::unordered_map<std::string, std::shared_ptr<CubinSlot>> g_cubins;
std::unordered_map<std::string, std::shared_ptr<KernelSlot>> g_kernels;  // key@device
// Loaded kernels live until exit: plans made before clear_compile_cache() keep working.
std::deque<Kernel> g_kernel_store;

template <class Slot>
std::shared_ptr<Slot> slot_for(std::unordered_map<std::string, std::shared_ptr<Slot>>& map, const std::string& key) {
  std::lock_guard<std::mutex> lock(g_maps_mu);
  auto& s = map[key];
  if (!s) s = std::make_shared<Slot>();
  return s;
}

void check_not_frozen(const KernelSpec& spec, const std::string& key) {
  if (!kernel_resolution_frozen()) return;
  throw KernelResolutionFrozenError("kernel resolution is frozen (" + kernel_resolution_freeze_reason() +
                                    ") but " + spec.describe() + " [key " + key.substr(0, 16) +
                                    "] is not loaded in this process; warm this shape up (run or prewarm it) "
                                    "before freeze_kernel_resolution()");
}

void check_not_capturing(const KernelSpec& spec, const std::string& key, cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  B12X_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  if (status != cudaStreamCaptureStatusNone)
    throw KernelResolutionFrozenError("CUDA graph capture is in progress on the stream but " + spec.describe() +
                                      " [key " + key.substr(0, 16) +
                                      "] is not loaded; plan (or prewarm) before capture so run() only launches");
}

std::shared_ptr<const CompiledCubin> build(const KernelSpec& spec, const std::string& arch, const std::string& key) {
  const bool progress = detail::env_flag("B12X_PRINT_COMPILE_PROGRESS");
  if (progress) std::fprintf(stderr, "[b12x] compile start %s arch=%s key=%.16s\n", spec.describe().c_str(), arch.c_str(), key.c_str());
  auto out = std::make_shared<CompiledCubin>(compile_kernel(spec, arch));
  double total;
  {
    std::lock_guard<std::mutex> lock(stats().mu);
    total = stats().compile_seconds += out->seconds;
  }
  const uint64_t n = ++stats().misses;
  if (progress)
    std::fprintf(stderr, "[b12x] compile done  %s arch=%s key=%.16s %.3f s (running total %.3f s, %llu compiles)\n",
                 spec.describe().c_str(), arch.c_str(), key.c_str(), out->seconds, total,
                 static_cast<unsigned long long>(n));
  if (out->spill_bytes > 0)
    detail::log(detail::LogLevel::warn, spec.describe() + " spills " + std::to_string(out->spill_bytes) + " bytes");
  if (out->wgmma_serialized)
    detail::log(detail::LogLevel::warn, spec.describe() + ": ptxas serialized its wgmma (see the compile log)");
  return out;
}

}  // namespace

std::string disk_cache_dir() {
  if (detail::env_flag("B12X_DISABLE_DISK_CACHE")) return "";
  std::string dir = detail::env_string("B12X_CACHE_DIR");
  if (dir.empty()) {
    const std::string xdg = detail::env_string("XDG_CACHE_HOME");
    const std::string home = detail::env_string("HOME");
    if (!xdg.empty()) dir = xdg + "/b12x";
    else if (!home.empty()) dir = home + "/.cache/b12x";
    else return "";
  }
  return dir;
}

std::shared_ptr<const CompiledCubin> cached_cubin(const KernelSpec& spec, const std::string& arch) {
  const std::string key = kernel_cache_key(spec, arch);
  auto slot = slot_for(g_cubins, key);
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->value) {
    ++stats().memory_hits;
    return slot->value;
  }
  check_not_frozen(spec, key);
  const std::string dir = disk_cache_dir();
  if (!dir.empty()) {
    detail::DiskEntry entry;
    switch (detail::disk_cache_load(dir, key, &entry)) {
      case detail::DiskLookup::hit: {
        auto c = std::make_shared<CompiledCubin>();
        c->key = key;
        c->lowered_name = std::move(entry.lowered_name);
        c->cubin = std::move(entry.cubin);
        ++stats().disk_hits;
        return slot->value = c;
      }
      case detail::DiskLookup::corrupt:
        ++stats().corrupt;
        detail::log(detail::LogLevel::warn, "compile cache entry " + detail::disk_cache_path(dir, key) +
                                                " is corrupt or truncated; rebuilding it");
        break;
      case detail::DiskLookup::missing: break;
    }
  }
  auto built = build(spec, arch, key);
  if (!dir.empty()) detail::disk_cache_store(dir, key, {built->lowered_name, built->cubin});
  return slot->value = built;
}

const Kernel& resolve_kernel(const KernelSpec& spec, cudaStream_t stream) {
  const DeviceInfo& dev = device_info();
  const std::string key = kernel_cache_key(spec, dev.arch);
  auto slot = slot_for(g_kernels, key + "@" + std::to_string(dev.ordinal));
  std::lock_guard<std::mutex> lock(slot->mu);
  if (slot->value) {
    ++stats().memory_hits;
    return *slot->value;
  }
  check_not_frozen(spec, key);
  check_not_capturing(spec, key, stream);
  auto cubin = cached_cubin(spec, dev.arch);
  B12X_CUDA_CHECK(cudaFree(nullptr));  // make the device's primary context current for the driver API
  CUmodule module;
  CUfunction fn;
  B12X_CU_CHECK(detail::driver().cuModuleLoadData(&module, cubin->cubin.data()));
  B12X_CU_CHECK(detail::driver().cuModuleGetFunction(&fn, module, cubin->lowered_name.c_str()));
  std::lock_guard<std::mutex> maps(g_maps_mu);
  g_kernel_store.emplace_back(reinterpret_cast<void*>(fn), key, spec.describe());
  slot->value = &g_kernel_store.back();
  return *slot->value;
}

CompileCacheInfo compile_cache_info() {
  CompileCacheInfo info;
  info.memory_hits = stats().memory_hits;
  info.disk_hits = stats().disk_hits;
  info.misses = stats().misses;
  info.corrupt_entries = stats().corrupt;
  {
    std::lock_guard<std::mutex> lock(stats().mu);
    info.compile_seconds = stats().compile_seconds;
  }
  {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    info.entries_in_memory = g_cubins.size();
  }
  info.disk_dir = disk_cache_dir();
  return info;
}

void clear_compile_cache(bool disk) {
  {
    std::lock_guard<std::mutex> lock(g_maps_mu);
    g_cubins.clear();
    g_kernels.clear();
  }
  stats().memory_hits = stats().disk_hits = stats().misses = stats().corrupt = 0;
  {
    std::lock_guard<std::mutex> lock(stats().mu);
    stats().compile_seconds = 0;
  }
  const std::string dir = disk_cache_dir();
  if (disk && !dir.empty()) {
    std::error_code ec;
    // Only our own entries: <dir>/<2 hex>/<64 hex>.cubin
    for (const auto& sub : std::filesystem::directory_iterator(dir, ec)) {
      if (!sub.is_directory() || sub.path().filename().string().size() != 2) continue;
      for (const auto& f : std::filesystem::directory_iterator(sub.path(), ec))
        if (f.path().extension() == ".cubin") std::filesystem::remove(f.path(), ec);
    }
  }
}

void Kernel::launch(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, void** args, dim3 cluster,
                    bool programmatic) const {
  const auto& drv = detail::driver();
  CUfunction f = reinterpret_cast<CUfunction>(fn_);
  if (smem_bytes > smem_limit_set_) {
    B12X_CU_CHECK(drv.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(smem_bytes)));
    smem_limit_set_ = smem_bytes;
  }
  const bool clustered = cluster.x * cluster.y * cluster.z > 1;
  auto enqueue = [&] {
    if (!clustered && !programmatic) {
      B12X_CU_CHECK(drv.cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                       static_cast<unsigned>(smem_bytes), reinterpret_cast<CUstream>(stream), args,
                                       nullptr));
      return;
    }
    CUlaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (clustered) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
      attrs[n].value.clusterDim.x = cluster.x, attrs[n].value.clusterDim.y = cluster.y, attrs[n].value.clusterDim.z = cluster.z;
      ++n;
    }
    if (programmatic) {
      attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[n].value.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    CUlaunchConfig config{};
    config.gridDimX = grid.x, config.gridDimY = grid.y, config.gridDimZ = grid.z;
    config.blockDimX = block.x, config.blockDimY = block.y, config.blockDimZ = block.z;
    config.sharedMemBytes = static_cast<unsigned>(smem_bytes);
    config.hStream = reinterpret_cast<CUstream>(stream);
    config.attrs = attrs;
    config.numAttrs = n;
    B12X_CU_CHECK(drv.cuLaunchKernelEx(&config, f, args, nullptr));
  };
  static const bool timing = detail::env_flag("B12X_TIMING");
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (timing) B12X_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (!timing || capture != cudaStreamCaptureStatusNone) return enqueue();
  thread_local cudaEvent_t start = nullptr, stop = nullptr;
  if (!start) {
    B12X_CUDA_CHECK(cudaEventCreate(&start));
    B12X_CUDA_CHECK(cudaEventCreate(&stop));
  }
  B12X_CUDA_CHECK(cudaEventRecord(start, stream));
  enqueue();
  B12X_CUDA_CHECK(cudaEventRecord(stop, stream));
  B12X_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  B12X_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  std::fprintf(stderr, "[b12x] timing %s grid=(%u,%u,%u) block=(%u,%u,%u) cluster=(%u,%u,%u) smem=%zu: %.4f ms\n",
               describe_.c_str(), grid.x, grid.y, grid.z, block.x, block.y, block.z, cluster.x, cluster.y, cluster.z,
               smem_bytes, ms);
}

}  // namespace b12x
