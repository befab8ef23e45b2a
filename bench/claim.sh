#!/usr/bin/env bash
# What one claim costs behind a backlog (decision 189): the claim as shipped
# beside the claim before decision 189 (the anchor), alternating on the same
# database, with 0 to 100,000 jobs queued. SQLite, then PostgreSQL when
# psql reaches 127.0.0.1:5432. Prints a Markdown table for
# docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u +%FT%TZ) on $(nproc) cores, commit $(git rev-parse --short HEAD)"
run() {
  cargo test --release --test it bench_claim -- --ignored --nocapture --test-threads=1 2>&1 |
    sed -E 's/^test [^|]*//' | grep -E '^\|'
}
run
if psql -h 127.0.0.1 -U postgres -c 'SELECT 1' postgres >/dev/null 2>&1; then
  TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres run | grep -v -e '^| backend' -e '^|---'
fi
