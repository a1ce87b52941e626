"""`b12x convert-gguf` against the gguf package (writer, reader and dequantizers) and safetensors.

Small GGUF files are written with gguf.GGUFWriter: F32/F16 norms, a BF16 head, Q8_0 / IQ2_XS /
IQ2_XXS matrices of random valid blocks (random bytes with finite fp16 scales), fresh each run (the
seed is printed and in every failure message). The converted checkpoint is read with the safetensors
package and checked for names, dtypes, shapes [N, K/group, payload], payload bytes (identical to
the GGUF tensor bytes as gguf.GGUFReader returns them, rows of llama Q/K un-permuted), config.json,
and that `b12x codec decode` of each converted payload equals gguf.quants.dequantize of the GGUF
tensor bit for bit. Malformed files must exit non-zero with a message naming the rule."""
import json
import os
import struct

import ml_dtypes  # registers bfloat16 with numpy, so safetensors can return BF16 tensors
import numpy as np
import pytest
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFReader, GGUFWriter
from gguf.quants import dequantize
from safetensors import safe_open
from safetensors.numpy import load_file

from conftest import run_cli

SEED = int.from_bytes(os.urandom(8), "little")

ALGO = {T.Q8_0: ("Q8_0", 32, 34, 8.5), T.IQ2_XXS: ("IQ2_XXS", 256, 66, 2.0625),
        T.IQ2_XS: ("IQ2_XS", 256, 74, 2.3125)}
CODEC = {T.Q8_0: "q8_0", T.IQ2_XXS: "iq2_xxs", T.IQ2_XS: "iq2_xs"}

# A two-layer llama: hidden 256, 4 heads of 64 (2 KV heads), FFN 512, vocab 96.
HIDDEN, HEADS, KV_HEADS, FFN, VOCAB = 256, 4, 2, 512, 96
HEAD_DIM = HIDDEN // HEADS


@pytest.fixture(scope="module")
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


