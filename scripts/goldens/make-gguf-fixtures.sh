#!/usr/bin/env bash
# Makes tests/fixtures/gguf/ with llama.cpp's own code: gguf-py writes and quantises (Q8_0, Q4_0,
# Q4_1, random blocks of every type), llama-quantize makes the K-quants and MXFP4 from a tiny F32
# llama model, llama-gguf-split splits one file in two, and every reference .f32 is gguf-py's
# dequantize, checked bit for bit against ggml's dequantize_row_* (gguf_dequant_ggml.c).
#
#   scripts/goldens/make-gguf-fixtures.sh
#
# The llama.cpp source is the one the npm package node-llama-cpp@3.22.1 ships as a git bundle
# (llama/gitRelease.bundle: llama.cpp commit de3ff81, ggml 0.25.1, gguf-py 0.19.0); it is
# unpacked and built (CPU only: ggml-base, llama-quantize, llama-gguf-split) under $FT_GGUF_WORK
# (default /tmp/ft-gguf-fixtures), once. Needs npm, git, cmake, ninja, a C/C++ compiler and a
# python3 with numpy ($PYTHON; Debian: python3-numpy). The tests need none of this: the output is
# committed. The values come from a fixed seed, so a rerun rewrites the same bytes.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
OUT=$ROOT/tests/fixtures/gguf
WORK=${FT_GGUF_WORK:-/tmp/ft-gguf-fixtures}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
NLC=node-llama-cpp@3.22.1

"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "make-gguf-fixtures: $PYTHON has no numpy (Debian: apt-get install python3-numpy)" >&2; exit 2; }
mkdir -p "$WORK"
LLAMA=$WORK/llama.cpp
if [ ! -d "$LLAMA" ]; then
  ( cd "$WORK" && npm pack --silent "$NLC" >/dev/null && tar xzf node-llama-cpp-*.tgz package/llama/gitRelease.bundle )
  git clone --quiet "$WORK/package/llama/gitRelease.bundle" "$LLAMA"
fi
if [ ! -x "$LLAMA/build/bin/llama-quantize" ] || [ ! -x "$LLAMA/build/bin/llama-gguf-split" ]; then
  cmake -S "$LLAMA" -B "$LLAMA/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF >/dev/null
  ninja -C "$LLAMA/build" -j"$JOBS" llama-quantize llama-gguf-split
fi
DEQUANT=$WORK/gguf_dequant_ggml
# libggml-base has C++ inside: link with the C++ driver.
cc -O2 -std=c11 -I"$LLAMA/ggml/include" -c "$ROOT/scripts/goldens/gguf_dequant_ggml.c" -o "$DEQUANT.o"
c++ "$DEQUANT.o" "$LLAMA/build/ggml/src/libggml-base.a" -lm -lpthread -o "$DEQUANT"

export PYTHONPATH=$LLAMA/gguf-py
TMP=$WORK/tmp
rm -rf "$TMP" && mkdir -p "$TMP" "$OUT"
rm -f "$OUT"/*.gguf "$OUT"/*.f32
"$PYTHON" scripts/goldens/make_gguf_fixtures.py inputs "$OUT" "$TMP"

# --pure: every quantisable tensor (2-D and 3-D weights, not norms) gets the named type.
for spec in q4_k:Q4_K_M q5_k:Q5_K_M q6_k:Q6_K mxfp4:MXFP4_MOE; do
  "$LLAMA/build/bin/llama-quantize" --pure "$TMP/llama-f32.gguf" "$OUT/${spec%%:*}.gguf" "${spec#*:}" \
    >"$TMP/quantize-${spec%%:*}.log" 2>&1 || { cat "$TMP/quantize-${spec%%:*}.log" >&2; exit 1; }
done
# Two tensors per part: split-00001-of-00002.gguf (all metadata) and split-00002-of-00002.gguf.
"$LLAMA/build/bin/llama-gguf-split" --split --split-max-tensors 2 "$OUT/q4_k.gguf" "$OUT/split" >"$TMP/split.log" 2>&1 ||
  { cat "$TMP/split.log" >&2; exit 1; }

"$PYTHON" scripts/goldens/make_gguf_fixtures.py references "$OUT" "$DEQUANT" "$TMP"
du -ch "$OUT"/* | tail -1
