#!/usr/bin/env bash
# What the checks' clean checkout of a commit costs per check (decision
# 146): checkout and removal over 5 checks, for a repository of 2 000 and
# of 20 000 files, beside `cp -r` of the same files in the same run (the
# anchor: what writing them costs on this disk). Prints a Markdown table
# for docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ) on $(nproc) cores, commit $(git rev-parse --short HEAD), $(git --version)"
cargo test --release --test it bench_checkout -- --ignored --nocapture --test-threads=1 2>&1 |
  sed -E 's/^test [^|]*//' | grep -E '^\|'
