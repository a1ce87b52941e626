#include "b12x/runtime/freeze.h"

#include <atomic>
#include <mutex>

namespace b12x {

namespace {
std::atomic<bool> g_frozen{false};
std::mutex g_mu;
std::string g_reason;
}  // namespace

void freeze_kernel_resolution(const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_reason = reason.empty() ? "frozen" : reason;
  g_frozen.store(true);
}

void unfreeze_kernel_resolution() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_frozen.store(false);
  g_reason.clear();
}

bool kernel_resolution_frozen() { return g_frozen.load(); }

std::string kernel_resolution_freeze_reason() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_reason;
}

}  // namespace b12x
