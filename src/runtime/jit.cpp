// NVRTC compilation and cache keys.
#include "b12x/runtime/jit.h"

#include <nvrtc.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>

#include "b12x/core/error.h"
#include "runtime/env.h"

namespace b12x {

namespace detail {
const std::vector<std::pair<std::string, std::string>>& embedded_source_table();  // generated
}

namespace {

void nvrtc_check(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS) throw CudaError(std::string(call) + " failed: " + nvrtcGetErrorString(r));
}

// The generated table plus test overrides (detail::override_embedded_source).
std::mutex g_sources_mu;
std::map<std::string, std::string> g_overrides;
std::map<std::string, std::string> g_fingerprints;

using SourceTable = std::vector<std::pair<std::string, std::string>>;
SourceTable effective_sources() {
  SourceTable table = detail::embedded_source_table();
  std::lock_guard<std::mutex> lock(g_sources_mu);
  for (const auto& [path, text] : g_overrides) {
    bool replaced = false;
    for (auto& [p, t] : table)
      if (p == path) t = text, replaced = true;
    if (!replaced) table.emplace_back(path, text);
  }
  return table;
}

std::string embedded(const SourceTable& table, const std::string& path) {
  for (const auto& [p, text] : table)
    if (p == path) return text;
  throw Error("kernel source '" + path + "' is not embedded in the library (expected under src/<family>/kernels/ "
              "or src/device/)");
}

// Transitive closure of `#include "..."` lines that name embedded files, in sorted order.
void include_closure(const SourceTable& table, const std::string& path, std::set<std::string>& seen) {
  if (!seen.insert(path).second) return;
  static const std::regex kInclude(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::istringstream in(embedded(table, path));
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, kInclude)) continue;
    const std::string name = m[1];
    for (const auto& [p, text] : table)
      if (p == name) include_closure(table, name, seen);
  }
}

std::string sha256_hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), data.data(), data.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1)
    throw Error("SHA-256 (OpenSSL EVP) failed");
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

// Hash of a source and everything it includes; sources are constants of the binary, so memoize.
std::string source_fingerprint(const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(g_sources_mu);
    auto it = g_fingerprints.find(path);
    if (it != g_fingerprints.end()) return it->second;
  }
  const SourceTable table = effective_sources();
  std::set<std::string> closure;
  include_closure(table, path, closure);
  std::string all;
  for (const auto& p : closure) {
    const std::string text = embedded(table, p);
    all += p + "\n" + std::to_string(text.size()) + "\n" + text + "\n";
  }
  const std::string fp = sha256_hex(all);
  std::lock_guard<std::mutex> lock(g_sources_mu);
  return g_fingerprints[path] = fp;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtc_check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::vector<std::string> cuda_include_dirs() {
  std::string list = detail::env_string("B12X_CUDA_INCLUDE_DIR");
  if (list.empty()) list = B12X_CUDA_INCLUDE_DIR;
  std::vector<std::string> dirs;
  std::istringstream in(list);
  for (std::string d; std::getline(in, d, ':');)
    if (!d.empty()) dirs.push_back(d);
  return dirs;
}

std::vector<std::string> compile_options(const KernelSpec& spec, const std::string& arch) {
  std::vector<std::string> opts = {"-arch=" + arch, "-std=c++17", "-default-device", "--ptxas-options=-v",
                                   "-lineinfo", "-DB12X_NVRTC=1"};
  for (const auto& d : cuda_include_dirs()) opts.push_back("-I" + d);
  if (spec.max_registers > 0) opts.push_back("-maxrregcount=" + std::to_string(spec.max_registers));
  opts.insert(opts.end(), spec.options.begin(), spec.options.end());
  return opts;
}

int parse_ptxas_int(const std::string& log, const std::regex& re) {
  int total = 0;
  for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) total += std::stoi((*it)[1]);
  return total;
}

}  // namespace

std::string KernelSpec::describe() const {
  std::string s = kernel + "{";
  for (size_t i = 0; i < config.size(); ++i) s += (i ? ", " : "") + config[i].first + "=" + config[i].second;
  return s + "}";
}

const std::vector<std::pair<std::string, std::string>>& embedded_sources() { return detail::embedded_source_table(); }

