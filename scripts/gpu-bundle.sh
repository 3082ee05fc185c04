#!/usr/bin/env bash
# Builds FreeToken with CUDA here and packs a relocatable bundle for a GPU machine that has the
# NVIDIA driver but none of our Debian libraries:
#   .bundle/bin/   freetoken and the test binaries (RPATH $ORIGIN/../lib)
#   .bundle/lib/   every non-system shared library they need (RPATH $ORIGIN)
#   .bundle/run.sh the runner (scripts/gpu-run.sh)
# Usage: scripts/gpu-bundle.sh [--tar] [OUT_DIR=.bundle]   (FT_CUDA_ARCHS=90 by default: the test GPU)
#   --tar                 also strip the bundle and pack it as OUT_DIR.tar.xz (a tenth of its size:
#                         most of a binary is its GPU code), for hosts it has to be copied to
#   FT_BUNDLE_BINS="freetoken ft_gpu_tests"   only these binaries (default: freetoken and every test binary)
#   FT_BUNDLE_BUILD_DIR=build                 bundle an existing CUDA build instead of build-gpu
set -euo pipefail
cd "$(dirname "$0")/.."
TAR=0
if [ "${1:-}" = --tar ]; then TAR=1; shift; fi
OUT=${1:-.bundle}
BUILD=${FT_BUNDLE_BUILD_DIR:-build-gpu}
ARCHS=${FT_CUDA_ARCHS:-90}
command -v patchelf >/dev/null || { echo "gpu-bundle: patchelf missing (scripts/setup.sh installs it)" >&2; exit 2; }

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"

rm -rf "$OUT" && mkdir -p "$OUT/bin" "$OUT/lib"
bins=()
if [ -n "${FT_BUNDLE_BINS:-}" ]; then
  for b in $FT_BUNDLE_BINS; do
    if [ -x "$BUILD/$b" ]; then bins+=("$BUILD/$b"); else bins+=("$BUILD/tests/$b"); fi
  done
else
  bins=("$BUILD/freetoken")
  for t in "$BUILD"/tests/ft_*_tests; do [ -x "$t" ] && bins+=("$t"); done
fi
cp "${bins[@]}" "$OUT/bin/"

# Libraries the GPU machine provides itself (glibc, the C++ runtime, the driver, the CUDA toolkit's
# runtime and cuBLAS: run.sh puts its toolkit on the library path) stay out.
is_system() {
  case "$(basename "$1")" in
    linux-vdso*|ld-linux*|libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libstdc++.so*|libgcc_s.so*|libcuda.so*) return 0 ;;
    libcudart.so*|libcublas.so*|libcublasLt.so*) return 0 ;;
  esac
  return 1
}
for b in "${bins[@]}"; do
  ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
    is_system "$lib" || cp -n -L "$lib" "$OUT/lib/" 2>/dev/null || true
  done
done
[ "$TAR" = 1 ] && { strip "$OUT"/bin/* "$OUT"/lib/* 2>/dev/null || true; }
for f in "$OUT"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$OUT"/lib/*; do chmod u+w "$f"; patchelf --set-rpath '$ORIGIN' "$f"; done
cp scripts/gpu-run.sh "$OUT/run.sh"
chmod +x "$OUT/run.sh"
if [ "$TAR" = 1 ]; then
  tar -C "$OUT" -cJf "$OUT.tar.xz" .
  du -sh "$OUT.tar.xz" | awk '{print "gpu-bundle: " $1 " in '"$OUT.tar.xz"' (unpack: mkdir D && tar -C D -xJf '"$OUT.tar.xz"')"}'
fi
du -sh "$OUT" | awk '{print "gpu-bundle: " $1 " in '"$OUT"'"}'
ls "$OUT/lib"
