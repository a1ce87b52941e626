#include "bench/suite.h"

#include <algorithm>
#include <exception>

#include "b12x/core/error.h"
#include "bench/baselines.h"

namespace b12x::bench {

Context::Context(TimerOptions timer_options)
    : timer_(stream_.get(), timer_options),
      direct_timer_(stream_.get(), TimerOptions{timer_options.warmup, timer_options.iters, false, timer_options.flush}) {}
Context::~Context() = default;

Blas& Context::blas() {
  if (!blas_) blas_ = std::make_unique<Blas>(stream_.get());
  return *blas_;
}

namespace {
// Function-local so registration from other files' static initialisers finds it constructed.
std::vector<Suite>& registry() {
  static std::vector<Suite> suites;
  return suites;
}
}  // namespace

void register_suite(Suite suite) {
  if (find_suite(suite.name)) throw Error("bench suite '" + suite.name + "' is registered twice");
  auto& r = registry();
  r.push_back(std::move(suite));
  std::stable_sort(r.begin(), r.end(), [](const Suite& a, const Suite& b) { return a.order < b.order; });
}

const std::vector<Suite>& registered_suites() { return registry(); }

const Suite* find_suite(const std::string& name) {
  for (const Suite& s : registry())
    if (s.name == name) return &s;
  return nullptr;
}

Result run_case(const Case& c, Context& ctx) {
  Result r;
  r.suite = c.suite;
  r.name = c.name;
  r.shape = c.shape;
  r.ceiling = c.ceiling;
  try {
    c.run(ctx, r);
  } catch (const std::exception& e) {
    r.check = Check::error;
    r.check_detail = e.what();
    r.time = {};
  }
  if (r.check == Check::error && r.check_detail.empty()) r.check_detail = "the case reported no check result";
  if (r.check != Check::pass) r.time = {};  // a failed case's numbers are never reported
  return r;
}

}  // namespace b12x::bench
