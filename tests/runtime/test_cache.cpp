// The compile cache (memory + disk), freeze semantics and concurrent processes: no GPU needed
// (cached_cubin is the cubin level that resolve_kernel() builds on).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "b12x/b12x.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/freeze.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/registry.h"
#include "support/env.h"
#include "support/errors.h"
#include "runtime/selftest.h"

namespace fs = std::filesystem;

namespace b12x {
namespace {

// Each test gets its own empty cache directory and a clean in-memory cache.
class CacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("b12x-cache-test-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    cache_dir_.emplace("B12X_CACHE_DIR", dir_.c_str());
    disk_on_.emplace("B12X_DISABLE_DISK_CACHE", nullptr);
    unfreeze_kernel_resolution();
    clear_compile_cache();
  }
  void TearDown() override {
    unfreeze_kernel_resolution();
    clear_compile_cache();
    disk_on_.reset();  // the process's own values again
    cache_dir_.reset();
    fs::remove_all(dir_);
  }
  // A spec unique to this test run, so no other process's cache entry can answer it.
  KernelSpec unique_spec() const {
    KernelSpec s = detail::selftest_spec(256);
    s.config.push_back({"test_dir", dir_.filename().string()});
    return s;
  }
  std::string entry_path(const KernelSpec& s) const {
    const std::string key = kernel_cache_key(s, "sm_90a");
    return (dir_ / key.substr(0, 2) / (key + ".cubin")).string();
  }
  fs::path dir_;
  std::optional<test::ScopedEnv> cache_dir_, disk_on_;
};

TEST_F(CacheTest, DirectoryResolutionFollowsTheEnvironment) {
  EXPECT_EQ(disk_cache_dir(), dir_.string());
  const test::ScopedEnv no_dir("B12X_CACHE_DIR", nullptr);
  {
    const test::ScopedEnv xdg("XDG_CACHE_HOME", "/tmp/xdg-b12x");
    EXPECT_EQ(disk_cache_dir(), "/tmp/xdg-b12x/b12x");
  }
  const test::ScopedEnv no_xdg("XDG_CACHE_HOME", nullptr);
  const test::ScopedEnv home("HOME", "/home/someone");  // restored for the tests after this one
  EXPECT_EQ(disk_cache_dir(), "/home/someone/.cache/b12x");
  const test::ScopedEnv off("B12X_DISABLE_DISK_CACHE", "1");
  EXPECT_EQ(disk_cache_dir(), "");
}

TEST_F(CacheTest, MissThenMemoryHitThenDiskHit) {
  const KernelSpec s = unique_spec();
  auto a = cached_cubin(s, "sm_90a");
  EXPECT_EQ(compile_cache_info().misses, 1u);
  EXPECT_TRUE(fs::exists(entry_path(s)));
  auto b = cached_cubin(s, "sm_90a");
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(compile_cache_info().memory_hits, 1u);
  EXPECT_EQ(compile_cache_info().misses, 1u);
  clear_compile_cache();  // memory only
  auto c = cached_cubin(s, "sm_90a");
  EXPECT_EQ(compile_cache_info().disk_hits, 1u);
  EXPECT_EQ(compile_cache_info().misses, 0u);
  EXPECT_EQ(c->cubin, a->cubin);
  EXPECT_EQ(c->lowered_name, a->lowered_name);
  EXPECT_GT(compile_cache_info().entries_in_memory, 0u);
}

TEST_F(CacheTest, TruncatedOrAlteredEntriesAreRebuilt) {
  const KernelSpec s = unique_spec();
  const auto original = cached_cubin(s, "sm_90a")->cubin;
  const std::string path = entry_path(s);
  const auto size = fs::file_size(path);

  fs::resize_file(path, size / 2);  // truncated
  clear_compile_cache();
  EXPECT_EQ(cached_cubin(s, "sm_90a")->cubin, original);
  EXPECT_EQ(compile_cache_info().corrupt_entries, 1u);
  EXPECT_EQ(compile_cache_info().misses, 1u);
  EXPECT_EQ(fs::file_size(path), size) << "the rebuilt entry replaces the corrupt one";

  {  // one flipped byte inside the cubin
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 10));
    char byte;
    f.read(&byte, 1);
    byte ^= 0x5A;
    f.seekp(static_cast<std::streamoff>(size - 10));
    f.write(&byte, 1);
  }
  clear_compile_cache();
  EXPECT_EQ(cached_cubin(s, "sm_90a")->cubin, original);
  EXPECT_EQ(compile_cache_info().corrupt_entries, 1u);

  std::ofstream(path, std::ios::trunc) << "garbage";
  clear_compile_cache();
  EXPECT_EQ(cached_cubin(s, "sm_90a")->cubin, original);
  EXPECT_EQ(compile_cache_info().corrupt_entries, 1u);
}

TEST_F(CacheTest, DisabledDiskCacheWritesNothing) {
  const test::ScopedEnv off("B12X_DISABLE_DISK_CACHE", "1");
  const KernelSpec s = unique_spec();
  cached_cubin(s, "sm_90a");
  EXPECT_EQ(compile_cache_info().misses, 1u);
  EXPECT_TRUE(fs::is_empty(dir_));
  EXPECT_EQ(compile_cache_info().disk_dir, "");
}

