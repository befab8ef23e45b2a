#!/usr/bin/env bash
# Runs a command with every process at nice 19 (background builds, fuzz
# runs) stopped, and continues them afterwards: on a shared development
# machine that is the nearest thing to an idle one.
#
#   bench/quiet.sh bench/compare.sh 15 32
set -euo pipefail
mapfile -t paused < <(ps -eo pid=,ni= | awk '$2 == 19 {print $1}')
resume() { [ "${#paused[@]}" -eq 0 ] || kill -CONT "${paused[@]}" 2>/dev/null || true; }
trap resume EXIT
[ "${#paused[@]}" -eq 0 ] || kill -STOP "${paused[@]}" 2>/dev/null || true
"$@"
