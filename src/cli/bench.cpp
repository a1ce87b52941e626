// b12x bench: run the registered benchmark suites (src/bench, src/<family>/bench_*.cpp), checking each
// case before timing it, and report a table on stdout (plus --json, --csv, --plot). Progress goes to
// stderr, one line per case. Without a CUDA device it says so, times the CPU reference on a small
// case and exits 0, so CI exercises the command too.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <set>

#include "b12x/b12x.h"
#include "b12x/runtime/device.h"
#include "bench/report.h"
#include "bench/shape.h"
#include "bench/suite.h"
#include "cli/commands.h"
#include "runtime/cuda_api.h"

extern char** environ;

namespace b12x::cli {
namespace {

using namespace b12x::bench;

struct BenchOptions {
  std::vector<std::string> suites;
  std::string filter, shapes, json, csv, plot;
  int iters = 50, warmup = 10;
  bool graph = false, list = false;
  std::string l2_flush = "rotate";
};

L2Flush parse_l2_flush(const std::string& s) {
  if (s == "write") return L2Flush::write;
  if (s == "clean") return L2Flush::clean;
  if (s == "rotate") return L2Flush::rotate;
  fail_arg("--l2-flush", "must be write, clean or rotate, got '", s, "'");
}

// ---------------------------------------------------------------------------------------------
// Selecting cases (no GPU needed: --list and option errors work anywhere)

std::string suite_names() {
  std::string s;
  for (const Suite& suite : registered_suites()) s += (s.empty() ? "" : ", ") + suite.name;
  return s;
}

std::vector<const Suite*> select_suites(const std::vector<std::string>& names, bool list) {
  std::vector<std::string> wanted = names;
  if (wanted.empty()) wanted = {list ? "all" : "quick"};
  std::set<std::string> picked;
  for (const std::string& name : wanted) {
    if (name == "quick" || name == "all") {
      for (const Suite& s : registered_suites())
        if (name == "all" || s.quick) picked.insert(s.name);
    } else {
      B12X_CHECK_ARG(find_suite(name) != nullptr, "--suite", "unknown suite '", name, "'; available: ", suite_names(),
                     " (or quick, all)");
      picked.insert(name);
    }
  }
  std::vector<const Suite*> out;  // registry order: baseline first
  for (const Suite& s : registered_suites())
    if (picked.count(s.name)) out.push_back(&s);
  return out;
}

std::vector<Case> select_cases(const BenchOptions& o, const std::vector<const Suite*>& suites) {
  const std::vector<Shape> shapes = o.shapes.empty() ? std::vector<Shape>{} : parse_shapes(o.shapes, "--shapes");
  if (!shapes.empty()) {
    const bool any = std::any_of(suites.begin(), suites.end(), [](const Suite* s) { return s->takes_shapes; });
    B12X_CHECK_ARG(any, "--shapes", "none of the selected suites takes shapes");
  }
  std::regex re;
  if (!o.filter.empty()) {
    try {
      re = std::regex(o.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      fail_arg("--filter", "'", o.filter, "' is not a valid regular expression: ", e.what());
    }
  }
  std::vector<Case> cases;
  for (const Suite* s : suites)
    for (Case& c : s->cases(s->takes_shapes ? shapes : std::vector<Shape>{}))
      if (o.filter.empty() || std::regex_search(c.id(), re)) cases.push_back(std::move(c));
  B12X_CHECK_ARG(!cases.empty(), "--filter", "'", o.filter,
                 "' matches no case of the selected suites; `b12x bench --list` shows the case ids");
  return cases;
}

void print_list(const std::vector<const Suite*>& suites, const std::vector<Case>& cases) {
  for (const Suite* s : suites) {
    std::cout << s->name << (s->quick ? " (quick)" : "") << ": " << s->description << "\n";
    if (s->takes_shapes) std::cout << "  --shapes MxNxK: " << s->shape_use << "\n";
    for (const Case& c : cases)
      if (c.suite == s->name) std::cout << "  " << c.id() << "\n";
  }
  std::cout << cases.size() << " cases. Default (quick): ";
  bool first = true;
  for (const Suite& s : registered_suites())
    if (s.quick) std::cout << (first ? "" : " + ") << s.name, first = false;
  std::cout << ". --filter REGEX matches the ids above.\n";
}

// ---------------------------------------------------------------------------------------------
// Without a GPU: the CPU reference on a small case, so the command still does real work.

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

void run_cpu_reference() {
  std::cout << "no CUDA device found: running the CPU reference on a small case instead\n";
  const int64_t m = 4, n = 256, k = 512;
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostTensor x(DType::bf16, {m, k}), w(DType::f32, {n, k});
  for (int64_t i = 0; i < m * k; ++i) store_f32(x.view().data, DType::bf16, i, normal(rng));
  for (int64_t i = 0; i < n * k; ++i) w.ptr<float>()[i] = normal(rng);
  const PackedWeight p = quantize_weight(Format::nvfp4, w.view());
  HostTensor y(DType::f32, {m, n}), decoded(DType::f32, {n, k});

  LinearRefArgs args;
  args.x = x.view();
  args.w = p.view();
  args.act = ActMode::a16;
  args.y = y.view();
  auto t0 = std::chrono::steady_clock::now();
  reference_linear(args);
  const double linear_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  dequantize_weight(p.view(), decoded.view(), true);
  const double dequant_ms = ms_since(t0);

  char line[256];
  std::snprintf(line, sizeof line,
                "cpu reference: linear nvfp4 weights, a16 (bf16 x), M=%lld N=%lld K=%lld -> f32: %.3f ms (y[0][0] = %.6g)\n",
                static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), linear_ms,
                y.ptr<float>()[0]);
  std::cout << line;
  std::snprintf(line, sizeof line, "cpu reference: dequantize nvfp4 %lldx%lld -> f32: %.3f ms\n",
                static_cast<long long>(n), static_cast<long long>(k), dequant_ms);
  std::cout << line;
}

// ---------------------------------------------------------------------------------------------
// On the GPU

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Peak clock in MHz as the runtime reports it; 0 when the attribute is not available (not an error
// worth stopping the run for, and such failures are not sticky).
double clock_mhz(cudaDeviceAttr attr, int device) {
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, attr, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return khz / 1000.0;
}

RunInfo run_info(const Timer& timer) {
  const DeviceInfo& d = device_info();
  RunInfo i;
  i.version = B12X_VERSION_STRING;
  i.date = utc_now();
  i.device = d.name;
  i.arch = d.arch;
  i.sm_count = d.sm_count;
  i.sm_clock_mhz = clock_mhz(cudaDevAttrClockRate, d.ordinal);
  i.mem_clock_mhz = clock_mhz(cudaDevAttrMemoryClockRate, d.ordinal);
  i.l2_bytes = d.l2_bytes;
  i.memory_bytes = d.global_mem_bytes;
  i.mode = timer.mode();
  i.warmup = timer.options().warmup;
  i.iters = timer.options().iters;
  i.flush_bytes = timer.flush_bytes();
  i.flush = l2_flush_name(timer.options().flush);
  i.method = timer.method();
  return i;
}

std::string progress_summary(const Result& r) {
  if (!r.valid()) return std::string(check_name(r.check)) + ": " + r.check_detail;
  std::string s = "PASS  " + fmt(r.time.median_us, 1) + " us";
  if (r.bytes > 0) s += "  " + fmt(r.bytes / r.time.median_us / 1e6, 3) + " TB/s";
  if (r.flops > 0) s += "  " + fmt(r.flops / r.time.median_us / 1e6, 1) + " TFLOP/s";
  return s;
}

void write_file(const std::string& path, const std::string& text, const std::string& option) {
  std::ofstream out(path, std::ios::binary);
  B12X_CHECK_ARG(out.good(), option, "cannot open '", path, "' for writing");
  out << text;
  out.close();
  B12X_CHECK_ARG(out.good(), option, "writing '", path, "' failed");
}

std::string plot_script() {
  namespace fs = std::filesystem;
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("B12X_PLOT_SCRIPT")) candidates.emplace_back(env);
  candidates.push_back(fs::path(__FILE__).parent_path().parent_path().parent_path() / "scripts/bench_plot.py");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path() / "scripts/bench_plot.py");
  candidates.push_back(fs::current_path(ec) / "scripts/bench_plot.py");
  for (const auto& c : candidates)
    if (fs::exists(c, ec)) return c.string();
  fail_arg("--plot", "cannot find scripts/bench_plot.py next to the source tree, the build or the current "
                     "directory; set B12X_PLOT_SCRIPT");
}

// python3 scripts/bench_plot.py JSON PNG, without a shell (paths need no quoting).
void run_plot(const std::string& json_path, const std::string& png_path) {
  const std::string script = plot_script();
  std::vector<std::string> args = {"python3", script, json_path, png_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ);
  B12X_CHECK_ARG(err == 0, "--plot", "cannot start python3: ", std::strerror(err));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    B12X_CHECK_ARG(errno == EINTR, "--plot", "waiting for python3 failed: ", std::strerror(errno));
  }
  B12X_CHECK_ARG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "--plot", script, " failed (exit status ",
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, "); see its message above");
}

