#include "runtime/disk_cache.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/env.h"

namespace b12x::detail {

namespace {
constexpr char kMagic[8] = {'B', '1', '2', 'X', 'C', 'U', 'B', 'N'};
constexpr uint32_t kLayoutVersion = 1;

std::string digest(const std::string& name, const std::vector<char>& cubin) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, name.data(), name.size());
  EVP_DigestUpdate(ctx, cubin.data(), cubin.size());
  EVP_DigestFinal_ex(ctx, d, &len);
  EVP_MD_CTX_free(ctx);
  return std::string(reinterpret_cast<char*>(d), len);
}

template <class T>
bool read_pod(std::istream& in, T* v) {
  return static_cast<bool>(in.read(reinterpret_cast<char*>(v), sizeof(T)));
}
}  // namespace

std::string disk_cache_path(const std::string& dir, const std::string& key) {
  return dir + "/" + key.substr(0, 2) + "/" + key + ".cubin";
}

DiskLookup disk_cache_load(const std::string& dir, const std::string& key, DiskEntry* out) {
  const std::string path = disk_cache_path(dir, key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return DiskLookup::missing;
  char magic[8];
  uint32_t version = 0, name_len = 0;
  uint64_t cubin_len = 0;
  char hash[32];
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0 || !read_pod(in, &version) ||
      version != kLayoutVersion || !read_pod(in, &name_len) || !read_pod(in, &cubin_len) || !in.read(hash, 32) ||
      name_len > 4096 || cubin_len > (1ull << 30))
    return DiskLookup::corrupt;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size != 8 + 4 + 4 + 8 + 32 + name_len + cubin_len) return DiskLookup::corrupt;
  out->lowered_name.resize(name_len);
  out->cubin.resize(cubin_len);
  if (!in.read(out->lowered_name.data(), name_len) || !in.read(out->cubin.data(), static_cast<std::streamsize>(cubin_len)))
    return DiskLookup::corrupt;
  if (digest(out->lowered_name, out->cubin) != std::string(hash, 32)) return DiskLookup::corrupt;
  return DiskLookup::hit;
}

void disk_cache_store(const std::string& dir, const std::string& key, const DiskEntry& entry) {
  const std::string path = disk_cache_path(dir, key);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  static std::atomic<uint64_t> counter{0};
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++) + "." +
                          std::to_string(std::random_device{}());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    const uint32_t name_len = static_cast<uint32_t>(entry.lowered_name.size());
    const uint64_t cubin_len = entry.cubin.size();
    const std::string hash = digest(entry.lowered_name, entry.cubin);
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&kLayoutVersion), 4);
    out.write(reinterpret_cast<const char*>(&name_len), 4);
    out.write(reinterpret_cast<const char*>(&cubin_len), 8);
    out.write(hash.data(), 32);
    out.write(entry.lowered_name.data(), name_len);
    out.write(entry.cubin.data(), static_cast<std::streamsize>(cubin_len));
    if (!out.flush()) {
      log(LogLevel::warn, "cannot write compile cache entry " + tmp + "; continuing without it");
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    log(LogLevel::warn, "cannot publish compile cache entry " + path + ": " + ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

}  // namespace b12x::detail
