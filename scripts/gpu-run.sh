#!/usr/bin/env bash
# Runs on the GPU machine from inside a bundle made by scripts/gpu-bundle.sh (copied as run.sh).
#   run.sh tests [GTEST_FILTER]   run the gpu-labelled suite (and print the device first)
#   run.sh all                    run every test binary in the bundle
#   run.sh -- CMD ARGS...         run any bundled binary, e.g. run.sh -- freetoken device
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export PATH="$HERE/bin:$PATH"
# The CUDA runtime and cuBLAS come from the machine's toolkit (too large to carry).
for d in /usr/local/cuda/lib64 /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
case "${1:-tests}" in
  tests)
    freetoken device --require || exit 1
    "$HERE/bin/ft_gpu_tests" --gtest_color=no ${2:+--gtest_filter="$2"} ;;
  all)
    rc=0
    for t in "$HERE"/bin/ft_*_tests; do
      case "$(basename "$t")" in *bench*) continue ;; esac
      echo "== $(basename "$t")"; "$t" --gtest_color=no --gtest_brief=1 || rc=1
    done
    exit $rc ;;
  --) shift; exec "$@" ;;
  *) echo "usage: run.sh tests [FILTER] | all | -- CMD ARGS..." >&2; exit 2 ;;
esac
