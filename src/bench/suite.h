// The benchmark case registry. A suite ("baseline", "dequantize", later "linear", "quant",
// "embedding", "moe", "attention") lives in one file that registers itself with a static
// SuiteRegistrar; its factory turns shapes into cases without touching the GPU (so --list works
// anywhere), and each case's run function checks correctness first and times only what passed.
//
//   namespace { const SuiteRegistrar kLinear({.name = "linear", ..., .cases = make_cases}); }
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "bench/report.h"
#include "bench/shape.h"

namespace b12x::bench {

class Blas;

// What a running case gets: the stream, the timer, and cuBLAS handles created on first use.
class Context {
 public:
  explicit Context(TimerOptions timer_options);
  ~Context();
  cudaStream_t stream() const { return stream_.get(); }
  Timer& timer() { return timer_; }
  // Always direct launches: the copy-bandwidth ceiling must not be timed as a graph memcpy node
  // (captured cudaMemcpyAsync runs on the copy engines: 2.77 vs 4.24 TB/s on the H200, 2026-12-02).
  Timer& direct_timer() { return direct_timer_; }
  Blas& blas();

 private:
  Stream stream_;
  Timer timer_;
  Timer direct_timer_;
  std::unique_ptr<Blas> blas_;
};

struct Case {
  std::string suite, name, shape;  // id "suite/name/shape" is what --filter and --list see
  Ceiling ceiling = Ceiling::none;  // baseline cases that define the run's ceilings
  // Fills r (identity pre-filled): path, bytes, flops, check + detail; then, only if the check
  // passed, time (ctx.timer()) and optionally a baseline time. Throwing makes an ERROR row.
  std::function<void(Context& ctx, Result& r)> run;
  std::string id() const { return suite + "/" + name + "/" + shape; }
};

struct Suite {
  std::string name, description;
  int order = 100;            // run and list order; baseline (0) first: every % column needs it
  bool quick = false;         // part of the default quick suite
  bool takes_shapes = false;  // --shapes replaces the suite's default shapes
  std::string shape_use;      // how it reads MxNxK, e.g. "N and K (M is ignored)"
  std::function<std::vector<Case>(const std::vector<Shape>& shapes)> cases;  // shapes empty: defaults
};

void register_suite(Suite suite);
const std::vector<Suite>& registered_suites();  // sorted by order
const Suite* find_suite(const std::string& name);

struct SuiteRegistrar {
  explicit SuiteRegistrar(Suite suite) { register_suite(std::move(suite)); }
};

// Runs one case; an exception becomes an ERROR row carrying its message.
Result run_case(const Case& c, Context& ctx);

}  // namespace b12x::bench
