// b12x codec: encode, decode and describe every number format on raw little-endian files.
//   element formats (one value per code): e4m3, e5m2, e2m1 (two codes per byte, even element in
//   the low nibble), ue8m0; weight formats: every name in b12x::all_formats(), laid out as
//   b12x::allocate_weight() says, with scale tensors in separate files.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "b12x/b12x.h"
#include "cli/commands.h"
#include "cli/file_io.h"

namespace b12x::cli {
namespace {

struct ElementFormat {
  std::string_view name;
  int bits;  // 8: one code per byte; 4: two codes per byte
  double bits_per_weight;
  std::string_view summary;
};
constexpr ElementFormat kElementFormats[] = {
    {"e4m3", 8, 8, "FP8 E4M3 (float8_e4m3fn): RNE, saturating to +-448"},
    {"e5m2", 8, 8, "FP8 E5M2: RNE, overflow to Inf (--saturate: clamp to +-57344)"},
    {"e2m1", 4, 4, "FP4 E2M1: RNE onto {0,.5,1,1.5,2,3,4,6}, saturating; two codes per byte"},
    {"ue8m0", 8, 8, "UE8M0 power-of-two scale; encode applies the MX ceil rule to |x| / --elem-max"},
};

const ElementFormat* find_element_format(const std::string& name) {
  for (const auto& f : kElementFormats)
    if (f.name == name) return &f;
  return nullptr;
}

// Options shared by decode and encode.
struct Options {
  std::string format;
  int64_t rows = 0, cols = 0;
  std::string in, out, scale, scale_out;
  std::optional<float> scale2, global_scale;
  std::string scale_layout = "linear";
  bool saturate = false;
  float elem_max = 1.0f;
  uint64_t seed = 0;
};

void check_dims(const Options& o) {
  B12X_CHECK_ARG(o.rows > 0, "--rows", "must be positive, got ", o.rows);
  B12X_CHECK_ARG(o.cols > 0, "--cols", "must be positive, got ", o.cols);
}

// Scale tensors of NVFP4/MX weights may travel in the 128x4 swizzled layout.
bool swizzled(const Options& o, Format f) {
  B12X_CHECK_ARG(o.scale_layout == "linear" || o.scale_layout == "swizzled", "--scale-layout",
                 "must be 'linear' or 'swizzled', got '", o.scale_layout, "'");
  if (o.scale_layout == "linear") return false;
  B12X_CHECK_ARG(f == Format::nvfp4 || f == Format::mxfp4 || f == Format::mxfp8, "--scale-layout",
                 "'swizzled' applies only to nvfp4, mxfp4 and mxfp8 scales");
  return true;
}

HostTensor swizzled_buffer(const TensorView& linear) {
  const auto s = swizzled_scale_shape(linear.size(0), linear.size(1));
  return HostTensor(linear.dtype, {s.bytes()});
}

bool has_scale_tensor(Format f) {
  return f == Format::fp8_channel || f == Format::fp8_block || f == Format::mxfp8 || f == Format::nvfp4 ||
         f == Format::mxfp4;
}
bool has_scale2(Format f) { return f == Format::fp8_tensor || f == Format::nvfp4; }

// ---- element formats -------------------------------------------------------------------------

void decode_elements(const ElementFormat& ef, const Options& o) {
  const int64_t n = o.rows * o.cols;
  B12X_CHECK_ARG(ef.bits == 8 || n % 2 == 0, "--cols", "rows * cols must be even for e2m1 (two codes per byte)");
  HostTensor codes(DType::u8, {ef.bits == 8 ? n : n / 2});
  read_into(o.in, codes.view(), "--in");
  HostTensor values(DType::f32, {o.rows, o.cols});
  const uint8_t* c = codes.ptr<uint8_t>();
  float* v = values.ptr<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (ef.name == "e4m3") v[i] = e4m3_to_f32(c[i]);
    else if (ef.name == "e5m2") v[i] = e5m2_to_f32(c[i]);
    else if (ef.name == "ue8m0") v[i] = ue8m0_to_f32(c[i]);
    else v[i] = e2m1_to_f32((c[i / 2] >> (4 * (i % 2))) & 0xF);
  }
  write_from(o.out, values.view(), "--out");
}

void encode_elements(const ElementFormat& ef, const Options& o) {
  const int64_t n = o.rows * o.cols;
  B12X_CHECK_ARG(ef.bits == 8 || n % 2 == 0, "--cols", "rows * cols must be even for e2m1 (two codes per byte)");
  B12X_CHECK_ARG(!o.saturate || ef.name == "e5m2", "--saturate", "applies only to e5m2");
  HostTensor values(DType::f32, {o.rows, o.cols});
  read_into(o.in, values.view(), "--in");
  HostTensor codes(DType::u8, {ef.bits == 8 ? n : n / 2});
  const float* v = values.ptr<float>();
  uint8_t* c = codes.ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (ef.name == "e4m3") c[i] = f32_to_e4m3(v[i]);
    else if (ef.name == "e5m2") c[i] = o.saturate ? f32_to_e5m2_sat(v[i]) : f32_to_e5m2(v[i]);
    else if (ef.name == "ue8m0") c[i] = ue8m0_ceil_scale(std::fabs(v[i]), o.elem_max);
    else c[i / 2] |= static_cast<uint8_t>(f32_to_e2m1(v[i]) << (4 * (i % 2)));
  }
  write_from(o.out, codes.view(), "--out");
  std::cout << nlohmann::json{{"format", ef.name}, {"rows", o.rows}, {"cols", o.cols}, {"payload_bytes", codes.nbytes()}}
            << "\n";
}

