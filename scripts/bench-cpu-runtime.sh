#!/usr/bin/env bash
# The CPU runtime's benchmarks at real size (docs/perf-notes.md "CPU runtime"), run from a bundle
# (scripts/gpu-bundle.sh) on a large host: synthetic checkpoints with the released models' shapes
# written to a tmpfs, then bench decode/prefill with every core, once per kernel path.
#   scripts/bench-cpu-runtime.sh BIN_DIR [WORK_DIR=/dev/shm/ft-bench] [what...]
#   what: q30-4layer q30-decode q30-prefill q36 (default: all, in that order)
#   FT_BENCH_ISAS="amx avx512bf16"   kernel paths to compare (FT_CPU_ISA each; default: the best)
set -uo pipefail
BIN=${1:?usage: bench-cpu-runtime.sh BIN_DIR [WORK_DIR] [what...]}
WORK=${2:-/dev/shm/ft-bench}
shift $(( $# >= 2 ? 2 : 1 ))
WHAT=${*:-"q30-4layer q30-decode q30-prefill q36"}
THREADS=${FT_BENCH_THREADS:-$(nproc)}
ISAS=${FT_BENCH_ISAS:-best}
FT="$BIN/freetoken"
mkdir -p "$WORK"
lscpu | grep -E "Model name|^CPU\(s\)|L3" ; free -g | head -2
echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null) shmem: $(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null)"

make_model() {  # like layers dir
  [ -f "$3/model.safetensors.index.json" ] && return 0
  rm -rf "$3"
  "$FT" make-synthetic-model --like "$1" ${2:+--layers "$2"} --threads "$THREADS" "$3" | tail -1
}
bench() {  # decode|prefill args...: once per kernel path
  for isa in $ISAS; do
    if [ "$isa" = best ]; then "$FT" bench "$@" --threads "$THREADS"
    else echo "== FT_CPU_ISA=$isa"; FT_CPU_ISA=$isa "$FT" bench "$@" --threads "$THREADS"; fi
  done
}

for w in $WHAT; do
  case "$w" in
    q30-4layer)
      make_model qwen3-30b-a3b 4 "$WORK/q30-4" && bench decode --model "$WORK/q30-4" --batch 1 --steps 16 --read-gb 4
      rm -rf "$WORK/q30-4" ;;
    q30-decode)
      make_model qwen3-30b-a3b "" "$WORK/q30" &&
      bench decode --model "$WORK/q30" --batch 1 --steps 24 && bench decode --model "$WORK/q30" --batch 8 --steps 12 ;;
    q30-prefill)
      make_model qwen3-30b-a3b "" "$WORK/q30" && bench prefill --model "$WORK/q30" --prompt 4096 --chunk 4096
      rm -rf "$WORK/q30" ;;
    q36)
      rm -rf "$WORK/q30"
      make_model qwen3.6-35b-a3b "" "$WORK/q36" &&
      bench prefill --model "$WORK/q36" --prompt 4096 --chunk 4096 && bench decode --model "$WORK/q36" --batch 1 --steps 16
      rm -rf "$WORK/q36" ;;
    *) echo "bench-cpu-runtime: unknown '$w'" >&2 ;;
  esac
done
