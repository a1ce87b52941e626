// libFuzzer target: the checkpoint directory reader (Checkpoint::open), per-layer format resolution
// and validation, weight views and tensor-parallel shards, on a small checkpoint directory made from
// the input. Malformed files may only be refused with a b12x::Error (IoError, Unsupported) at open;
// after that, weight() / check_shard() may only throw BadArgument, and a shard that check_shard
// accepted must be built without any exception. A crash, a sanitizer report, a leak, any other
// exception, or a broken invariant (__builtin_trap) is a finding.
//
// Input: up to seven sections separated by the line kSep ("\n--b12x--\n"), each one file of the
// directory; an empty (or missing) section leaves the file out:
//   0 config.json                         text
//   1 hf_quant_config.json                text
//   2 model.safetensors header (JSON)     the target writes the 8-byte length in front, so mutations
//   3 model.safetensors data buffer       of the header text keep the framing intact
//   4 model.safetensors.index.json        text
//   5 model-00002-of-00002.safetensors header (JSON)
//   6 model-00002-of-00002.safetensors data buffer
// fuzz/make_corpus.py writes seeds in this layout (valid NVFP4 / FP8 / MXFP8 / IQ2_XS / IQ2_XXS /
// Q8_0 checkpoints, split and single-file, both config layouts, and a few one-rule faults). The
// safetensors framing itself is fuzzed by fuzz_safetensors. With B12X_FUZZ_PRINT=1 set, every input
// run prints the open error or each layer's format and problems (to check seeds:
// `B12X_FUZZ_PRINT=1 build-fuzz/fuzz_checkpoint build-fuzz/seeds/fuzz_checkpoint/*`).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "b12x/checkpoint/checkpoint.h"
#include "b12x/core/error.h"
#include "b12x/formats/weight.h"
#include "memfile.h"

namespace {

using namespace b12x;

constexpr std::string_view kSep = "\n--b12x--\n";
constexpr const char* kFiles[] = {"config.json", "hf_quant_config.json", "model.safetensors",
                                  "model.safetensors.index.json", "model-00002-of-00002.safetensors"};
constexpr int kMaxWorld = 4;
constexpr int64_t kMaxDecode = 1 << 16;  // elements dequantized per layer
constexpr int kMaxLayers = 64;           // layers checked per input (bounds the work)

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void remove_work_dir();

// The scratch directory, made once per process (removed at exit); tmpfs when fuzz.sh found one.
// (Never destroyed: the exit handler runs after static destructors registered later.)
const std::string& work_dir() {
  static const std::string* dir = [] {
    const char* base = std::getenv("B12X_FUZZ_TMP");
    auto* d = new std::string(std::string(base ? base : "/dev/shm") + "/b12x-fuzz-checkpoint-" + std::to_string(::getpid()));
    if (::mkdir(d->c_str(), 0700) != 0 && errno != EEXIST) std::abort();
    std::atexit(remove_work_dir);  // libFuzzer exit()s at -max_total_time
    return d;
  }();
  return *dir;
}

void remove_work_dir() {
  const std::string& dir = work_dir();
  for (const char* f : kFiles) ::unlink((dir + "/" + f).c_str());
  ::rmdir(dir.c_str());
}

void write_file(const std::string& path, std::string_view a, std::string_view b = {}) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if ((!a.empty() && std::fwrite(a.data(), 1, a.size(), f) != a.size()) ||
      (!b.empty() && std::fwrite(b.data(), 1, b.size(), f) != b.size()))
    std::abort();
  std::fclose(f);
}

std::string safetensors_bytes(std::string_view header) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out.append(header);
  return out;
}

// Writes the sections as files of work_dir() (removing the ones left from the previous input).
void write_checkpoint(std::string_view input) {
  std::vector<std::string_view> s;
  while (s.size() < 6) {
    const size_t at = input.find(kSep);
    if (at == std::string_view::npos) break;
    s.push_back(input.substr(0, at));
    input.remove_prefix(at + kSep.size());
  }
  s.push_back(input);
  s.resize(7);
  const std::string& dir = work_dir();
  for (const char* f : kFiles) ::unlink((dir + "/" + f).c_str());
  if (!s[0].empty()) write_file(dir + "/config.json", s[0]);
  if (!s[1].empty()) write_file(dir + "/hf_quant_config.json", s[1]);
  if (!s[2].empty()) write_file(dir + "/model.safetensors", safetensors_bytes(s[2]), s[3]);
  if (!s[4].empty()) write_file(dir + "/model.safetensors.index.json", s[4]);
  if (!s[5].empty()) write_file(dir + "/model-00002-of-00002.safetensors", safetensors_bytes(s[5]), s[6]);
}

std::vector<uint8_t> bytes_of(const TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return {p, p + t.nbytes()};
}

