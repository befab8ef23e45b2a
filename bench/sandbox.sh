#!/usr/bin/env bash
# The sandbox's cost per process start (agent and goal command), median and
# p90 over 50 starts of `sh -c true`, unconfined vs bwrap vs Landlock.
# Prints a Markdown table for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ) on $(nproc) cores, commit $(git rev-parse --short HEAD), $(bwrap --version 2>/dev/null || echo 'no bwrap')"
cargo test --release --test it bench_sandbox -- --ignored --nocapture --test-threads=1 2>&1 |
  sed -E 's/^test [^|]*//' | grep -E '^\|'
