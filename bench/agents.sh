#!/usr/bin/env bash
# The real agent CLIs through closer: tokens and wall time per iteration
# with the session resumed and fresh, and status-comment edits per run with
# live progress on and off. Needs the pinned tools (.ci/agent-tools.sh).
# Prints Markdown tables for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/agent-tools.sh >/dev/null
export CLOSER_AGENT_TOOLS="${CLOSER_AGENT_TOOLS:-$HOME/.cache/closer-agent-tools}"
echo "# $(date -u +%FT%TZ) on $(nproc) cores, commit $(git rev-parse --short HEAD)"
cargo test --test it bench_agents -- --ignored --nocapture --test-threads=1 2>&1 |
  sed -E 's/^test [^|]*//' | grep -E '^\|'
