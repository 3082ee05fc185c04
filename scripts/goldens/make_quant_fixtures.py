#!/usr/bin/env python3
"""Safetensors fixtures for the FP8, MXFP4 and NVFP4 weight formats (tests/fixtures/quant/).

  make_quant_fixtures.py OUT

writes OUT/quant-formats.safetensors: each format's tensors laid out as the released checkpoints
lay them out, and the values PyTorch computes for them by the formats' published definitions:

  fp8.*    DeepSeek-V3 / Qwen3-FP8 ("quant_method": "fp8", "weight_block_size": [128, 128]):
           weight F8_E4M3 [200, 384] (the last row block partial), weight_scale_inv F32 [2, 3],
           one scale per 128x128 tile: value = float(e4m3) * scale. codes U8 [256] with
           codes_f32 = every e4m3 code as torch's float8_e4m3fn converts it (OCP FP8; 0x7f and
           0xff are NaN).
  mxfp4.*  gpt-oss (OCP Microscaling MXFP4): gate_up_proj_blocks U8 [2, 64, 4, 16] (two E2M1
           codes a byte, the even value in the low nibble) and gate_up_proj_scales U8 [2, 64, 4]
           (E8M0: 2^(s - 127)), 32 values a scale. dequant F32 [2, 64, 128] by the definition, and
           dequant_transformers: transformers' own convert_moe_packed_tensors on the same bytes,
           in the same [experts, rows, cols] order (the script checks they are equal).
  nvfp4.*  NVIDIA ModelOpt NVFP4 ("quant_algo": "NVFP4", group 16): weight U8 [64, 96] (E2M1
           pairs, even value low), weight_scale F8_E4M3 [64, 12] (one a 16 values), weight_scale_2
           F32 [] (the tensor's global scale), input_scale F32 []:
           value = e2m1(code) * (float(weight_scale) * weight_scale_2).

Values come from a fixed seed, so a rerun writes the same file. Runs on CPU PyTorch.
"""
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

SEED = 20261203
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def fp8_tensors(g):
    rows, cols, tile = 200, 384, 128
    w = torch.randn(rows, cols, generator=g) * 0.05
    w[7] = 0.0  # a zero row
    w[130:140] *= 1e-5  # tiny values: e4m3 subnormals after scaling
    w[3, 5] = 40.0  # an outlier that sets its tile's scale
    tr, tc = (rows + tile - 1) // tile, cols // tile
    scale = torch.empty(tr, tc)
    q = torch.empty(rows, cols, dtype=torch.float8_e4m3fn)
    for i in range(tr):
        for j in range(tc):
            block = w[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile]
            s = block.abs().max().clamp(min=1e-12) / 448.0
            scale[i, j] = s
            q[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile] = (block / s).to(torch.float8_e4m3fn)
    full = scale.repeat_interleave(tile, 0)[:rows].repeat_interleave(tile, 1)
    dequant = q.to(torch.float32) * full
    codes = torch.arange(256, dtype=torch.uint8)
    return {
        "fp8.weight": q,
        "fp8.weight_scale_inv": scale,
        "fp8.dequant": dequant,
        "fp8.codes": codes,
        "fp8.codes_f32": codes.view(torch.float8_e4m3fn).to(torch.float32),
    }


def unpack_e2m1(packed):
    """[..., n] bytes -> [..., 2n] E2M1 values, the even value from the low nibble."""
    lut = torch.tensor(E2M1, dtype=torch.float32)
    lo, hi = (packed & 0x0F).long(), (packed >> 4).long()
    return torch.stack([lut[lo], lut[hi]], dim=-1).flatten(-2)


def mxfp4_tensors(g):
    experts, rows, groups = 2, 64, 4
    blocks = torch.randint(0, 256, (experts, rows, groups, 16), generator=g, dtype=torch.uint8)
    scales = torch.randint(127 - 12, 127 + 4, (experts, rows, groups), generator=g, dtype=torch.uint8)
    scales[0, 0, 0] = 0  # the smallest E8M0 scale, 2^-127 (an fp32 subnormal)
    scales[0, 0, 1] = 1
    values = unpack_e2m1(blocks)  # [E, R, G, 32]
    dequant = torch.ldexp(values, scales.to(torch.int32).unsqueeze(-1) - 127).reshape(experts, rows, groups * 32)
    out = {
        "mxfp4.gate_up_proj_blocks": blocks,
        "mxfp4.gate_up_proj_scales": scales,
        "mxfp4.dequant": dequant,
    }
    try:
        from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    except ImportError as e:  # the definition alone then
        print(f"transformers' MXFP4 converter not available ({e}); skipping its reference", file=sys.stderr)
        return out
    theirs = convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=torch.float32)
    if theirs.shape != dequant.shape:  # it returns [experts, cols, rows] for the HF parameter layout
        theirs = theirs.transpose(1, 2).contiguous()
    assert torch.equal(theirs.view(torch.int32), dequant.view(torch.int32)), "transformers disagrees"
    out["mxfp4.dequant_transformers"] = theirs
    return out


def nvfp4_tensors(g):
    rows, cols, group = 64, 192, 16
    weight = torch.randint(0, 256, (rows, cols // 2), generator=g, dtype=torch.uint8)
    # Positive finite E4M3 scales (codes 0x00..0x7e; 0x7f is NaN), subnormals included.
    scale_codes = torch.randint(0, 0x7F, (rows, cols // group), generator=g, dtype=torch.uint8)
    scale_codes[0, 0] = 0x01
    weight_scale = scale_codes.view(torch.float8_e4m3fn)
    global_scale = torch.tensor(0.000123, dtype=torch.float32)
    per_group = weight_scale.to(torch.float32) * global_scale
    dequant = unpack_e2m1(weight) * per_group.repeat_interleave(group, 1)
    return {
        "nvfp4.weight": weight,
        "nvfp4.weight_scale": weight_scale,
        "nvfp4.weight_scale_2": global_scale,
        "nvfp4.input_scale": torch.tensor(0.5, dtype=torch.float32),
        "nvfp4.dequant": dequant,
    }


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(SEED)
    tensors = {**fp8_tensors(g), **mxfp4_tensors(g), **nvfp4_tensors(g)}
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "quant-formats.safetensors"),
              metadata={"made_by": f"scripts/goldens/make_quant_fixtures.py, torch {torch.__version__}"})
    for k, v in tensors.items():
        print(f"{k}: {v.dtype} {list(v.shape)}")


if __name__ == "__main__":
    main()
