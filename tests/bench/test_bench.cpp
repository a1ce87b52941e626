// Host-only pieces of `b12x bench`: timing statistics, shape parsing, derived columns and the
// table / CSV / JSON renderings. Expected values are worked out by hand (percentiles as numpy's
// default linear interpolation gives them).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "bench/report.h"
#include "bench/shape.h"
#include "bench/stats.h"

namespace b12x::bench {
namespace {

// ---------------------------------------------------------------------------------------------
// Statistics

TEST(BenchStats, PercentilesInterpolateBetweenRanks) {
  // Unsorted on purpose. Sorted: 1 2 3 4 10; positions q/100 * 4.
  const std::vector<double> v = {10, 3, 1, 4, 2};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 3.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10.0);
  EXPECT_DOUBLE_EQ(percentile(v, 10), 1.4);  // pos 0.4: 1 + 0.4 * (2 - 1)
  EXPECT_DOUBLE_EQ(percentile(v, 90), 7.6);  // pos 3.6: 4 + 0.6 * (10 - 4)
  EXPECT_DOUBLE_EQ(percentile(v, 75), 4.0);  // pos 3.0
}

TEST(BenchStats, MedianOfEvenCountAveragesTheMiddlePair) {
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({7}), 7.0);
  EXPECT_TRUE(std::isnan(median({})));
}

TEST(BenchStats, SummarizeKeepsSamplesInOrder) {
  const TimeStats s = summarize({5, 1, 9, 3, 7, 2, 8, 4, 6, 10});
  EXPECT_TRUE(s.valid());
  EXPECT_DOUBLE_EQ(s.median_us, 5.5);
  EXPECT_DOUBLE_EQ(s.min_us, 1.0);
  EXPECT_DOUBLE_EQ(s.p10_us, 1.9);  // pos 0.9 between 1 and 2
  EXPECT_DOUBLE_EQ(s.p90_us, 9.1);  // pos 8.1 between 9 and 10
  ASSERT_EQ(s.samples_us.size(), 10u);
  EXPECT_EQ(s.samples_us[0], 5.0);
  EXPECT_EQ(s.samples_us[9], 10.0);
  EXPECT_FALSE(summarize({}).valid());
  EXPECT_TRUE(std::isnan(summarize({}).median_us));
}

TEST(BenchStats, RelativeErrorRejectsNaNAndInf) {
  EXPECT_DOUBLE_EQ(relative_l2_error({3, 4}, {3, 4}), 0.0);
  EXPECT_DOUBLE_EQ(relative_l2_error({3, 4.5}, {3, 4}), 0.1);  // |(0, .5)| / |(3, 4)| = .5 / 5
  EXPECT_TRUE(std::isinf(relative_l2_error({NAN, 1}, {1, 1})));
  EXPECT_TRUE(std::isinf(relative_l2_error({INFINITY, 1}, {1, 1})));
  EXPECT_TRUE(std::isinf(relative_l2_error({1}, {1, 1})));
  EXPECT_DOUBLE_EQ(relative_l2_error({0.5}, {0}), 0.5);
}

// ---------------------------------------------------------------------------------------------
// Shapes

TEST(BenchShapes, ParsesLists) {
  const auto s = parse_shapes("16x28672x8192, 1X4096x14336");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0], (Shape{16, 28672, 8192}));
  EXPECT_EQ(s[1], (Shape{1, 4096, 14336}));
  EXPECT_EQ(s[0].str(), "16x28672x8192");
  EXPECT_EQ(parse_shapes("2147483647x1x1")[0].m, 2147483647);
}