def random_blocks(rng, qtype, rows, k):
    """Random valid blocks, uint8 [rows, k / group * payload]: every byte random except the fp16
    scale d at the start of each block, drawn finite (|d| in [2^-14, 2^-6], either sign)."""
    group, payload = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(rows, k // group, payload), dtype=np.uint8)
    d = rng.uniform(2.0**-14, 2.0**-6, size=(rows, k // group)) * rng.choice([-1.0, 1.0], size=(rows, k // group))
    b[..., 0:2] = d.astype(np.float16).view(np.uint8).reshape(rows, k // group, 2)
    return b.reshape(rows, -1)


def write_gguf(path, arch, tensors, metadata=()):
    """tensors: [(name, array, raw_dtype or None)] in file order; metadata: [(method, value)]."""
    w = GGUFWriter(str(path), arch)
    for method, value in metadata:
        getattr(w, method)(value)
    for name, array, raw in tensors:
        w.add_tensor(name, array, raw_dtype=raw)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def llama_tensors(rng, layers=2):
    """(gguf name, hf name, array, raw dtype) of a small llama in llama.cpp's layout."""
    t = [("token_embd.weight", "model.embed_tokens.weight", random_blocks(rng, T.Q8_0, VOCAB, HIDDEN), T.Q8_0)]
    for i in range(layers):
        p, h = f"blk.{i}.", f"model.layers.{i}."
        t += [
            (p + "attn_norm.weight", h + "input_layernorm.weight", rng.standard_normal(HIDDEN).astype(np.float32), None),
            (p + "attn_q.weight", h + "self_attn.q_proj.weight", random_blocks(rng, T.IQ2_XS, HIDDEN, HIDDEN), T.IQ2_XS),
            (p + "attn_k.weight", h + "self_attn.k_proj.weight",
             random_blocks(rng, T.IQ2_XXS, KV_HEADS * HEAD_DIM, HIDDEN), T.IQ2_XXS),
            (p + "attn_v.weight", h + "self_attn.v_proj.weight", random_blocks(rng, T.Q8_0, KV_HEADS * HEAD_DIM, HIDDEN), T.Q8_0),
            (p + "attn_output.weight", h + "self_attn.o_proj.weight", random_blocks(rng, T.IQ2_XS, HIDDEN, HIDDEN), T.IQ2_XS),
            (p + "ffn_norm.weight", h + "post_attention_layernorm.weight", rng.standard_normal(HIDDEN).astype(np.float16), None),
            (p + "ffn_gate.weight", h + "mlp.gate_proj.weight", random_blocks(rng, T.IQ2_XXS, FFN, HIDDEN), T.IQ2_XXS),
            (p + "ffn_up.weight", h + "mlp.up_proj.weight", random_blocks(rng, T.IQ2_XS, FFN, HIDDEN), T.IQ2_XS),
            (p + "ffn_down.weight", h + "mlp.down_proj.weight", random_blocks(rng, T.Q8_0, HIDDEN, FFN), T.Q8_0),
        ]
    t += [
        ("output_norm.weight", "model.norm.weight", rng.standard_normal(HIDDEN).astype(np.float32), None),
        ("output.weight", "lm_head.weight", rng.integers(0, 0x7F00, size=(VOCAB, HIDDEN), dtype=np.uint16), T.BF16),
    ]
    return t


LLAMA_METADATA = [("add_block_count", 2), ("add_embedding_length", HIDDEN), ("add_feed_forward_length", FFN),
                  ("add_head_count", HEADS), ("add_head_count_kv", KV_HEADS), ("add_context_length", 4096),
                  ("add_layer_norm_rms_eps", 1e-5), ("add_rope_freq_base", 500000.0), ("add_vocab_size", VOCAB)]


def llama_permute(weights, n_head, n_head_kv):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute, verbatim (numpy instead of torch): the
    HF -> GGUF row order of attn_q (n_head, n_head) and attn_k (n_head, n_kv_head). The converter
    must undo it, so permuting the converted rows again must give back the GGUF rows."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2)
            .reshape(weights.shape))


def to_gguf_rows(gname, rows):
    """The GGUF row order of converted rows (identity except llama attn_q / attn_k)."""
    if gname.endswith("attn_q.weight"):
        return llama_permute(rows, HEADS, HEADS)
    if gname.endswith("attn_k.weight"):
        return llama_permute(rows, HEADS, KV_HEADS)
    return rows


def gguf_bytes(reader, name):
    """The tensor's bytes as the gguf package reads them, uint8 [rows, bytes per row]."""
    t = next(t for t in reader.tensors if t.name == name)
    data = np.asarray(t.data)
    return data.view(np.uint8).reshape(data.shape[0] if data.ndim > 1 else 1, -1)


def codec_decode(tmp_path, qtype, payload):
    """`b12x codec decode` of a converted payload uint8 [N, K/group, block] -> float32 [N, K]."""
    n, blocks, _ = payload.shape
    src, dst = tmp_path / "w.u8", tmp_path / "w.f32"
    np.ascontiguousarray(payload).tofile(src)
    run_cli("codec", "decode", "--format", CODEC[qtype], "--rows", n, "--cols", blocks * ALGO[qtype][1],
            "--in", src, "--out", dst)
    return np.fromfile(dst, dtype=np.float32).reshape(n, -1)


@pytest.fixture(scope="module")
def llama(rng, tmp_path_factory):
    """A llama GGUF and its conversion: (gguf path, tensor list, out dir, completed process)."""
    d = tmp_path_factory.mktemp("llama")
    tensors = llama_tensors(rng)
    path = d / "model.gguf"
    write_gguf(path, "llama", [(g, a, r) for g, _, a, r in tensors] +
               [("rope_freqs.weight", np.ones(HEAD_DIM // 2, dtype=np.float32), None)],
               LLAMA_METADATA + [("add_bos_token_id", 1), ("add_eos_token_id", 2)])
    out = d / "out"
    proc = run_cli("convert-gguf", path, out)
    return path, tensors, out, proc


def test_names_shapes_and_bytes(llama):
    path, tensors, out, proc = llama
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors"], f"seed={SEED}"
    st = load_file(out / "model.safetensors")
    reader = GGUFReader(str(path))
    assert set(st) == {hf for _, hf, _, _ in tensors} | {"rope_freqs.weight"}, f"seed={SEED}"
    for gname, hf, array, raw in tensors:
        got = st[hf]
        want = gguf_bytes(reader, gname)
        assert np.array_equal(want.reshape(-1), array.view(np.uint8).reshape(-1)), f"seed={SEED}: gguf wrote {gname} differently"
        if raw in ALGO:
            _, group, payload, _ = ALGO[raw]
            rows, k = array.shape[0], array.shape[1] // payload * group
            assert got.dtype == np.uint8 and got.shape == (rows, k // group, payload), f"seed={SEED}: {hf} {got.shape}"
        elif raw == T.BF16:
            assert got.dtype == ml_dtypes.bfloat16 and got.shape == array.shape, f"{hf}: {got.dtype} {got.shape}"
        else:
            assert got.dtype == array.dtype and got.shape == array.shape, f"seed={SEED}: {hf} {got.dtype} {got.shape}"
        got_rows = to_gguf_rows(gname, got.view(np.uint8).reshape(got.shape[0], -1))
        assert np.array_equal(got_rows, want.reshape(got.shape[0], -1)), f"seed={SEED}: {hf} bytes differ"
    assert np.array_equal(st["rope_freqs.weight"], np.ones(HEAD_DIM // 2, dtype=np.float32))
    assert "rope_freqs.weight' has no known Hugging Face name" in proc.stderr
    assert "100%" in proc.stderr
    # q/k/v and gate/up differ in every layer: vLLM fuses them, so the converter says so.
    assert "4 fused projection(s) mix formats" in proc.stderr
    assert "model.layers.0.self_attn.qkv_proj (k_proj IQ2_XXS, q_proj IQ2_XS, v_proj Q8_0)" in proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["tensors"] == len(tensors) + 1 and summary["files"] == ["model.safetensors"]


def test_bf16_is_kept_bit_for_bit(llama):
    _, tensors, out, _ = llama
    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
    raw = (out / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    entry = header["lm_head.weight"]
    assert entry["dtype"] == "BF16" and entry["shape"] == [VOCAB, HIDDEN]
    begin, end = entry["data_offsets"]
    data = raw[8 + int.from_bytes(raw[:8], "little"):]
    head = next(a for g, _, a, _ in tensors if g == "output.weight")
    assert data[begin:end] == head.tobytes()


def test_config_json(llama):
    _, tensors, out, _ = llama
    cfg = json.loads((out / "config.json").read_text())
    q = cfg["quantization_config"]
    assert q["quant_method"] == "modelopt" and q["quant_algo"] == "MIXED_PRECISION"
    expected = {}
    for _, hf, _, raw in tensors:
        if raw in ALGO:
            algo, group, payload, bits = ALGO[raw]
            expected[hf.removesuffix(".weight")] = {"quant_algo": algo, "group_size": group,
                                                    "block_payload_bytes": payload, "packing": "ggml",
                                                    "effective_bits": bits}
    assert q["quantized_layers"] == expected
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"]
    for key, value in {"hidden_size": HIDDEN, "num_hidden_layers": 2, "intermediate_size": FFN,
                       "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
                       "max_position_embeddings": 4096, "vocab_size": VOCAB, "bos_token_id": 1,
                       "eos_token_id": 2, "tie_word_embeddings": False}.items():
        assert cfg[key] == value, key
    assert cfg["rms_norm_eps"] == pytest.approx(1e-5) and cfg["rope_theta"] == 500000.0


def test_decode_matches_gguf_dequantize(llama, tmp_path):
    path, tensors, out, _ = llama
    st = load_file(out / "model.safetensors")
    reader = GGUFReader(str(path))
    for gname, hf, _, raw in tensors:
        if raw not in ALGO:
            continue
        want = dequantize(gguf_bytes(reader, gname), raw)
        got = to_gguf_rows(gname, codec_decode(tmp_path, raw, st[hf]))
        assert got.shape == want.shape, f"seed={SEED}: {hf}"
        bad = np.nonzero(got.view(np.uint32) != want.astype(np.float32).view(np.uint32))
        assert bad[0].size == 0, f"seed={SEED}: {hf}: {bad[0].size} values differ, first at {bad[0][0], bad[1][0]}"


def test_other_architectures_keep_rows_and_split_experts(rng, tmp_path):
    experts, inter = 3, 256
    gate = random_blocks(rng, T.IQ2_XS, experts * inter, HIDDEN).reshape(experts, inter, -1)
    down = random_blocks(rng, T.Q8_0, experts * HIDDEN, inter).reshape(experts, HIDDEN, -1)
    q = random_blocks(rng, T.IQ2_XXS, HIDDEN, HIDDEN)
    router = rng.standard_normal((experts, HIDDEN)).astype(np.float32)
    path = tmp_path / "moe.gguf"
    write_gguf(path, "qwen2", [("blk.0.attn_q.weight", q, T.IQ2_XXS), ("blk.0.ffn_gate_exps.weight", gate, T.IQ2_XS),
                               ("blk.0.ffn_down_exps.weight", down, T.Q8_0), ("blk.0.ffn_gate_inp.weight", router, None)],
               [("add_expert_count", experts), ("add_head_count", HEADS)])
    out = tmp_path / "out"
    proc = run_cli("convert-gguf", path, out)
    st = load_file(out / "model.safetensors")
    # qwen2 uses NeoX rotary: llama.cpp never permuted its rows, so they are copied as they are.
    assert np.array_equal(st["model.layers.0.self_attn.q_proj.weight"].reshape(HIDDEN, -1), q), f"seed={SEED}"
    assert np.array_equal(st["model.layers.0.mlp.gate.weight"], router)
    layers = json.loads((out / "config.json").read_text())["quantization_config"]["quantized_layers"]
    for e in range(experts):
        g = st[f"model.layers.0.mlp.experts.{e}.gate_proj.weight"]
        d = st[f"model.layers.0.mlp.experts.{e}.down_proj.weight"]
        assert g.shape == (inter, 1, 74) and d.shape == (HIDDEN, inter // 32, 34)
        assert np.array_equal(g.reshape(inter, -1), gate[e]), f"seed={SEED}: expert {e}"
        assert np.array_equal(d.reshape(HIDDEN, -1), down[e]), f"seed={SEED}: expert {e}"
        assert layers[f"model.layers.0.mlp.experts.{e}.gate_proj"]["quant_algo"] == "IQ2_XS"
        assert layers[f"model.layers.0.mlp.experts.{e}.down_proj"]["quant_algo"] == "Q8_0"
    assert json.loads(proc.stdout)["tensors"] == 2 + 2 * experts


def test_sharding_writes_an_index(rng, tmp_path):
    tensors = llama_tensors(rng, layers=1)
    path = tmp_path / "m.gguf"
    write_gguf(path, "llama", [(g, a, r) for g, _, a, r in tensors], LLAMA_METADATA)
    out = tmp_path / "out"
    run_cli("convert-gguf", path, out, "--max-shard-bytes", "60kB")
    index = json.loads((out / "model.safetensors.index.json").read_text())
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    n = len(files)
    assert n > 2 and files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)]
    assert set(index["weight_map"].values()) == set(files)
    total = 0
    for f in files:
        with safe_open(str(out / f), framework="numpy") as s:
            names = list(s.keys())
            assert all(index["weight_map"][k] == f for k in names)
            size = sum(s.get_tensor(k).nbytes for k in names)
            assert size <= 60_000 or len(names) == 1, f"{f}: {size} bytes"
            total += size
    assert set(index["weight_map"]) == {hf for _, hf, _, _ in tensors}
    assert index["metadata"]["total_size"] == total


def test_unsupported_types_are_listed_or_skipped(rng, tmp_path):
    path = tmp_path / "mixed.gguf"
    q4k = rng.integers(0, 256, size=(8, 144), dtype=np.uint8)
    q5 = rng.integers(0, 256, size=(8, 22), dtype=np.uint8)
    write_gguf(path, "llama", [("blk.0.ffn_down.weight", q4k, T.Q4_K), ("blk.0.attn_v.weight", q5, T.Q5_0),
                               ("blk.0.attn_norm.weight", np.ones(32, dtype=np.float32), None)])
    proc = run_cli("convert-gguf", path, tmp_path / "out", check=False)
    assert proc.returncode != 0
    assert "unsupported type" in proc.stderr
    assert "blk.0.ffn_down.weight (Q4_K)" in proc.stderr and "blk.0.attn_v.weight (Q5_0)" in proc.stderr
    assert "--skip-unsupported" in proc.stderr
    proc = run_cli("convert-gguf", path, tmp_path / "out2", "--skip-unsupported")
    assert "leaving out 2 tensor(s)" in proc.stderr
    assert list(load_file(tmp_path / "out2" / "model.safetensors")) == ["model.layers.0.input_layernorm.weight"]
    assert json.loads(proc.stdout)["skipped"] == ["blk.0.ffn_down.weight (Q4_K)", "blk.0.attn_v.weight (Q5_0)"]


def test_output_folder_rules(rng, tmp_path):
    path = tmp_path / "m.gguf"
    write_gguf(path, "llama", [("output_norm.weight", np.ones(32, dtype=np.float32), None)])
    out = tmp_path / "out"
    run_cli("convert-gguf", path, out)
    proc = run_cli("convert-gguf", path, out, check=False)
    assert proc.returncode != 0 and "is not empty" in proc.stderr and "--overwrite" in proc.stderr
    (out / "tokenizer.json").write_text("{}")
    run_cli("convert-gguf", path, out, "--overwrite", "--quiet")
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "tokenizer.json"]


# ---- malformed files ---------------------------------------------------------------------------

def raw_gguf(tensors, kv=b"", n_kv=0, version=3, magic=b"GGUF", count=None, data=None):
    """A hand-built GGUF image. tensors: [(name, ne, type id, offset)]; data defaults to enough
    bytes for every tensor to fit when its ne/type are sane."""
    out = magic + struct.pack("<IQQ", version, len(tensors) if count is None else count, n_kv) + kv
    for name, ne, typ, off in tensors:
        out += struct.pack("<Q", len(name)) + name.encode() + struct.pack("<I", len(ne))
        out += b"".join(struct.pack("<Q", e) for e in ne) + struct.pack("<IQ", typ, off)
    out += b"\0" * (-len(out) % 32)
    return out + (data if data is not None else bytes(4096))


MALFORMED = {
    "bad_magic": (raw_gguf([("w", [8], 0, 0)], magic=b"GGUG"), "bad magic"),
    "version": (raw_gguf([("w", [8], 0, 0)], version=7), "unsupported GGUF version 7"),
    "huge_tensor_count": (raw_gguf([], count=1 << 40), "tensor count 1099511627776 cannot fit"),
    "huge_kv_count": (raw_gguf([], n_kv=1 << 50), "metadata count 1125899906842624 cannot fit"),
    "unknown_type": (raw_gguf([("w", [8], 99, 0)]), "tensor 'w': unknown ggml type id 99"),
    "overlap": (raw_gguf([("a", [64], 0, 0), ("b", [8], 0, 64)]), "overlap tensor 'a'"),
    "misaligned": (raw_gguf([("w", [8], 0, 16)]), "offset 16 is not a multiple of the alignment 32"),
    "past_end": (raw_gguf([("w", [64, 64], 0, 0)]), "run past the end of the data section"),
    "too_many_dims": (raw_gguf([("w", [1, 1, 1, 1, 1], 0, 0)]), "has 5 dimensions"),
    "block_rows": (raw_gguf([("w", [40, 2], 8, 0)]), "not a multiple of the Q8_0 block size 32"),
    "string_length": (raw_gguf([], kv=struct.pack("<Q", 1 << 40) + b"key", n_kv=1), "exceeds the limit"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_exit_nonzero_naming_the_rule(tmp_path, case):
    image, rule = MALFORMED[case]
    path = tmp_path / f"{case}.gguf"
    path.write_bytes(image)
    proc = run_cli("convert-gguf", path, tmp_path / "out", check=False)
    assert proc.returncode == 2, proc.stderr
    assert f"gguf file '{path}'" in proc.stderr and rule in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()


def test_truncated_files_exit_nonzero(llama, tmp_path):
    path = llama[0]
    image = path.read_bytes()
    for cut in (0, 7, 23, 100, len(image) // 2, len(image) - 1):
        p = tmp_path / f"cut{cut}.gguf"
        p.write_bytes(image[:cut])
        proc = run_cli("convert-gguf", p, tmp_path / "out", check=False)
        assert proc.returncode == 2 and ("truncated" in proc.stderr or "cannot fit" in proc.stderr), \
            f"cut at {cut}: {proc.stderr}"
