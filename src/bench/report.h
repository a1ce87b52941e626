// One benchmark result row and its renderings: the stdout table, CSV and JSON. Pure host code,
// header-only, so the unit tests check the formatting without a GPU.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/stats.h"

namespace b12x::bench {

// The correctness gate every case passes before it is timed. Only `pass` rows carry valid numbers.
enum class Check { pass, fail, error };  // error: the case threw (message in detail)

inline const char* check_name(Check c) { return c == Check::pass ? "PASS" : c == Check::fail ? "FAIL" : "ERROR"; }

// Which ceiling a baseline row measures (the % columns of every other row divide by these).
enum class Ceiling { none, copy_bandwidth, bf16_peak, fp8_peak };

struct Ceilings {
  double copy_tbps = kNaN;    // device-to-device copy, bytes read + written
  double bf16_tflops = kNaN;  // cuBLAS BF16 GEMM 8192^3
  double fp8_tflops = kNaN;   // cuBLASLt FP8 E4M3 GEMM 8192^3
};

struct Result {
  std::string suite, name, shape;
  std::string path;  // kernel / plan choice, e.g. "formats.dequantize{format=nvfp4, out=bf16} grid=..."
  TimeStats time;
  double bytes = 0;  // fewest bytes one call must move through device memory
  double flops = 0;  // per call (0: not an arithmetic op)
  std::string baseline;          // e.g. "cuBLAS bf16": the same case through a library
  double baseline_us = kNaN;     // its median time, measured in the same run
  Check check = Check::error;
  std::string check_detail;      // what was compared, or why it failed
  Ceiling ceiling = Ceiling::none;

  // Derived by derive() from the median time and the run's ceilings.
  double tbps = kNaN, tflops = kNaN, pct_copy = kNaN, pct_bf16 = kNaN;
  double ratio = kNaN;  // baseline time / this time: > 1 means faster than the baseline

