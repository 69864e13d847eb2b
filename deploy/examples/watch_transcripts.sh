#!/usr/bin/env bash
# Keep GAML's journal up to date with your coding agents' sessions: every file under the folders given (default:
# Claude Code's and Codex's session folders) is ingested now, then again whenever it grows. With a daemon running
# (`gaml run`) the passes go through it; otherwise they use the store directly. Ctrl-C (or SIGTERM) stops.
#
#   deploy/examples/watch_transcripts.sh                      # ~/.claude/projects and ~/.codex/sessions
#   deploy/examples/watch_transcripts.sh ~/work/agent-logs    # any folder of transcripts
set -euo pipefail
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  for d in "$HOME/.claude/projects" "$HOME/.codex/sessions"; do
    [ -d "$d" ] && dirs+=("$d")
  done
fi
if [ ${#dirs[@]} -eq 0 ]; then
  echo "no session folder found: name one (e.g. $0 ~/.claude/projects)" >&2
  exit 1
fi
exec gaml ingest --watch --interval "${GAML_WATCH_INTERVAL:-2}" "${dirs[@]}"
