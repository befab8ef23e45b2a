#!/usr/bin/env bash
# The set of intake runs whose figures are in docs/benchmarks.md.
set -euo pipefail
cd "$(dirname "$0")"
echo "| backend | durability | connections | duration | deliveries/s | p50 | p99 | server CPU per delivery | peak RSS | durability check |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for run in "sqlite 32 20 process" "sqlite 32 20 fsync" "sqlite 64 20 process" "postgres 32 20 process"; do
  # shellcheck disable=SC2086
  ./intake.sh $run 2>/dev/null
done