TEST(BenchShapes, RejectsMalformedEntriesNamingTheOption) {
  for (const char* bad : {"", "16x4096", "16x4096x8192x2", "0x1x1", "-1x2x3", "1x2x3,", "1x2xK", "1x 2x3",
                          "2147483648x1x1", "1x2x3,,4x5x6", "1.5x2x3"}) {
    try {
      parse_shapes(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const BadArgument& e) {
      EXPECT_EQ(e.argument(), "--shapes") << bad;
      EXPECT_NE(std::string(e.what()).find("MxNxK"), std::string::npos) << e.what();
    }
  }
}

TEST(BenchStats, RotationCopiesStreamTwiceTheL2BetweenTwoUsesOfOneCopy) {
  constexpr size_t mb = size_t{1} << 20, l2 = 50 * mb;  // the H100's L2
  EXPECT_EQ(rotation_copies(235 * mb, l2), 2);          // FP8 28672x8192: one other copy is 2x L2
  EXPECT_EQ(rotation_copies(100 * mb, l2), 2);          // exactly 2x L2
  EXPECT_EQ(rotation_copies(100 * mb - 1, l2), 3);
  EXPECT_EQ(rotation_copies(59 * mb, l2), 3);           // FP8 4096x14336: 2 x 59 MB >= 100 MB
  EXPECT_EQ(rotation_copies(16 * mb, l2), 8);           // 7 x 16 MB = 112 MB
  EXPECT_EQ(rotation_copies((100 * mb + 62) / 63, l2), 64);  // the most copies still rotate ...
  EXPECT_EQ(rotation_copies(mb, l2), 1);                // ... fewer bytes cannot: no rotation (clean flush)
  EXPECT_EQ(rotation_copies(0, l2), 1);
  for (size_t bytes : {mb, 7 * mb, 33 * mb, 99 * mb, 400 * mb}) {
    const int c = rotation_copies(bytes, l2);
    if (c == 1) continue;
    EXPECT_GE((c - 1) * bytes, 2 * l2) << bytes;  // the others evict the L2 twice over
    EXPECT_LT((c - 2) * bytes, 2 * l2) << bytes;  // and no copy more than that needs
  }
}

// ---------------------------------------------------------------------------------------------
// Results

Result timed_row(std::string suite, std::string name, std::string shape, double median_us, double bytes, double flops) {
  Result r;
  r.suite = std::move(suite);
  r.name = std::move(name);
  r.shape = std::move(shape);
  r.path = "kernel{format=nvfp4, out=bf16} grid 8 block 256";
  r.time = summarize({median_us, median_us, median_us});
  r.time.timing = "rotate x3";
  r.bytes = bytes;
  r.flops = flops;
  r.check = Check::pass;
  r.check_detail = "bit-exact";
  return r;
}

TEST(BenchReport, DerivesRatesAndPercentages) {
  Result r = timed_row("dequantize", "nvfp4", "28672x8192", 100.0, 4e8, 2e9);
  r.baseline = "cuBLAS bf16";
  r.baseline_us = 150.0;
  const Ceilings c{.copy_tbps = 4.0, .bf16_tflops = 800.0, .fp8_tflops = 1600.0};
  derive(r, c);
  EXPECT_DOUBLE_EQ(r.tbps, 4.0);     // 4e8 B / 100 us
  EXPECT_DOUBLE_EQ(r.tflops, 20.0);  // 2e9 FLOP / 100 us
  EXPECT_DOUBLE_EQ(r.pct_copy, 100.0);
  EXPECT_DOUBLE_EQ(r.pct_bf16, 2.5);
  EXPECT_DOUBLE_EQ(r.ratio, 1.5);
  EXPECT_EQ(ratio_text(r), "1.50x cuBLAS bf16");
}

TEST(BenchReport, FailedRowsGetNoNumbers) {
  Result r = timed_row("dequantize", "mxfp4", "4096x14336", 100.0, 4e8, 0);
  r.check = Check::fail;
  r.check_detail = "3 tiles differ";
  derive(r, Ceilings{.copy_tbps = 4.0, .bf16_tflops = 800.0, .fp8_tflops = kNaN});
  EXPECT_FALSE(r.valid());
  EXPECT_TRUE(std::isnan(r.tbps));
  EXPECT_TRUE(std::isnan(r.pct_copy));
  EXPECT_TRUE(std::isnan(r.pct_bf16));
}

TEST(BenchReport, CeilingsComeFromPassingBaselineRows) {
  Result copy = timed_row("baseline", "copy", "2GiB", 1000.0, 4e9, 0);
  copy.ceiling = Ceiling::copy_bandwidth;
  Result bf16 = timed_row("baseline", "cublas_bf16", "8192x8192x8192", 1000.0, 4e8, 8e11);
  bf16.ceiling = Ceiling::bf16_peak;
  Result fp8 = timed_row("baseline", "cublaslt_fp8", "8192x8192x8192", 500.0, 2e8, 8e11);
  fp8.ceiling = Ceiling::fp8_peak;
  fp8.check = Check::fail;  // a failed baseline defines no ceiling
  const Ceilings c = ceilings_from({copy, bf16, fp8, timed_row("dequantize", "bf16", "1x1", 1.0, 1.0, 0)});
  EXPECT_DOUBLE_EQ(c.copy_tbps, 4.0);
  EXPECT_DOUBLE_EQ(c.bf16_tflops, 800.0);
  EXPECT_TRUE(std::isnan(c.fp8_tflops));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(BenchReport, TableAlignsColumnsAndListsFailures) {
  Result ok = timed_row("dequantize", "nvfp4", "28672x8192", 123.456, 4e8, 0);
  derive(ok, Ceilings{.copy_tbps = 4.0, .bf16_tflops = 800.0, .fp8_tflops = kNaN});
  Result bad = timed_row("dequantize", "iq2_xs", "4096x14336", 50, 1e8, 0);
  bad.check = Check::fail;
  bad.check_detail = "2 tiles differ; seed 7";
  const auto lines = lines_of(format_table({ok, bad}));
  ASSERT_EQ(lines.size(), 5u);  // header, rule, two rows, one failure line
  EXPECT_EQ(lines[0].rfind("case", 0), 0u);
  // Numbers are right-aligned: the median column ends at the same offset in header and rows.
  const size_t end = lines[0].find("median us") + std::string("median us").size();
  EXPECT_EQ(lines[2].substr(end - 5, 5), "123.5");
  EXPECT_NE(lines[2].find("3.240"), std::string::npos);  // 4e8 B / 123.456 us = 3.240 TB/s
  EXPECT_NE(lines[2].find("81.0"), std::string::npos);   // % of 4 TB/s
  EXPECT_NE(lines[2].find("PASS"), std::string::npos);
  EXPECT_EQ(lines[3].substr(end - 1, 1), "-");  // failed row: no numbers
  EXPECT_NE(lines[3].find("FAIL"), std::string::npos);
  EXPECT_EQ(lines[4], "FAIL dequantize/iq2_xs/4096x14336: 2 tiles differ; seed 7");
  // The check column starts at the same offset on every row.
  const size_t check = lines[0].find("check");
  EXPECT_EQ(lines[2].substr(check, 4), "PASS");
  EXPECT_EQ(lines[3].substr(check, 4), "FAIL");
}

// Splits one CSV record (RFC 4180 quoting) into fields.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') out.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) out.emplace_back();
    else out.back() += c;
  }
  return out;
}

