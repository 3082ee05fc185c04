#!/usr/bin/env python3
"""GGUF fixtures for the engine's GGUF reader and dequantisation tests (tests/fixtures/gguf/).

Run by make-gguf-fixtures.sh, which puts llama.cpp's gguf-py on PYTHONPATH and runs llama.cpp's
own tools between the two steps:

  make_gguf_fixtures.py inputs OUT TMP
      OUT/types.gguf          metadata of every value type (nested arrays too), alignment 64,
                              F32/F16/BF16 tensors and a Q5_0 one (a type FreeToken lists but does
                              not compute with)
      OUT/gguf-py-quants.gguf Q8_0, Q4_0, Q4_1 tensors of odd shapes, quantised by gguf-py
      OUT/random-blocks.gguf  blocks of every supported type made of random bytes (every code, sub-block
                              scale and fp16 scale pattern, subnormal scales included; fp16 Inf/NaN
                              scales excluded, since NaN bit patterns differ between CPUs)
      TMP/llama-f32.gguf      a tiny llama-architecture model in F32 for llama-quantize
  make_gguf_fixtures.py references OUT GGML_TOOL TMP
      OUT/<stem>.<tensor>.f32 for every F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K/MXFP4 tensor of
      every OUT/*.gguf: gguf-py's dequantize, written only after checking that it equals, bit for
      bit, ggml's own dequantize_row_* on the same bytes (GGML_TOOL, gguf_dequant_ggml.c).

Values come from a fixed seed, so a rerun writes the same files.
"""
import subprocess
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

SEED = 20261202
COMPUTED = {T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q4_K, T.Q5_K, T.Q6_K, T.MXFP4}


def values(rng, shape):
    """Normal values whose rows span magnitudes: a zero row, a row small enough that fp16 block
    scales become subnormal, and rows from 1e-2 to 1e2, some all negative."""
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    for r in range(rows.shape[0]):
        kind = r % 5
        if kind == 0 and r > 0:
            rows[r] = 0.0
        elif kind == 1:
            rows[r] *= 1e-4
        elif kind == 2:
            rows[r] = -np.abs(rows[r]) * 10.0
        elif kind == 3:
            rows[r] *= 100.0
        else:
            rows[r] *= 0.01
    return rows.reshape(shape)