TEST_F(CacheTest, ClearWithDiskRemovesEntries) {
  const KernelSpec s = unique_spec();
  cached_cubin(s, "sm_90a");
  ASSERT_TRUE(fs::exists(entry_path(s)));
  clear_compile_cache(true);
  EXPECT_FALSE(fs::exists(entry_path(s)));
}

TEST_F(CacheTest, FreezeTurnsMissesIntoErrorsButKeepsHits) {
  const KernelSpec warm = unique_spec();
  cached_cubin(warm, "sm_90a");
  freeze_kernel_resolution("serving");
  EXPECT_TRUE(kernel_resolution_frozen());
  EXPECT_EQ(kernel_resolution_freeze_reason(), "serving");
  EXPECT_NO_THROW(cached_cubin(warm, "sm_90a"));  // in memory: fine

  KernelSpec cold = unique_spec();
  cold.config.push_back({"cold", "1"});
  try {
    cached_cubin(cold, "sm_90a");
    FAIL() << "a frozen miss must throw";
  } catch (const KernelResolutionFrozenError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("serving"), std::string::npos) << msg;
    EXPECT_NE(msg.find(cold.describe()), std::string::npos) << msg;
    EXPECT_NE(msg.find(kernel_cache_key(cold, "sm_90a").substr(0, 16)), std::string::npos) << msg;
    EXPECT_NE(msg.find("warm"), std::string::npos) << msg;
  }
  EXPECT_EQ(compile_cache_info().misses, 1u);

  // A kernel that is only on disk also throws: warm-up must have loaded it in this process.
  clear_compile_cache();
  EXPECT_THROW(cached_cubin(warm, "sm_90a"), KernelResolutionFrozenError);

  unfreeze_kernel_resolution();
  EXPECT_FALSE(kernel_resolution_frozen());
  EXPECT_NO_THROW(cached_cubin(cold, "sm_90a"));
}

TEST_F(CacheTest, ConcurrentProcessesShareOneValidEntry) {
  const KernelSpec s = unique_spec();
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  for (int i = 0; i < kProcs; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        const auto c = cached_cubin(s, "sm_90a");
        rc = c->cubin.empty() ? 2 : 0;
      } catch (...) {
        rc = 1;
      }
      ::_exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;
  }
  // Exactly one entry, valid, and no temp files left behind.
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_))
    if (e.is_regular_file()) {
      ++files;
      EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
    }
  EXPECT_EQ(files, 1u);
  clear_compile_cache();
  cached_cubin(s, "sm_90a");
  EXPECT_EQ(compile_cache_info().disk_hits, 1u);
  EXPECT_EQ(compile_cache_info().corrupt_entries, 0u);
}

TEST_F(CacheTest, PrewarmForAnArchFillsTheDiskCacheOnce) {
  std::vector<PrewarmItem> items = {{"dequantize", "nvfp4", 256, 512, {1, 2, 4}, "bf16"},
                                    {"dequantize", "nvfp4", 256, 512, {8}, "bf16"},  // same kernel
                                    {"dequantize", "q8_0", 256, 512, {}, "f32"}};
  size_t calls = 0;
  const PrewarmReport r = prewarm(items, "sm_90a", [&](size_t, size_t total, const std::string&) {
    ++calls;
    EXPECT_EQ(total, 2u);
  });
  EXPECT_EQ(r.kernels, 2u);
  EXPECT_EQ(r.compiled, 2u);
  EXPECT_EQ(calls, 3u);
  clear_compile_cache();
  EXPECT_EQ(prewarm(items, "sm_90a").compiled, 0u);  // answered from disk
  EXPECT_THROW(prewarm({{"nope", "nvfp4", 1, 32, {}, "bf16"}}, "sm_90a"), BadArgument);
}

TEST(Prewarm, LinearItemsCarryActivationDtypeAndLayout) {
  PrewarmItem item{"linear", "fp8", 4096, 4096, {1, 16}, "bf16", "f16", "tile16"};
  const auto specs = prewarm_specs(item);
  ASSERT_EQ(specs.size(), 3u);  // 8 tokens (M = 1), then 8 and 16 (max_tokens = 16)
  for (const auto& s : specs) {
    EXPECT_EQ(s.kernel, "linear.mma_tile16") << s.describe();
    EXPECT_NE(s.describe().find("act=f16"), std::string::npos) << s.describe();
  }
  item.layout = "checkpoint";
  for (const auto& s : prewarm_specs(item)) EXPECT_EQ(s.kernel, "linear.mma") << s.describe();
  item.layout = "rows";
  test::expect_bad_argument([&] { prewarm_specs(item); }, "layout", {"rows"});
  item.layout = "tile16";
  item.act_dtype = "f32";
  test::expect_bad_argument([&] { prewarm_specs(item); }, "act_dtype");
}

}  // namespace
}  // namespace b12x
