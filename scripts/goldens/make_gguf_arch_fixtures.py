#!/usr/bin/env python3
"""GGUF files of the golden models, written by llama.cpp's own converter (tests/fixtures/gguf/arch/).

For each family named: the golden checkpoint is rebuilt from its recipe
(tests/fixtures/models/<family>/checkpoint/weights.json, golden_weights.py), and
convert_hf_to_gguf.py turns it into a bf16 GGUF (lossless: the weights are bf16) with the
converter's own names, layouts and metadata; the 1,024-token vocabulary is written as placeholder
tokens (the model tests feed token ids). The engine's test loads the GGUF and compares its logits
with the family's golden.safetensors, the HF transformers reference of the same weights: every
renaming, permutation and metadata key the converter applies must be undone exactly.

Run with llama.cpp's converter on the path and a python3 with torch + transformers:

  PYTHONPATH=$LLAMA/gguf-py:$LLAMA make_gguf_arch_fixtures.py --llama $LLAMA --out OUT mixtral ...

(make-gguf-goldens.sh prepares $LLAMA; OUT/<family>.gguf.xz is what gets committed.)
"""
import argparse
import json
import lzma
import os
import shutil
import sys
import traceback

import numpy as np
import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden_weights  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def rebuild_checkpoint(family, out):
    src = os.path.join(ROOT, "tests", "fixtures", "models", family, "checkpoint")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(".json") and f != "weights.json":
            shutil.copy(os.path.join(src, f), out)
    manifest = json.load(open(os.path.join(src, "weights.json")))
    state = {}
    for e in manifest["tensors"]:
        if "values" in e:
            dt = torch.int64 if e["dtype"] == "I64" else torch.int32
            state[e["name"]] = torch.tensor(e["values"], dtype=dt).reshape(e["shape"])
            continue
        v = torch.from_numpy(np.ascontiguousarray(golden_weights.values(e, manifest["seed"])))
        state[e["name"]] = v.to(torch.bfloat16 if e["dtype"] == "BF16" else torch.float32).contiguous()
    save_file(state, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def placeholder_vocab(self):
    """The converter's set_vocab reads a real tokenizer; the golden model gets named tokens."""
    import gguf
    n = self.hparams.get("vocab_size") or self.hparams.get("text_config", {}).get("vocab_size")
    self.gguf_writer.add_tokenizer_model("gpt2")
    self.gguf_writer.add_tokenizer_pre("qwen2")
    self.gguf_writer.add_token_list([f"<t{i}>" for i in range(n)])
    self.gguf_writer.add_token_types([gguf.TokenType.NORMAL] * n)
    self.gguf_writer.add_token_merges([])
    self.gguf_writer.add_eos_token_id(n - 1)
    self.gguf_writer.add_bos_token_id(0)


def convert(llama, ckpt, out):
    if llama not in sys.path:
        sys.path.insert(0, llama)
    import convert_hf_to_gguf as conv
    original = conv.get_model_class

    def with_placeholder_vocab(name, mmproj=False):
        found = original(name, mmproj)
        if mmproj:
            return found
        # The converter's classes must name their model_arch themselves (ModelBase.__init_subclass__).
        extra = {"set_vocab": placeholder_vocab, "model_arch": found.model_arch}
        if getattr(found, "supports_mtp_export", False):
            extra["no_mtp"] = True  # the golden models have no multi-token-prediction layers
        return type(found.__name__, (found,), extra)

    conv.get_model_class = with_placeholder_vocab
    try:
        sys.argv = ["convert_hf_to_gguf.py", "--outtype", "bf16", "--outfile", out, ckpt]
        conv.main()
    finally:
        conv.get_model_class = original


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--tmp", default="/tmp/ft-gguf-arch")
    ap.add_argument("families", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = []
    for family in args.families:
        try:
            ckpt = os.path.join(args.tmp, family)
            shutil.rmtree(ckpt, ignore_errors=True)
            rebuild_checkpoint(family, ckpt)
            gguf_path = os.path.join(args.tmp, family + ".gguf")
            convert(args.llama, ckpt, gguf_path)
            with open(gguf_path, "rb") as f, lzma.open(os.path.join(args.out, family + ".gguf.xz"), "wb",
                                                         preset=9) as z:
                z.write(f.read())
            print(f"{family}: {os.path.getsize(gguf_path)} bytes", flush=True)
        except Exception:
            traceback.print_exc()
            failed.append(family)
    print("failed:", failed or "none")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