  std::string id() const { return suite + "/" + name + "/" + shape; }
  bool valid() const { return check == Check::pass && time.valid(); }
};

// Fills the derived columns. Rows that failed their check get none (their numbers are not valid).
inline void derive(Result& r, const Ceilings& c) {
  r.tbps = r.tflops = r.pct_copy = r.pct_bf16 = r.ratio = kNaN;
  if (!r.valid() || !(r.time.median_us > 0)) return;
  const double us = r.time.median_us;
  if (r.bytes > 0) r.tbps = r.bytes / us / 1e6;  // bytes / (us * 1e-6 s) / 1e12
  if (r.flops > 0) r.tflops = r.flops / us / 1e6;
  if (r.bytes > 0 && c.copy_tbps > 0) r.pct_copy = 100.0 * r.tbps / c.copy_tbps;
  if (r.flops > 0 && c.bf16_tflops > 0) r.pct_bf16 = 100.0 * r.tflops / c.bf16_tflops;
  if (r.baseline_us > 0) r.ratio = r.baseline_us / us;
}

// Ceilings from the baseline rows that passed their checks.
inline Ceilings ceilings_from(const std::vector<Result>& rows) {
  Ceilings c;
  for (const Result& r : rows) {
    if (!r.valid() || r.ceiling == Ceiling::none) continue;
    const double us = r.time.median_us;
    if (r.ceiling == Ceiling::copy_bandwidth && r.bytes > 0) c.copy_tbps = r.bytes / us / 1e6;
    if (r.ceiling == Ceiling::bf16_peak && r.flops > 0) c.bf16_tflops = r.flops / us / 1e6;
    if (r.ceiling == Ceiling::fp8_peak && r.flops > 0) c.fp8_tflops = r.flops / us / 1e6;
  }
  return c;
}

// What the header says about the run.
struct RunInfo {
  std::string version, date;  // date: ISO 8601 UTC
  std::string device, arch;
  int sm_count = 0;
  double sm_clock_mhz = 0, mem_clock_mhz = 0;  // peak clocks as the runtime reports them (0: unknown)
  size_t l2_bytes = 0, memory_bytes = 0;
  std::string mode;  // "events" (direct launches) or "graph" (CUDA-graph replay)
  int warmup = 0, iters = 0;
  size_t flush_bytes = 0;  // L2 flush buffer (0: not flushed)
  std::string flush;       // how: "write" (memset), "clean" (a read) or "rotate" (operand copies), bench::L2Flush
  std::string method;      // one sentence describing the timing method
};

// "-" for values that do not apply or are not valid.
inline std::string fmt(double v, int decimals) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

inline std::string mib(size_t bytes) { return fmt(static_cast<double>(bytes) / (1024.0 * 1024.0), 0) + " MiB"; }

inline std::string header_text(const RunInfo& i) {
  std::ostringstream os;
  os << "# b12x bench " << i.version << "  " << i.date << "\n";
  os << "# device: " << i.device << " (" << i.arch << "), " << i.sm_count << " SMs";
  if (i.sm_clock_mhz > 0) os << ", max SM clock " << fmt(i.sm_clock_mhz, 0) << " MHz";
  if (i.mem_clock_mhz > 0) os << ", memory clock " << fmt(i.mem_clock_mhz, 0) << " MHz";
  os << ", L2 " << mib(i.l2_bytes) << ", memory " << fmt(static_cast<double>(i.memory_bytes) / (1u << 30), 1) << " GiB\n";
  os << "# timing: " << i.method << "\n";
  return os.str();
}

inline std::string ceilings_text(const Ceilings& c) {
  return "# ceilings measured in this run: copy " + fmt(c.copy_tbps, 2) + " TB/s (read + write), cuBLAS BF16 GEMM " +
         fmt(c.bf16_tflops, 0) + " TFLOP/s, cuBLASLt FP8 GEMM " + fmt(c.fp8_tflops, 0) + " TFLOP/s\n";
}

inline std::string ratio_text(const Result& r) {
  if (!std::isfinite(r.ratio)) return "-";
  return fmt(r.ratio, 2) + "x " + r.baseline;
}

// The stdout table: one row per result, columns padded to their widest cell, text left-aligned
// and numbers right-aligned. Failed rows show "-" for every number; their details follow the table.
inline std::string format_table(const std::vector<Result>& rows) {
  const std::vector<std::string> head = {"case",  "shape",   "median us", "min us", "p10 us", "p90 us", "MB",
                                         "GFLOP", "TB/s",    "TFLOP/s",   "%copy",  "%bf16",  "vs baseline",
                                         "check", "timing", "path"};
  const std::vector<bool> numeric = {false, false, true, true, true, true, true,
                                     true,  true,  true, true, true, false, false, false, false};
  std::vector<std::vector<std::string>> cells;
  for (const Result& r : rows) {
    const bool ok = r.valid();
    auto num = [&](double v, int d) { return ok ? fmt(v, d) : std::string("-"); };
    cells.push_back({r.suite + "/" + r.name, r.shape, num(r.time.median_us, 1), num(r.time.min_us, 1),
                     num(r.time.p10_us, 1), num(r.time.p90_us, 1), num(r.bytes / 1e6, 1),
                     r.flops > 0 ? num(r.flops / 1e9, 1) : "-", num(r.tbps, 3), num(r.tflops, 1),
                     num(r.pct_copy, 1), num(r.pct_bf16, 1), ok ? ratio_text(r) : "-", check_name(r.check),
                     ok ? r.time.timing : "-", r.path});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = head[c].size();
    for (const auto& row : cells) width[c] = std::max(width[c], row[c].size());
  }
  std::ostringstream os;
  auto line = [&](const std::vector<std::string>& row) {
    std::string out;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool last = c + 1 == row.size();
      out += numeric[c] ? pad + row[c] : row[c] + (last ? "" : pad);
      if (!last) out += "  ";
    }
    os << out << "\n";
  };
  line(head);
  std::vector<std::string> rule;
  for (size_t w : width) rule.push_back(std::string(w, '-'));
  line(rule);
  for (const auto& row : cells) line(row);
  for (const Result& r : rows)
    if (r.check != Check::pass) os << check_name(r.check) << " " << r.id() << ": " << r.check_detail << "\n";
  return os.str();
}