void run_on_gpu(const BenchOptions& o, const std::vector<Case>& selected) {
  Context ctx(TimerOptions{o.warmup, o.iters, o.graph, parse_l2_flush(o.l2_flush)});
  const RunInfo info = run_info(ctx.timer());
  std::cout << header_text(info) << std::flush;
  if (const char* t = std::getenv("B12X_TIMING"); t && *t && std::string(t) != "0")
    std::cerr << "b12x bench: warning: B12X_TIMING is set; every launch is synchronized and logged, so b12x "
                 "kernel times include that overhead\n";

  // The % columns need the ceilings of this run, so the baseline ceiling cases always run; those the
  // selection left out run first and stay out of the table unless they fail.
  std::vector<std::pair<Case, bool>> plan;  // (case, shown)
  std::set<std::string> ids;
  for (const Case& c : selected) ids.insert(c.id());
  if (const Suite* base = find_suite("baseline"))
    for (Case& c : base->cases({}))
      if (c.ceiling != Ceiling::none && !ids.count(c.id())) plan.emplace_back(std::move(c), false);
  for (const Case& c : selected) plan.emplace_back(c, true);

  std::vector<Result> all, shown;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& [c, visible] = plan[i];
    std::fprintf(stderr, "[%zu/%zu] %s%s ...", i + 1, plan.size(), c.id().c_str(), visible ? "" : " (ceiling)");
    std::fflush(stderr);
    const auto t0 = std::chrono::steady_clock::now();
    Result r = run_case(c, ctx);
    std::fprintf(stderr, " %s (%.1f s)\n", progress_summary(r).c_str(), ms_since(t0) / 1000.0);
    if (visible || r.check != Check::pass) shown.push_back(r);
    all.push_back(std::move(r));
  }
  std::fprintf(stderr, "%zu cases in %.1f s\n", plan.size(), ms_since(start) / 1000.0);

  const Ceilings ceilings = ceilings_from(all);
  for (Result& r : shown) derive(r, ceilings);
  std::cout << ceilings_text(ceilings) << "\n" << format_table(shown) << std::flush;

  if (!o.csv.empty()) write_file(o.csv, format_csv(shown), "--csv");
  std::string json_path = o.json, temp_json;
  if (json_path.empty() && !o.plot.empty()) {
    temp_json = (std::filesystem::temp_directory_path() / ("b12x-bench-" + std::to_string(::getpid()) + ".json")).string();
    json_path = temp_json;
  }
  if (!json_path.empty())
    write_file(json_path, report_json(info, ceilings, shown).dump(2) + "\n", o.json.empty() ? "--plot" : "--json");
  if (!o.plot.empty()) {
    try {
      run_plot(json_path, o.plot);
    } catch (...) {
      if (!temp_json.empty()) std::filesystem::remove(temp_json);
      throw;
    }
    if (!temp_json.empty()) std::filesystem::remove(temp_json);
  }

  const size_t failed = std::count_if(shown.begin(), shown.end(), [](const Result& r) { return r.check != Check::pass; });
  if (failed)
    throw Error(detail::concat(failed, " of ", plan.size(), " bench cases failed their correctness check or raised "
                                                           "an error (FAIL / ERROR rows above); their numbers are not valid"));
}

