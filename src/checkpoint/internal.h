// Shared between the checkpoint sources: the Checkpoint state and small helpers.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "b12x/checkpoint/checkpoint.h"

namespace b12x {

struct Checkpoint::Impl {
  std::string dir;
  std::vector<std::string> files;       // relative names, sorted
  std::vector<SafetensorsFile> mapped;  // parallel to files
  std::map<std::string, size_t> where;  // tensor name -> index into mapped
  QuantConfig config;
  std::vector<LayerRecord> layers;      // sorted by name
  std::map<std::string, size_t> layer_index;
  std::vector<std::string> problems;

  const SafetensorsEntry* find(const std::string& tensor) const {
    const auto it = where.find(tensor);
    return it == where.end() ? nullptr : &mapped[it->second].entry(tensor);
  }
  TensorView view(const std::string& tensor) const { return mapped.at(where.at(tensor)).tensor(tensor); }
  const LayerRecord& layer(const std::string& name) const;  // BadArgument 'layer' when unknown
};

namespace checkpoint_detail {

// JSON text of `file` (named in errors). IoError for invalid JSON and for a key that appears twice
// in one object (JSON readers silently keep one of the two, which would hide an entry).
nlohmann::json parse_json_strict(std::string_view text, const std::string& file);

// The whole file; IoError when unreadable or larger than `limit` bytes.
std::string read_text_file(const std::filesystem::path& path, uintmax_t limit);

// A weight view over checkpoint-layout tensors: squeezes FP8_PB_WO's [N/128, 1, K/128, 1] and
// per-channel [N, 1] scales, and reads ModelOpt's U8 UE8M0 bytes as ue8m0.
WeightView make_weight_view(Format f, int64_t n, int64_t k, const TensorView& data, const TensorView& scale, float scale2);

// The scale tensor role of a format in a record ("weight_scale", "weight_scale_inv") or "" when the
// scale lives in WeightView::scale2 or inside the blocks.
std::string scale_role(const LayerRecord& r);

// "invalid layer: p1; p2" for BadArgument messages.
std::string joined_problems(const LayerRecord& r);

}  // namespace checkpoint_detail

}  // namespace b12x
