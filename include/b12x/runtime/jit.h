// Kernels are CUDA C++ sources shipped inside the library (embedded at build time from
// src/<family>/kernels/*.cuh and src/device/*.cuh). A KernelSpec names one configuration: the
// template instantiation to compile plus the facts that describe it. resolve_kernel() compiles it
// with NVRTC for the current device, caches it in memory and on disk, and loads it with the driver
// API. No nvcc at run time.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

namespace b12x {

struct KernelSpec {
  std::string kernel;         // stable id, e.g. "formats.dequantize"
  int version = 1;            // bump when generated device code changes without a source change
  std::string source;         // embedded source path, e.g. "formats/kernels/dequantize.cuh"
  std::string name_expression;  // instantiation to compile, e.g. "b12x::dequantize_kernel<6, 1>"
  std::vector<std::pair<std::string, std::string>> config;  // facts for logs, errors and the key
  std::vector<std::string> archs = {"sm_90a"};  // architectures the kernel declares (add "sm_120a" for
                                                // kernels using only warp-level MMA)
  int max_registers = 0;      // declared limit: -maxrregcount and the spill check (0: none)
  std::vector<std::string> options;  // extra NVRTC options, e.g. "-DB12X_TILE=128"

  std::string describe() const;  // "formats.dequantize{format=nvfp4, out=bf16}"
};

// Output of one NVRTC compilation.
struct CompiledCubin {
  std::string key;           // 64 hex digits (SHA-256)
  std::string lowered_name;  // mangled entry point
  std::vector<char> cubin;
  std::string log;           // NVRTC + ptxas (-v) output
  int registers = -1;        // from ptxas -v, -1 if not reported
  int spill_bytes = 0;       // spill stores + loads reported by ptxas
  // ptxas serialized the kernel's wgmma ("wgmma.mma_async instructions are serialized ...": lost
  // overlap of the tensor cores with everything else, no wrong result): a performance bug.
  bool wgmma_serialized = false;
  double seconds = 0;
};

// Embedded sources (path -> text), for tools and tests.
const std::vector<std::pair<std::string, std::string>>& embedded_sources();

// Cache key: SHA-256 over the source and every embedded header it includes (transitively), the
// spec (kernel, version, name expression, config, options, registers), the arch, the NVRTC version
// and the compile options. Any of these changing gives a different key.
std::string kernel_cache_key(const KernelSpec& spec, const std::string& arch);

// NVRTC only: needs no GPU (CI uses it to compile every registered configuration). Throws
// Unsupported if `arch` is not declared by the spec, Error with the NVRTC log on a compile error.
CompiledCubin compile_kernel(const KernelSpec& spec, const std::string& arch);

// A kernel loaded on one device.
class Kernel {
 public:
  Kernel(void* function, std::string key, std::string describe) : fn_(function), key_(std::move(key)), describe_(std::move(describe)) {}
  // Launches on `stream`; args are pointers to the kernel's parameters (cuLaunchKernel convention).
  // Raises the kernel's dynamic shared-memory limit to smem_bytes whenever it grows (always, not only
  // past 48 KiB: the default limit counts the kernel's static shared memory too, so 48 KiB of
  // dynamic memory next to any static buffer fails to launch without it). With B12X_TIMING=1 the GPU
  // time is measured with events and logged (skipped while the stream is capturing). cluster: the
  // thread-block cluster shape (grid a multiple of it); (1, 1, 1) launches without clusters.
  // programmatic: programmatic stream serialization (PDL, sm_90+): the kernel may start while the
  // stream's previous kernel runs (once that one's CTAs called pdl_launch_dependents or exited), so
  // it must pdl_wait (src/device/common.cuh) before reading anything that kernel writes.
  void launch(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream, void** args,
              dim3 cluster = dim3(1, 1, 1), bool programmatic = false) const;
  const std::string& key() const { return key_; }
  const std::string& describe() const { return describe_; }

 private:
  void* fn_;  // CUfunction
  std::string key_, describe_;
  mutable std::atomic<size_t> smem_limit_set_{0};
};

// In-memory hit -> the loaded kernel. Miss -> freeze / capture check (throws
// KernelResolutionFrozenError) -> disk cache -> NVRTC -> load. Thread-safe; a configuration is
// compiled once even when several threads ask for it at the same time.
const Kernel& resolve_kernel(const KernelSpec& spec, cudaStream_t stream = nullptr);

}  // namespace b12x

namespace b12x {
// The cubin level of the cache without loading anything (no GPU needed): in-memory cubin -> freeze
// check -> disk -> NVRTC. resolve_kernel() goes through it; `b12x prewarm --arch` uses it to fill the
// disk cache on a build machine.
std::shared_ptr<const CompiledCubin> cached_cubin(const KernelSpec& spec, const std::string& arch);
}  // namespace b12x