// RFC 4180 field: quoted when it holds a comma, quote or line break (paths contain commas).
inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// Full-precision number for machine-readable output; empty for NaN (not valid / not applicable).
inline std::string csv_number(double v) {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

inline std::string format_csv(const std::vector<Result>& rows) {
  std::ostringstream os;
  os << "suite,case,shape,path,median_us,min_us,p10_us,p90_us,bytes,flops,tbps,tflops,pct_copy,pct_bf16,"
        "baseline,baseline_us,ratio,check,check_detail,timing\n";
  for (const Result& r : rows) {
    const bool ok = r.valid();
    auto num = [&](double v) { return ok ? csv_number(v) : std::string(); };
    os << csv_field(r.suite) << "," << csv_field(r.name) << "," << csv_field(r.shape) << "," << csv_field(r.path) << ","
       << num(r.time.median_us) << "," << num(r.time.min_us) << "," << num(r.time.p10_us) << ","
       << num(r.time.p90_us) << "," << csv_number(r.bytes) << "," << csv_number(r.flops) << "," << num(r.tbps)
       << "," << num(r.tflops) << "," << num(r.pct_copy) << "," << num(r.pct_bf16) << "," << csv_field(r.baseline)
       << "," << num(r.baseline_us) << "," << num(r.ratio) << "," << check_name(r.check) << ","
       << csv_field(r.check_detail) << "," << (ok ? csv_field(r.time.timing) : std::string()) << "\n";
  }
  return os.str();
}

// JSON number, or null for NaN / Inf (JSON has neither).
inline nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

inline nlohmann::json result_json(const Result& r) {
  const bool ok = r.valid();
  auto num = [&](double v) { return ok ? json_number(v) : nlohmann::json(nullptr); };
  nlohmann::json samples = nlohmann::json::array();
  if (ok)
    for (double s : r.time.samples_us) samples.push_back(json_number(s));
  return {{"id", r.id()},
          {"suite", r.suite},
          {"case", r.name},
          {"shape", r.shape},
          {"path", r.path},
          {"valid", ok},
          {"check", check_name(r.check)},
          {"check_detail", r.check_detail},
          {"median_us", num(r.time.median_us)},
          {"min_us", num(r.time.min_us)},
          {"p10_us", num(r.time.p10_us)},
          {"p90_us", num(r.time.p90_us)},
          {"samples_us", samples},
          {"timing", ok ? nlohmann::json(r.time.timing) : nlohmann::json(nullptr)},
          {"bytes", r.bytes},
          {"flops", r.flops},
          {"tbps", num(r.tbps)},
          {"tflops", num(r.tflops)},
          {"pct_copy", num(r.pct_copy)},
          {"pct_bf16", num(r.pct_bf16)},
          {"baseline", r.baseline},
          {"baseline_us", num(r.baseline_us)},
          {"ratio", num(r.ratio)}};
}

inline nlohmann::json report_json(const RunInfo& i, const Ceilings& c, const std::vector<Result>& rows) {
  nlohmann::json results = nlohmann::json::array();
  for (const Result& r : rows) results.push_back(result_json(r));
  return {{"meta",
           {{"b12x_version", i.version},
            {"date", i.date},
            {"device", i.device},
            {"arch", i.arch},
            {"sm_count", i.sm_count},
            {"sm_clock_mhz", i.sm_clock_mhz},
            {"mem_clock_mhz", i.mem_clock_mhz},
            {"l2_bytes", i.l2_bytes},
            {"memory_bytes", i.memory_bytes},
            {"timing",
             {{"mode", i.mode},
              {"warmup", i.warmup},
              {"iters", i.iters},
              {"l2_flush_bytes", i.flush_bytes},
              {"l2_flushed", i.flush_bytes > 0},
              {"l2_flush", i.flush},
              {"method", i.method}}}}},
          {"ceilings",
           {{"copy_tbps", json_number(c.copy_tbps)},
            {"bf16_tflops", json_number(c.bf16_tflops)},
            {"fp8_tflops", json_number(c.fp8_tflops)}}},
          {"results", results}};
}

}  // namespace b12x::bench