namespace detail {
void override_embedded_source(const std::string& path, const std::string& text) {
  std::lock_guard<std::mutex> lock(g_sources_mu);
  g_overrides[path] = text;
  g_fingerprints.clear();
}
void clear_embedded_source_overrides() {
  std::lock_guard<std::mutex> lock(g_sources_mu);
  g_overrides.clear();
  g_fingerprints.clear();
}
}  // namespace detail

std::string kernel_cache_key(const KernelSpec& spec, const std::string& arch) {
  std::ostringstream payload;
  payload << "b12x-kernel-key/1\n"
          << "nvrtc " << nvrtc_version() << "\n"
          << "arch " << arch << "\n"
          << "kernel " << spec.kernel << " v" << spec.version << "\n"
          << "entry " << spec.name_expression << "\n"
          << "source " << spec.source << " " << source_fingerprint(spec.source) << "\n";
  for (const auto& [k, v] : spec.config) payload << "config " << k << "=" << v << "\n";
  for (const auto& o : compile_options(spec, arch)) payload << "option " << o << "\n";
  return sha256_hex(payload.str());
}

CompiledCubin compile_kernel(const KernelSpec& spec, const std::string& arch) {
  if (std::find(spec.archs.begin(), spec.archs.end(), arch) == spec.archs.end()) {
    std::string declared;
    for (const auto& a : spec.archs) declared += (declared.empty() ? "" : ", ") + a;
    fail_unsupported("kernel ", spec.describe(), " is not built for ", arch, " (it declares: ", declared, ")");
  }
  const auto start = std::chrono::steady_clock::now();
  CompiledCubin out;
  out.key = kernel_cache_key(spec, arch);

  const SourceTable table = effective_sources();
  embedded(table, spec.source);  // a clear error when the source is unknown
  std::vector<const char*> header_texts, header_names;
  for (const auto& [p, text] : table) {
    header_names.push_back(p.c_str());
    header_texts.push_back(text.c_str());
  }
  const std::string source = "#include \"" + spec.source + "\"\n";
  nvrtcProgram prog;
  nvrtc_check(nvrtcCreateProgram(&prog, source.c_str(), (spec.kernel + ".cu").c_str(),
                                 static_cast<int>(header_texts.size()), header_texts.data(), header_names.data()),
              "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
  nvrtc_check(nvrtcAddNameExpression(prog, spec.name_expression.c_str()), "nvrtcAddNameExpression");

  const auto opts = compile_options(spec, arch);
  std::vector<const char*> opt_ptrs;
  for (const auto& o : opts) opt_ptrs.push_back(o.c_str());
  const nvrtcResult result = nvrtcCompileProgram(prog, static_cast<int>(opt_ptrs.size()), opt_ptrs.data());

  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  out.log.resize(log_size);
  if (log_size) nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && (out.log.back() == '\0' || out.log.back() == '\n')) out.log.pop_back();
  if (result != NVRTC_SUCCESS)
    throw Error("NVRTC failed to compile " + spec.describe() + " for " + arch + " (" + nvrtcGetErrorString(result) +
                "):\n" + out.log);

  const char* lowered = nullptr;
  nvrtc_check(nvrtcGetLoweredName(prog, spec.name_expression.c_str(), &lowered), "nvrtcGetLoweredName");
  out.lowered_name = lowered;
  size_t cubin_size = 0;
  nvrtc_check(nvrtcGetCUBINSize(prog, &cubin_size), "nvrtcGetCUBINSize");
  out.cubin.resize(cubin_size);
  nvrtc_check(nvrtcGetCUBIN(prog, out.cubin.data()), "nvrtcGetCUBIN");

  static const std::regex kRegisters(R"(Used (\d+) registers)");
  static const std::regex kSpillStores(R"((\d+) bytes spill stores)");
  static const std::regex kSpillLoads(R"((\d+) bytes spill loads)");
  std::smatch m;
  if (std::regex_search(out.log, m, kRegisters)) out.registers = std::stoi(m[1]);
  out.spill_bytes = parse_ptxas_int(out.log, kSpillStores) + parse_ptxas_int(out.log, kSpillLoads);
  out.wgmma_serialized = out.log.find("wgmma.mma_async instructions are serialized") != std::string::npos;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace b12x