// Every rank's shard of one layer tensor, put back together, must give the original bytes: each
// rank's slice has the original shape (replicated, bytes equal) or splits exactly one dimension
// into `world` equal parts.
void check_reassembly(const TensorView& original, const std::vector<const ShardTensor*>& parts, int world) {
  const std::vector<int64_t> shape = original.shape_vec();
  const std::vector<int64_t> part = parts[0]->tensor.view().shape_vec();
  check(part.size() == shape.size());
  int dim = -1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (part[d] != shape[d]) {
      check(dim < 0 && part[d] * world == shape[d]);
      dim = static_cast<int>(d);
    }
  const std::vector<uint8_t> want = bytes_of(original);
  for (const ShardTensor* p : parts) {
    check(p->tensor.dtype() == original.dtype && p->tensor.view().shape_vec() == part);
    if (dim < 0) check(bytes_of(p->tensor.view()) == want);
  }
  if (dim < 0) return;
  size_t inner = dtype_size(original.dtype);
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= static_cast<size_t>(shape[d]);
  int64_t outer = 1;
  for (int d = 0; d < dim; ++d) outer *= shape[d];
  const size_t piece = static_cast<size_t>(part[dim]) * inner;
  std::vector<uint8_t> got;
  got.reserve(want.size());
  for (int64_t o = 0; o < outer; ++o)
    for (const ShardTensor* p : parts) {
      const auto* b = p->tensor.ptr<uint8_t>() + static_cast<size_t>(o) * piece;
      got.insert(got.end(), b, b + piece);
    }
  check(got == want);
}

void check_layer(const Checkpoint& ck, const LayerRecord& l) {
  check(&ck.layer(l.name) == &l);
  (void)kernel_path(l);
  for (const auto& [role, tensor] : l.tensors) check(ck.contains(tensor));

  // weight(): a view for a valid layer with a b12x format, BadArgument otherwise.
  bool has_weight = false;
  try {
    const WeightView w = ck.weight(l.name);
    has_weight = true;
    check(w.n == l.n && w.k == l.k && w.format == *l.format);
    validate_weight(w);
    fuzz::touch(w.data.data, w.data.nbytes());
    if (!w.scale.empty()) fuzz::touch(w.scale.data, w.scale.nbytes());
    int64_t numel = 0;
    if (!__builtin_mul_overflow(w.n, w.k, &numel) && numel <= kMaxDecode) {
      HostTensor out(DType::f32, {w.n, w.k});
      dequantize_weight(w, out.view());
    }
  } catch (const BadArgument&) {
  }
  check(has_weight == (l.ok() && l.format.has_value()));

  // Shards: a split refused for one rank is refused for every rank (splits are even); accepted
  // splits must be built, validate, and put back together give the checkpoint's bytes.
  for (int world = 1; world <= kMaxWorld; ++world) {
    std::vector<LayerShard> shards;
    int refused = 0;
    for (int rank = 0; rank < world; ++rank) {
      try {
        ck.check_shard(l.name, rank, world);
      } catch (const BadArgument&) {
        ++refused;
        continue;
      }
      shards.push_back(ck.shard(l.name, rank, world));  // must not throw after check_shard passed
    }
    check(refused == 0 || refused == world);
    check(refused == 0 || !l.ok() || world > 1);  // world 1 copies any valid layer
    if (refused) continue;
    check(l.ok());
    for (const LayerShard& s : shards) {
      check(s.layer == l.name && s.world == world && s.format == l.format);
      check(s.n * (s.tp == TpStyle::column ? world : 1) == l.n && s.k * (s.tp == TpStyle::row ? world : 1) == l.k);
      check(s.tensors.size() == l.tensors.size());
      if (s.format) validate_weight(s.view());
    }
    for (const auto& [role, tensor] : l.tensors) {
      std::vector<const ShardTensor*> parts;
      for (const LayerShard& s : shards) {
        const ShardTensor* t = s.find(role);
        check(t != nullptr && t->name == tensor);
        parts.push_back(t);
      }
      check_reassembly(ck.tensor(tensor), parts, world);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write_checkpoint(std::string_view(reinterpret_cast<const char*>(data), size));
  std::optional<Checkpoint> opened;
  static const bool print = std::getenv("B12X_FUZZ_PRINT") != nullptr;
  try {
    opened.emplace(Checkpoint::open(work_dir()));
  } catch (const Error& e) {
    if (print) std::printf("open: %s\n", e.what());
    return 0;  // refused with a b12x error: the expected outcome for malformed files
  }
  const Checkpoint& ck = *opened;
  if (print) {
    for (const LayerRecord& l : ck.layers()) {
      std::printf("  %-45s %-10s %-8s %s\n", l.name.c_str(), std::string(layer_kind_name(l.kind)).c_str(),
                  l.format_label.c_str(), l.ok() ? "ok" : "");
      for (const auto& p : l.problems) std::printf("    ! %s\n", p.c_str());
    }
    for (const auto& p : ck.problems()) std::printf("  ! %s\n", p.c_str());
  }
  for (const std::string& name : ck.tensor_names()) {
    const TensorView t = ck.tensor(name);
    check(t.nbytes() == ck.entry(name).end - ck.entry(name).begin);
    fuzz::touch(t.data, t.nbytes());
    (void)ck.file_of(name);
  }
  try {
    (void)ck.layer(std::string("no such layer"));
    check(ck.contains("no such layer.weight"));
  } catch (const BadArgument&) {
  }
  bool all_ok = ck.problems().empty();
  int budget = kMaxLayers;
  for (const LayerRecord& l : ck.layers()) {
    all_ok = all_ok && l.ok();
    if (--budget >= 0) check_layer(ck, l);
  }
  check(all_ok == ck.ok());
  return 0;
}
