// NVRTC compilation and cache keys: no GPU needed.
#include <gtest/gtest.h>

#include <cstdio>
#include <iostream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/embedding/lookup.h"
#include "b12x/formats/dequantize.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "b12x/quantize/quantize.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/registry.h"
#include "runtime/env.h"
#include "runtime/selftest.h"
#include "runtime/test_hooks.h"

namespace b12x {
namespace {

TEST(Jit, CompilesSelftestForEveryDeclaredArch) {
  const KernelSpec spec = detail::selftest_spec(128);
  for (const auto& arch : spec.archs) {
    const CompiledCubin c = compile_kernel(spec, arch);
    EXPECT_GT(c.cubin.size(), 256u) << arch;
    EXPECT_NE(c.lowered_name.find("runtime_selftest_kernel"), std::string::npos) << c.lowered_name;
    EXPECT_GT(c.registers, 0) << c.log;
    EXPECT_EQ(c.spill_bytes, 0) << c.log;
    EXPECT_EQ(c.key, kernel_cache_key(spec, arch));
  }
}

TEST(Jit, UndeclaredArchIsUnsupported) {
  KernelSpec spec = detail::selftest_spec();
  spec.archs = {"sm_90a"};
  EXPECT_THROW(compile_kernel(spec, "sm_120a"), Unsupported);
}

TEST(Jit, UnknownSourceNamesThePath) {
  KernelSpec spec = detail::selftest_spec();
  spec.source = "nope/kernels/missing.cuh";
  try {
    compile_kernel(spec, "sm_90a");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope/kernels/missing.cuh"), std::string::npos) << e.what();
  }
}

TEST(Jit, KeyChangesWithEveryInput) {
  const KernelSpec base = detail::selftest_spec(256);
  const std::string k0 = kernel_cache_key(base, "sm_90a");
  EXPECT_EQ(k0.size(), 64u);
  EXPECT_EQ(k0, kernel_cache_key(base, "sm_90a"));  // deterministic
  EXPECT_NE(k0, kernel_cache_key(base, "sm_120a"));
  KernelSpec s = base;
  s.version = 2;
  EXPECT_NE(k0, kernel_cache_key(s, "sm_90a"));
  s = base;
  s.name_expression = "b12x::runtime_selftest_kernel<128>";
  EXPECT_NE(k0, kernel_cache_key(s, "sm_90a"));
  s = base;
  s.config.push_back({"extra", "1"});
  EXPECT_NE(k0, kernel_cache_key(s, "sm_90a"));
  s = base;
  s.options.push_back("-DB12X_SOMETHING=1");
  EXPECT_NE(k0, kernel_cache_key(s, "sm_90a"));
  s = base;
  s.max_registers = 64;
  EXPECT_NE(k0, kernel_cache_key(s, "sm_90a"));
}

TEST(Jit, HeaderChangeChangesKeyAndCompileErrorsShowTheLog) {
  const KernelSpec spec = detail::selftest_spec(256);
  const std::string before = kernel_cache_key(spec, "sm_90a");
  std::string header;
  for (const auto& [path, text] : embedded_sources())
    if (path == "device/common.cuh") header = text;
  ASSERT_FALSE(header.empty()) << "selftest.cuh includes device/common.cuh";
  detail::override_embedded_source("device/common.cuh", header + "\n// edited\n");
  const std::string after = kernel_cache_key(spec, "sm_90a");
  EXPECT_NE(before, after);
  detail::override_embedded_source("device/common.cuh", header + "\nthis is not C++;\n");
  try {
    compile_kernel(spec, "sm_90a");
    ADD_FAILURE() << "a broken header must not compile";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("common.cuh"), std::string::npos) << e.what();
  }
  detail::clear_embedded_source_overrides();
  EXPECT_EQ(before, kernel_cache_key(spec, "sm_90a"));
}

// The entry point a spec names: "b12x::dequantize_kernel<6, 1>" -> "dequantize_kernel" (what the
// lowered, mangled name must contain).
std::string entry_name(const std::string& name_expression) {
  std::string s = name_expression.substr(0, name_expression.find('<'));
  const size_t colon = s.rfind("::");
  return colon == std::string::npos ? s : s.substr(colon + 2);
}

// Every op family's configurations are in the registry, so the compile check below covers them all
// (the families' own tests no longer compile them).
TEST(Jit, RegistryHoldsEveryFamilysKernelSpecs) {
  const auto registered = registered_kernel_specs();
  auto id = [](const KernelSpec& s) { return s.describe() + " " + s.name_expression; };
  std::set<std::string> ids;
  for (const auto& s : registered) EXPECT_TRUE(ids.insert(id(s)).second) << "registered twice: " << id(s);
  std::vector<KernelSpec> family;
  for (auto& s : dequant::all_kernel_specs()) family.push_back(std::move(s));
  for (auto& s : tile16_kernel_specs()) family.push_back(std::move(s));
  for (auto& s : embedding::all_kernel_specs()) family.push_back(std::move(s));
  for (auto& s : linear::all_kernel_specs()) family.push_back(std::move(s));
  for (auto& s : quantize::all_kernel_specs()) family.push_back(std::move(s));
  for (const auto& s : family) {
    EXPECT_TRUE(ids.count(id(s))) << "not registered: " << id(s);
    EXPECT_GT(s.max_registers, 0) << s.describe() << ": every op kernel declares its register budget";
  }
  EXPECT_EQ(registered.size(), family.size() + 1);  // + the runtime selftest
  EXPECT_EQ(entry_name("b12x::dequantize_kernel<6, 1>"), "dequantize_kernel");
}

// CI's compile check, the one place every registered configuration is compiled: every declared
// architecture, no compile error, the spec's entry point, no spills, no serialized wgmma, registers
// within the declared limit. One line per configuration: registers and compile time.
// B12X_COMPILE_ONLY (a substring of the configuration's description, e.g. "linear.mma_tile16{") narrows a
// local run to the kernels a change touched; CI leaves it unset.
TEST(Jit, EveryRegisteredKernelCompiles) {
  const auto specs = registered_kernel_specs();
  ASSERT_FALSE(specs.empty());
  const std::string only = detail::env_string("B12X_COMPILE_ONLY");
  size_t compiled = 0;
  for (const auto& spec : specs) {
    if (!only.empty() && spec.describe().find(only) == std::string::npos) continue;
    for (const auto& arch : spec.archs) {
      SCOPED_TRACE(spec.describe() + " " + arch);
      const CompiledCubin c = compile_kernel(spec, arch);
      EXPECT_FALSE(c.cubin.empty());
      EXPECT_NE(c.lowered_name.find(entry_name(spec.name_expression)), std::string::npos) << c.lowered_name;
      EXPECT_EQ(c.spill_bytes, 0) << c.log;
      EXPECT_FALSE(c.wgmma_serialized) << c.log;  // wgmma kernels: ptxas kept their async pipeline
      EXPECT_GT(c.registers, 0) << c.log;
      if (spec.max_registers > 0) {
        EXPECT_LE(c.registers, spec.max_registers) << c.log;
      }
      std::printf("[compile] %-80s %-8s %3d registers, %.3f s\n", spec.describe().c_str(), arch.c_str(), c.registers,
                  c.seconds);
      ++compiled;
    }
  }
  std::cout << "compiled " << compiled << " kernel configurations\n";
}

}  // namespace
}  // namespace b12x