// ---- weight formats --------------------------------------------------------------------------

void decode_weight(Format f, const Options& o) {
  PackedWeight w = allocate_weight(f, o.rows, o.cols);
  read_into(o.in, w.data.view(), "--in");
  if (has_scale_tensor(f)) {
    B12X_CHECK_ARG(!o.scale.empty(), "--scale", "is required for format ", format_info(f).name, " (",
                   w.scale.view().describe(), ")");
    if (swizzled(o, f)) {
      HostTensor sw = swizzled_buffer(w.scale.view());
      read_into(o.scale, sw.view(), "--scale");
      unswizzle_scales(sw.view(), w.scale.view());
    } else {
      read_into(o.scale, w.scale.view(), "--scale");
    }
  } else {
    B12X_CHECK_ARG(o.scale.empty(), "--scale", "format ", format_info(f).name, " has no scale tensor");
  }
  if (o.scale2) {
    B12X_CHECK_ARG(has_scale2(f), "--scale2", "format ", format_info(f).name, " has no tensor scale");
    w.scale2 = *o.scale2;
  }
  HostTensor values(DType::f32, {o.rows, o.cols});
  dequantize_weight(w.view(), values.view());
  write_from(o.out, values.view(), "--out");
}

void encode_weight(Format f, const Options& o) {
  HostTensor values(DType::f32, {o.rows, o.cols});
  read_into(o.in, values.view(), "--in");
  PackedWeight w;
  if (o.global_scale) {
    B12X_CHECK_ARG(f == Format::nvfp4, "--global-scale", "applies only to nvfp4");
    B12X_CHECK_ARG(std::isfinite(*o.global_scale) && *o.global_scale > 0, "--global-scale",
                   "must be finite and positive, got ", *o.global_scale);
    w = allocate_weight(f, o.rows, o.cols);
    nvfp4_quantize(values.view(), *o.global_scale, w.data.view(), w.scale.view());
    w.scale2 = 1.0f / *o.global_scale;
  } else {
    w = quantize_weight(f, values.view());
  }
  write_from(o.out, w.data.view(), "--out");
  size_t scale_bytes = 0;
  if (has_scale_tensor(f)) {
    B12X_CHECK_ARG(!o.scale_out.empty(), "--scale-out", "is required for format ", format_info(f).name);
    if (swizzled(o, f)) {
      HostTensor sw = swizzled_buffer(w.scale.view());
      swizzle_scales(w.scale.view(), sw.view());
      write_from(o.scale_out, sw.view(), "--scale-out");
      scale_bytes = sw.nbytes();
    } else {
      write_from(o.scale_out, w.scale.view(), "--scale-out");
      scale_bytes = w.scale.nbytes();
    }
  }
  nlohmann::json summary{{"format", format_info(f).name}, {"rows", o.rows},           {"cols", o.cols},
                         {"payload_bytes", w.data.nbytes()}, {"scale_bytes", scale_bytes}};
  if (has_scale2(f)) summary["scale2"] = w.scale2;
  std::cout << summary << "\n";
}

// ---- subcommands -----------------------------------------------------------------------------

void run_info(const std::string& name, bool json) {
  nlohmann::json j;
  if (const auto* ef = find_element_format(name)) {
    j = {{"format", ef->name}, {"kind", "element"}, {"group", 1}, {"payload_bytes", 0},
         {"bits_per_weight", ef->bits_per_weight}, {"summary", ef->summary}};
  } else {
    const FormatInfo& fi = format_info(parse_format(name, "--format"));
    j = {{"format", fi.name},       {"kind", "weight"},           {"modelopt_quant_algo", fi.modelopt},
         {"group", fi.group},       {"payload_bytes", fi.block_bytes}, {"bits_per_weight", fi.bits_per_weight},
         {"summary", fi.summary}};
  }
  if (json) {
    std::cout << j.dump(2) << "\n";
    return;
  }
  for (const auto& [k, v] : j.items()) std::cout << k << ": " << (v.is_string() ? v.get<std::string>() : v.dump()) << "\n";
}