def write(writer):
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def add_quantised(writer, name, data, qtype):
    # gguf-py's writer takes quantised tensors as bytes [..., bytes per row] and derives the shape.
    writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def types_file(out, rng):
    w = gguf.GGUFWriter(out / "types.gguf", arch="freetoken-test")
    w.add_custom_alignment(64)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo, GGUF")
    w.add_key_value("test.empty_string", "", V.STRING)
    w.add_uint64("test.u64", 12345678901234)
    w.add_uint64("test.u64_huge", 2**63 + 5)
    w.add_int64("test.i64", -(2**62))
    w.add_float64("test.f64", 0.1)
    for key, sub, vals in [
        ("u8", V.UINT8, [1, 2, 255]),
        ("i8", V.INT8, [-128, 0, 127]),
        ("u16", V.UINT16, [65535, 1]),
        ("i16", V.INT16, [-32768, 32767]),
        ("u32", V.UINT32, [4294967295, 0]),
        ("i32", V.INT32, [-7, 7, 2147483647]),
        ("u64", V.UINT64, [18446744073709551615]),
        ("i64", V.INT64, [-9223372036854775808, 5]),
        ("f32", V.FLOAT32, [0.5, -1.25, 3.0]),
        ("f64", V.FLOAT64, [0.1, -2.5]),
        ("bool", V.BOOL, [True, False, True]),
        ("string", V.STRING, ["a", "", "\u00fcn\u00ef"]),
    ]:
        w.add_key_value("test.array." + key, vals, V.ARRAY, sub_type=sub)
    w.add_key_value("test.array.nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY, sub_type=V.ARRAY)
    w.add_tensor("dense.f32", values(rng, (5,)))
    w.add_tensor("dense.f16", values(rng, (3, 7)).astype(np.float16))
    add_quantised(w, "dense.bf16", values(rng, (2, 3, 4)), T.BF16)
    add_quantised(w, "other.q5_0", values(rng, (2, 32)), T.Q5_0)
    write(w)


def quants_file(out, rng):
    w = gguf.GGUFWriter(out / "gguf-py-quants.gguf", arch="freetoken-test")
    for qtype in (T.Q8_0, T.Q4_0, T.Q4_1):
        tag = qtype.name.lower()
        add_quantised(w, f"{tag}.matrix", values(rng, (7, 96)), qtype)
        add_quantised(w, f"{tag}.experts", values(rng, (2, 3, 32)), qtype)
        add_quantised(w, f"{tag}.row", values(rng, (1, 160)), qtype)
    write(w)


def random_blocks(rng, qtype, n_blocks):
    """Random block bytes whose fp16 fields hold no Inf/NaN (exponent 31 is cleared to 30)."""
    size = gguf.GGML_QUANT_SIZES[qtype][1]
    blocks = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    if qtype == T.Q6_K:
        f16_at = [size - 2]
    elif qtype in (T.Q4_1, T.Q4_K, T.Q5_K):
        f16_at = [0, 2]
    elif qtype in (T.Q8_0, T.Q4_0):
        f16_at = [0]
    else:
        f16_at = []  # MXFP4: an E8M0 exponent, every value finite in ggml's reading
    for at in f16_at:
        h = blocks[:, at:at + 2].copy().view(np.uint16)
        inf_nan = (h & 0x7C00) == 0x7C00
        h[inf_nan] &= np.uint16(0xFBFF)
        blocks[:, at:at + 2] = h.view(np.uint8)
    if qtype == T.MXFP4:
        blocks[:, 0] = np.arange(n_blocks) % 256  # every exponent, subnormal results (0, 1) included
    return blocks


def random_blocks_file(out, rng):
    w = gguf.GGUFWriter(out / "random-blocks.gguf", arch="freetoken-test")
    for qtype, rows in [(T.Q8_0, 16), (T.Q4_0, 16), (T.Q4_1, 16), (T.Q4_K, 4), (T.Q5_K, 4), (T.Q6_K, 4),
                        (T.MXFP4, 64)]:
        blocks_per_row = 2 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else 4
        blocks = random_blocks(rng, qtype, rows * blocks_per_row)
        w.add_tensor(f"random.{qtype.name.lower()}", blocks.reshape(rows, -1), raw_dtype=qtype)
    write(w)


def llama_f32(tmp, rng):
    """A tiny llama model, F32, for llama-quantize: the hyperparameters its loader needs and
    tensors whose rows are whole K-quant blocks (256 values)."""
    w = gguf.GGUFWriter(tmp / "llama-f32.gguf", arch="llama")
    w.add_name("freetoken-gguf-fixture")
    w.add_context_length(64)
    w.add_embedding_length(256)
    w.add_block_count(1)
    w.add_feed_forward_length(512)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(8)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tensor("blk.0.attn_norm.weight", values(rng, (256,)))
    w.add_tensor("blk.0.ffn_up.weight", values(rng, (3, 256)))
    w.add_tensor("blk.0.ffn_down.weight", values(rng, (2, 512)))
    w.add_tensor("blk.0.ffn_gate_exps.weight", values(rng, (2, 2, 256)))
    write(w)


def references(out, ggml_tool, tmp):
    written = 0
    for path in sorted(out.glob("*.gguf")):
        if "-of-" in path.stem:
            continue  # split parts: the test compares their tensors with the file they were split from
        for t in gguf.GGUFReader(path).tensors:
            if t.tensor_type not in COMPUTED:
                continue
            ours = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32, copy=False)
            ours = np.ascontiguousarray(ours).tobytes()
            raw, theirs = tmp / "tensor.bin", tmp / "tensor.f32"
            raw.write_bytes(np.ascontiguousarray(t.data).tobytes())
            subprocess.run([ggml_tool, str(int(t.tensor_type)), str(t.n_elements), raw, theirs], check=True)
            if theirs.read_bytes() != ours:
                sys.exit(f"make_gguf_fixtures: gguf-py and ggml disagree on {path.name}:{t.name}")
            (out / f"{path.stem}.{t.name}.f32").write_bytes(ours)
            written += 1
    print(f"make_gguf_fixtures: {written} references, gguf-py == ggml for each")


def main():
    step, out = sys.argv[1], Path(sys.argv[2])
    rng = np.random.default_rng(SEED)
    if step == "inputs":
        tmp = Path(sys.argv[3])
        types_file(out, rng)
        quants_file(out, rng)
        random_blocks_file(out, rng)
        llama_f32(tmp, rng)
    elif step == "references":
        references(out, sys.argv[3], Path(sys.argv[4]))
    else:
        sys.exit(f"make_gguf_fixtures: unknown step {step}")


if __name__ == "__main__":
    main()
