#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, ASan and UBSan, and runs them.
#   scripts/fuzz.sh                       every target for 10 minutes, all cores
#   scripts/fuzz.sh --seconds 60 tokenizer safetensors
#   scripts/fuzz.sh --merge ...           then add what raised coverage to tests/fuzz/corpus/
#   scripts/fuzz.sh --list                the target names
# Each run starts from the committed inputs (tests/fuzz/seeds/<target>/ and the corpus pack
# tests/fuzz/corpus/<target>.pack) and a working corpus in the build directory, with a fixed seed.
# --merge adds the inputs (up to 4 KiB) that raised coverage to the pack. A crash, a sanitizer report, a violated invariant, an
# input slower than --timeout seconds or past --rss-mb is a failure: the input is saved under
# <build>/crashes/, the script exits 1. Replay one with <build>/tests/fuzz/ft_fuzz_<target> FILE.
# Needs clang (Debian: apt-get install clang); the unit suite replays the committed corpora with
# the normal build, without it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${FT_FUZZ_BUILD_DIR:-build-fuzz}
SECONDS_EACH=600
JOBS=$(nproc)
TIMEOUT=25
RSS_MB=4096
MERGE=0
TARGETS=()
ALL=(anthropic_request openai_chat_request responses_request count_tokens_request chat_template tokenizer
     output_parser engine_protocol safetensors checkpoint_header gguf)

while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) SECONDS_EACH=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --rss-mb) RSS_MB=$2; shift 2 ;;
    --merge) MERGE=1; shift ;;
    --list) printf '%s\n' "${ALL[@]}"; exit 0 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz: unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "fuzz: no target '$t' (scripts/fuzz.sh --list)" >&2; exit 2; }
done
command -v clang++ >/dev/null || { echo "fuzz: needs clang++ (Debian: apt-get install clang)" >&2; exit 2; }

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFT_CUDA=OFF -DFT_FUZZ=ON
fi
# Only the chosen targets (and their replay twins, which pack and unpack the corpora).
BUILD_TARGETS=()
for t in "${TARGETS[@]}"; do BUILD_TARGETS+=("ft_fuzz_$t" "ft_replay_$t"); done
cmake --build "$BUILD" --target "${BUILD_TARGETS[@]}" -j"$JOBS"

mkdir -p "$BUILD/crashes" "$BUILD/logs"
PACKS=tests/fuzz/corpus
run_one() {
  local t=$1 work="$BUILD/corpus/$1" dict=()
  # The working corpus starts as the committed pack; new inputs go there, the seeds only seed.
  if [ ! -d "$work" ] && [ -f "$PACKS/$t.pack" ]; then
    "$BUILD/tests/fuzz/ft_replay_$t" --unpack "$PACKS/$t.pack" "$work" >/dev/null
  fi
  mkdir -p "$work"
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  "$BUILD/tests/fuzz/ft_fuzz_$t" "$work" "tests/fuzz/seeds/$t" "${dict[@]}" -seed=1 \
    -max_total_time="$SECONDS_EACH" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_MB" -print_final_stats=1 \
    -artifact_prefix="$BUILD/crashes/$t-" >"$BUILD/logs/$t.log" 2>&1
}
summary() {  # one line per target from its log: executions, coverage, corpus, result
  local t=$1 rc=$2 log="$BUILD/logs/$1.log" execs cov corpus
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  corpus=$(grep -o 'corp: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || true)
  printf '%-22s %s  %10s execs  cov %6s  corpus %5s  %s\n' "$t" "$([ "$rc" = 0 ] && echo ok || echo FAIL)" \
    "${execs:-?}" "${cov:-?}" "${corpus:-?}" "$([ "$rc" = 0 ] || echo "see $log")"
}

echo "fuzz: ${#TARGETS[@]} targets, ${SECONDS_EACH} s each, $JOBS at a time (logs in $BUILD/logs)"
declare -A PID RC
queue=("${TARGETS[@]}")
running=()
while [ ${#queue[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
  while [ ${#queue[@]} -gt 0 ] && [ ${#running[@]} -lt "$JOBS" ]; do
    t=${queue[0]}; queue=("${queue[@]:1}")
    run_one "$t" & PID[$t]=$!; running+=("$t")
  done
  still=()
  for t in "${running[@]}"; do
    if kill -0 "${PID[$t]}" 2>/dev/null; then still+=("$t"); else
      RC[$t]=0; wait "${PID[$t]}" || RC[$t]=$?
      summary "$t" "${RC[$t]}"
    fi
  done
  running=("${still[@]}")
  sleep 1
done

failed=0
for t in "${TARGETS[@]}"; do [ "${RC[$t]}" = 0 ] || failed=1; done
if [ "$MERGE" = 1 ]; then
  mkdir -p "$PACKS"
  for t in "${TARGETS[@]}"; do
    # Into the committed pack's inputs, what else raised coverage (up to 4 KiB: a few large
    # mutants of the real agent bodies would make most of the bytes).
    kept="$BUILD/merge/$t"
    rm -rf "$kept"
    mkdir -p "$kept"
    [ -f "$PACKS/$t.pack" ] && "$BUILD/tests/fuzz/ft_replay_$t" --unpack "$PACKS/$t.pack" "$kept" >/dev/null
    "$BUILD/tests/fuzz/ft_fuzz_$t" -merge=1 -max_len=4096 "$kept" "$BUILD/corpus/$t" >"$BUILD/logs/$t.merge.log" 2>&1
    "$BUILD/tests/fuzz/ft_replay_$t" --pack "$PACKS/$t.pack" "$kept" | sed "s/^/fuzz: $t /"
  done
fi
exit $failed