void run_decode(const Options& o) {
  check_dims(o);
  if (const auto* ef = find_element_format(o.format)) return decode_elements(*ef, o);
  decode_weight(parse_format(o.format, "--format"), o);
}

void run_encode(const Options& o) {
  check_dims(o);
  if (const auto* ef = find_element_format(o.format)) return encode_elements(*ef, o);
  const Format f = parse_format(o.format, "--format");
  if (is_iq2_format(f))
    fail_arg("--format", format_info(f).name,
             " has no quantizer in b12x (IQ2 needs importance-weighted search); use `b12x codec random` for "
             "synthetic blocks");
  encode_weight(f, o);
}

void run_random(const Options& o) {
  check_dims(o);
  const Format f = parse_format(o.format, "--format");
  B12X_CHECK_ARG(is_ggml_format(f), "--format", "random blocks exist for q8_0, iq2_xxs and iq2_xs, got ", o.format);
  PackedWeight w = allocate_weight(f, o.rows, o.cols);
  ggml_random_blocks(f, w.data.view(), o.seed);
  write_from(o.out, w.data.view(), "--out");
}

void add_dims(CLI::App* c, Options& o) {
  c->add_option("--format", o.format, "format name (see `b12x codec info --list`)")->required();
  c->add_option("--rows", o.rows, "rows N of the [N, K] matrix")->required();
  c->add_option("--cols", o.cols, "columns K (the blocked dimension)")->required();
}

}  // namespace

void register_codec(CLI::App& app) {
  auto* codec = app.add_subcommand("codec", "encode, decode and describe number formats (raw little-endian files)");
  codec->require_subcommand(1);
  auto opts = std::make_shared<Options>();

  auto* info = codec->add_subcommand("info", "group size, payload bytes and bits per weight of a format");
  auto json = std::make_shared<bool>(false);
  auto list = std::make_shared<bool>(false);
  info->add_option("--format", opts->format, "format name");
  info->add_flag("--json", *json, "print JSON");
  info->add_flag("--list", *list, "list every format");
  info->callback([opts, json, list] {
    if (*list || opts->format.empty()) {
      for (const auto& ef : kElementFormats) std::cout << ef.name << "\t" << ef.summary << "\n";
      for (const auto& fi : all_formats()) std::cout << fi.name << "\t" << fi.summary << "\n";
      return;
    }
    run_info(opts->format, *json);
  });

  auto* decode = codec->add_subcommand("decode", "codes (+ scales) -> float32 [rows, cols]");
  add_dims(decode, *opts);
  decode->add_option("--in", opts->in, "payload file")->required();
  decode->add_option("--out", opts->out, "float32 output file")->required();
  decode->add_option("--scale", opts->scale, "scale tensor file (fp8_channel, fp8_block, mxfp8, mxfp4, nvfp4)");
  decode->add_option("--scale2", opts->scale2, "tensor scale (fp8 weight_scale, nvfp4 weight_scale_2)");
  decode->add_option("--scale-layout", opts->scale_layout, "linear (default) or swizzled (128x4)");
  decode->callback([opts] { run_decode(*opts); });

  auto* encode = codec->add_subcommand("encode", "float32 [rows, cols] -> codes (+ scales)");
  add_dims(encode, *opts);
  encode->add_option("--in", opts->in, "float32 input file")->required();
  encode->add_option("--out", opts->out, "payload output file")->required();
  encode->add_option("--scale-out", opts->scale_out, "scale tensor output file");
  encode->add_option("--scale-layout", opts->scale_layout, "linear (default) or swizzled (128x4)");
  encode->add_option("--global-scale", opts->global_scale, "nvfp4 global-scale multiplier (default 448*6/amax)");
  encode->add_flag("--saturate", opts->saturate, "e5m2: clamp to +-57344 instead of overflowing to Inf");
  encode->add_option("--elem-max", opts->elem_max, "ue8m0: element maximum of the ceil rule (default 1)");
  encode->callback([opts] { run_encode(*opts); });

  auto* random = codec->add_subcommand("random", "random valid GGML blocks (q8_0, iq2_xxs, iq2_xs)");
  add_dims(random, *opts);
  random->add_option("--seed", opts->seed, "generator seed")->required();
  random->add_option("--out", opts->out, "output file")->required();
  random->callback([opts] { run_random(*opts); });
}

}  // namespace b12x::cli
