// Tensor-parallel shards of checkpoint layers. Column-parallel layers split N (whole rows: every
// per-row scale goes with its row), row-parallel layers split K in whole blocks (block scales go
// with their blocks; per-row and per-tensor scales are replicated). Splits are even, so a rule that
// refuses one rank refuses every rank. Shards keep the checkpoint layout, which the GPU decoders
// read directly: nothing is repacked or expanded.
#include <algorithm>
#include <cstring>

#include "b12x/core/error.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "checkpoint/internal.h"

namespace b12x {

namespace {

// Copies part `rank` of `world` equal parts of dimension `dim` of a contiguous host tensor.
HostTensor slice_dim(const TensorView& t, int dim, int rank, int world) {
  std::vector<int64_t> shape = t.shape_vec();
  const int64_t extent = shape[dim];
  if (extent % world != 0)
    throw Error(detail::concat("internal: slicing dimension ", dim, " of ", t.describe(), " into ", world, " parts"));
  const int64_t chunk = extent / world;
  int64_t outer = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  size_t inner = dtype_size(t.dtype);
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= static_cast<size_t>(shape[d]);
  shape[dim] = chunk;
  HostTensor out(t.dtype, shape);
  const size_t piece = static_cast<size_t>(chunk) * inner;
  const auto* src = static_cast<const uint8_t*>(t.data);
  auto* dst = out.ptr<uint8_t>();
  for (int64_t o = 0; o < outer; ++o)
    if (piece) std::memcpy(dst + o * piece, src + (static_cast<size_t>(o) * extent + static_cast<size_t>(rank) * chunk) * inner, piece);
  return out;
}

HostTensor copy_whole(const TensorView& t) {
  HostTensor out(t.dtype, t.shape_vec());
  if (out.nbytes()) std::memcpy(out.ptr<uint8_t>(), t.data, out.nbytes());
  return out;
}

// Which dimension of tensor `role` (shape `t`) carries N or K; -1 = replicate.
int split_dim(const LayerRecord& r, const std::string& role, const TensorView& t, TpStyle tp) {
  if (role == "weight_scale_2" || role == "input_scale") return -1;  // scalars
  if (role == "weight_scale" && r.format == Format::fp8_tensor) return -1;
  if (t.ndim == 0) return -1;
  if (tp == TpStyle::column) return 0;  // weight, per-row / per-block-row scales, bias: rows first
  // Row-parallel: K.
  if (role == "bias") return -1;
  if (role == "weight") return 1;  // [N, K], [N, K/2], [N, K/group, payload]
  if (r.format == Format::fp8_channel) return -1;  // one scale per row: every rank needs all of them
  if (r.format == Format::fp8_block && t.ndim == 4) return 2;  // [N/128, 1, K/128, 1]
  return 1;                                                     // [N, K/16], [N, K/32], [N/128, K/128]
}

std::string what_rank(int rank, int world) { return detail::concat("rank ", rank, " of ", world, ": "); }

}  // namespace

const ShardTensor* LayerShard::find(std::string_view role) const {
  for (const auto& t : tensors)
    if (t.role == role) return &t;
  return nullptr;
}

WeightView LayerShard::view() const {
  if (!format) fail_arg(layer, "has no b12x weight format, so its shard has no weight view");
  const ShardTensor* w = find("weight");
  if (!w) fail_arg(layer, "shard has no weight tensor");
  TensorView scale;  // block / row scales; FP8's per-tensor weight_scale is scale2, ggml blocks hold theirs
  const Format f = *format;
  if (f != Format::fp8_tensor && f != Format::bf16 && f != Format::f16 && !is_ggml_format(f))
    for (const char* role : {"weight_scale_inv", "weight_scale"})
      if (const ShardTensor* s = find(role)) {
        scale = s->tensor.view();
        break;
      }
  return checkpoint_detail::make_weight_view(*format, n, k, w->tensor.view(), scale, scale2);
}

PackedWeight prepare_for_linear(const LayerShard& shard, DType act_dtype) {
  const WeightView w = shard.view();  // BadArgument naming the layer without a format
  if (linear::preferred_layout(w.format, act_dtype) == WeightLayout::tile16 && w.n % 16 == 0 && w.k % 32 == 0)
    return to_tile16(w);
  PackedWeight p = allocate_weight(w.format, w.n, w.k);  // the same bytes, owned
  B12X_CHECK_ARG(w.data.nbytes() == p.data.nbytes() && w.scale.nbytes() == p.scale.nbytes(), shard.layer,
                 "shard tensors do not have the sizes of a [", w.n, ", ", w.k, "] ", format_info(w.format).name,
                 " weight");
  std::memcpy(p.data.view().data, w.data.data, p.data.nbytes());
  if (!w.scale.empty()) std::memcpy(p.scale.view().data, w.scale.data, p.scale.nbytes());
  p.scale2 = w.scale2;
  return p;
}

void Checkpoint::check_shard(const std::string& name, int rank, int world) const {
  B12X_CHECK_ARG(world >= 1, "world", "tensor-parallel world size must be at least 1, got ", world);
  B12X_CHECK_ARG(rank >= 0 && rank < world, "rank", "must be in [0, ", world, "), got ", rank);
  const LayerRecord& r = impl_->layer(name);
  if (!r.ok()) fail_arg(r.name, what_rank(rank, world), "cannot shard: ", checkpoint_detail::joined_problems(r));
  if (world == 1 || r.tp == TpStyle::replicated) return;

  const bool column = r.tp == TpStyle::column;
  const char* style = column ? "column-parallel split of N" : "row-parallel split of K";
  const std::string at = what_rank(rank, world) + style + ": ";
  if (r.n <= 0 || r.k <= 0 || r.shape.size() != 2)
    fail_arg(r.name, at, "needs a 2-D weight [N, K], got ", shape_string(r.shape));
  if (r.logical_n)
    fail_arg(r.name, at, "row-padded payloads (row_padding \"right\") cannot be split: the padding rows would all land "
             "on the last rank");
  const int64_t full = column ? r.n : r.k;
  const char* dim = column ? "N" : "K";
  if (full % world != 0)
    fail_arg(r.name, at, dim, " = ", full, " is not divisible by the world size ", world);
  const int64_t part = full / world;
  if (!r.format) return;  // F32: any even split
  const Format f = *r.format;
  const FormatInfo& fi = format_info(f);
  if (column) {
    if (is_ggml_format(f) && part % 8 != 0)
      fail_arg(r.name, at, "N_part = ", part, " is not a multiple of 8 (block-codec kernels need N % 8 == 0)");
    if (f == Format::fp8_block && part % 128 != 0)
      fail_arg(r.name, at, "N_part = ", part, " is not a multiple of 128: the split would cut a 128x128 scale block");
  } else {
    const int64_t group = f == Format::fp8_block ? 128 : fi.group;
    if (group > 1 && part % group != 0)
      fail_arg(r.name, at, "K_part = ", part, " is not a multiple of the ", r.quant_algo, " block (", group,
               " weights): the split would cut a block");
  }
  if (r.kind == LayerKind::expert && is_ggml_format(f)) {  // I_part: N of gate/up, K of down
    const int64_t m = std::max<int64_t>(128, fi.group);
    if (part % m != 0)
      fail_arg(r.name, at, "I_part = ", part, " is not a multiple of ", m, " = max(128, group): ", r.quant_algo,
               " experts need H and I_part divisible by it (the block-codec MoE path)");
  }
}

LayerShard Checkpoint::shard(const std::string& name, int rank, int world) const {
  check_shard(name, rank, world);
  const LayerRecord& r = impl_->layer(name);
  LayerShard s;
  s.layer = r.name;
  s.rank = rank;
  s.world = world;
  s.tp = world == 1 ? TpStyle::replicated : r.tp;
  s.format = r.format;
  s.n = r.n;
  s.k = r.k;
  s.scale2 = r.scale2;
  if (s.tp == TpStyle::column) s.n /= world;
  if (s.tp == TpStyle::row) s.k /= world;
  for (const auto& [role, tensor] : r.tensors) {
    const TensorView t = impl_->view(tensor);
    // Row-padding shape companions only exist on unsplit layers (check_shard refuses the split).
    const bool whole = s.tp == TpStyle::replicated || role.find("shape") != std::string::npos;
    const int dim = whole ? -1 : split_dim(r, role, t, s.tp);
    s.tensors.push_back({role, tensor, dim < 0 ? copy_whole(t) : slice_dim(t, dim, rank, world)});
  }
  if (s.format) validate_weight(s.view());
  return s;
}

}  // namespace b12x