TEST(BenchReport, CsvQuotesAndLeavesInvalidNumbersEmpty) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a, b"), "\"a, b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  Result ok = timed_row("baseline", "copy", "2GiB", 2000.0, 8e9, 0);
  derive(ok, Ceilings{.copy_tbps = 4.0, .bf16_tflops = kNaN, .fp8_tflops = kNaN});
  Result bad = timed_row("dequantize", "q8_0", "1x32", 1, 1, 0);
  bad.check = Check::error;
  bad.check_detail = "argument 'k': bad, really";
  const auto lines = lines_of(format_csv({ok, bad}));
  ASSERT_EQ(lines.size(), 3u);
  const auto head = csv_fields(lines[0]), row = csv_fields(lines[1]), err = csv_fields(lines[2]);
  ASSERT_EQ(row.size(), head.size());
  ASSERT_EQ(err.size(), head.size());
  auto col = [&](const std::vector<std::string>& r, const std::string& name) {
    for (size_t i = 0; i < head.size(); ++i)
      if (head[i] == name) return r[i];
    ADD_FAILURE() << "no column " << name;
    return std::string();
  };
  EXPECT_EQ(col(row, "path"), "kernel{format=nvfp4, out=bf16} grid 8 block 256");
  EXPECT_EQ(col(row, "median_us"), "2000");
  EXPECT_EQ(col(row, "tbps"), "4");
  EXPECT_EQ(col(row, "pct_copy"), "100");
  EXPECT_EQ(col(row, "tflops"), "");
  EXPECT_EQ(col(row, "check"), "PASS");
  EXPECT_EQ(col(err, "median_us"), "");
  EXPECT_EQ(col(err, "check"), "ERROR");
  EXPECT_EQ(col(err, "check_detail"), "argument 'k': bad, really");
  EXPECT_EQ(col(row, "timing"), "rotate x3");
  EXPECT_EQ(col(err, "timing"), "");  // not timed
}