void run_bench(const BenchOptions& o) {
  // Every option is checked before anything runs, with or without a GPU.
  B12X_CHECK_ARG(o.iters >= 1, "--iters", "must be at least 1, got ", o.iters);
  B12X_CHECK_ARG(o.warmup >= 0, "--warmup", "must be 0 or more, got ", o.warmup);
  parse_l2_flush(o.l2_flush);
  const auto suites = select_suites(o.suites, o.list);
  const auto cases = select_cases(o, suites);
  if (o.list) return print_list(suites, cases);
  if (!cuda_available()) {
    if (!o.json.empty() || !o.csv.empty() || !o.plot.empty())
      std::cerr << "b12x bench: no CUDA device, nothing measured: --json / --csv / --plot files are not written\n";
    return run_cpu_reference();
  }
  run_on_gpu(o, cases);
}

}  // namespace

void register_bench(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand(
      "bench", "check and time b12x kernels against the copy bandwidth, cuBLAS and cuBLASLt measured in the same run");
  cmd->add_option("--suite", o->suites,
                  "suite to run, repeatable or comma-separated: quick (default: the suites marked quick in --list), all, or a "
                  "name from --list")
      ->delimiter(',');
  cmd->add_option("--filter", o->filter, "regular expression searched in each case id suite/case/shape (see --list)");
  cmd->add_option("--shapes", o->shapes, "MxNxK[,MxNxK...]: replaces the default shapes of suites that take shapes");
  cmd->add_option("--iters", o->iters, "timed repetitions per case")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed calls before timing")->capture_default_str();
  cmd->add_flag("--graph", o->graph, "capture each call into a CUDA graph once and time graph launches");
  cmd->add_option("--l2-flush", o->l2_flush,
                  "how each timed call finds a cold L2: rotate (no flush: back-to-back calls, each on the next of "
                  "enough operand copies to stream 2x L2 between two uses of one; the linear suites rotate, the "
                  "other cases fall back to clean), clean (a read of 2x L2 before each call: clean lines) or "
                  "write (a memset of 2x L2 before each call; its dirty lines are written back during the timed "
                  "call: the default before 2026-12-07)")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the results (with raw samples) as JSON");
  cmd->add_option("--csv", o->csv, "write the results as CSV");
  cmd->add_option("--plot", o->plot, "write a roofline chart (PNG) with scripts/bench_plot.py (python3 + matplotlib)");
  cmd->add_flag("--list", o->list, "list the suites and case ids (all suites unless --suite is given) and exit");
  cmd->callback([o] { run_bench(*o); });
}

}  // namespace b12x::cli
