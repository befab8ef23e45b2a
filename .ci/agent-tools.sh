#!/usr/bin/env bash
# Installs the agent CLIs the real-agent stories drive, at pinned versions,
# into $CLOSER_AGENT_TOOLS (default ~/.cache/closer-agent-tools), once: a
# later run with the same versions installs nothing.
set -euo pipefail

dir="${CLOSER_AGENT_TOOLS:-$HOME/.cache/closer-agent-tools}"
pins=(
  "@anthropic-ai/claude-code@2.1.330"
  "@openai/codex@0.169.0"
  "opencode-ai@1.18.33"
)

installed() { # package@version
  local name="${1%@*}" version="${1##*@}"
  local manifest="$dir/node_modules/$name/package.json"
  [ -f "$manifest" ] && grep -q "\"version\": *\"$version\"" "$manifest"
}

missing=()
for pin in "${pins[@]}"; do installed "$pin" || missing+=("$pin"); done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "agent CLIs already installed in $dir"
else
  command -v npm >/dev/null || { echo "FAIL: npm is needed to install ${missing[*]}" >&2; exit 1; }
  mkdir -p "$dir"
  npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "${pins[@]}"
fi
for tool in claude codex opencode; do
  printf '%s: %s\n' "$tool" "$("$dir/node_modules/.bin/$tool" --version 2>&1 | head -1)"
done