TEST(BenchReport, JsonCarriesMetaCeilingsSamplesAndNulls) {
  RunInfo info;
  info.version = "0.1.0";
  info.device = "NVIDIA H200";
  info.mode = "graph";
  info.iters = 3;
  info.flush_bytes = 100 << 20;
  info.flush = "clean";
  Result ok = timed_row("dequantize", "nvfp4", "28672x8192", 10.0, 4e7, 0);
  const Ceilings c{.copy_tbps = 4.0, .bf16_tflops = kNaN, .fp8_tflops = 1500.0};
  derive(ok, c);
  Result bad = ok;
  bad.check = Check::fail;
  derive(bad, c);
  const nlohmann::json j = nlohmann::json::parse(report_json(info, c, {ok, bad}).dump());
  EXPECT_EQ(j["meta"]["device"], "NVIDIA H200");
  EXPECT_EQ(j["meta"]["timing"]["mode"], "graph");
  EXPECT_EQ(j["meta"]["timing"]["l2_flushed"], true);
  EXPECT_EQ(j["meta"]["timing"]["l2_flush"], "clean");
  EXPECT_EQ(j["ceilings"]["copy_tbps"], 4.0);
  EXPECT_TRUE(j["ceilings"]["bf16_tflops"].is_null());
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["id"], "dequantize/nvfp4/28672x8192");
  EXPECT_EQ(j["results"][0]["valid"], true);
  EXPECT_DOUBLE_EQ(j["results"][0]["tbps"].get<double>(), 4.0);
  EXPECT_EQ(j["results"][0]["samples_us"].size(), 3u);
  EXPECT_TRUE(j["results"][0]["tflops"].is_null());
  EXPECT_EQ(j["results"][0]["timing"], "rotate x3");
  EXPECT_EQ(j["results"][1]["valid"], false);
  EXPECT_TRUE(j["results"][1]["timing"].is_null());
  EXPECT_EQ(j["results"][1]["check"], "FAIL");
  EXPECT_TRUE(j["results"][1]["median_us"].is_null());
  EXPECT_TRUE(j["results"][1]["samples_us"].empty());
}

TEST(BenchReport, HeaderNamesDeviceAndTimingMethod) {
  RunInfo info;
  info.version = "0.1.0";
  info.date = "2026-01-02T03:04:05Z";
  info.device = "NVIDIA H200";
  info.arch = "sm_90a";
  info.sm_count = 132;
  info.sm_clock_mhz = 1980;
  info.l2_bytes = size_t{60} << 20;
  info.memory_bytes = size_t{140} << 30;
  info.method = "direct launches; L2 flushed before every timed call";
  const std::string h = header_text(info);
  EXPECT_NE(h.find("NVIDIA H200 (sm_90a), 132 SMs, max SM clock 1980 MHz"), std::string::npos) << h;
  EXPECT_EQ(h.find("memory clock"), std::string::npos) << h;  // unknown clocks are left out
  EXPECT_NE(h.find("L2 60 MiB"), std::string::npos) << h;
  EXPECT_NE(h.find("# timing: direct launches; L2 flushed"), std::string::npos) << h;
  EXPECT_NE(h.find("2026-01-02T03:04:05Z"), std::string::npos) << h;
}

}  // namespace
}  // namespace b12x::bench
