#!/usr/bin/env bash
# Where the intake's CPU goes: runs the same load as bench/intake.sh (SQLite,
# 32 connections) and records the server with `perf record -g` meanwhile,
# then prints the top of the profile by binary and by symbol.
#
#   bench/profile.sh [seconds] [process|fsync]
#
# Needs: wrk, openssl, perf (apt-get install linux-perf). The load is a
# little lower while perf records.
set -euo pipefail

seconds=${1:-14}
durability=${2:-process}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup
start_server "sqlite://$work/bench.db" "$durability"

BENCH_BODY=$body BENCH_SIGNATURE=$signature BENCH_RUN="p$$" \
  wrk -t2 -c32 -d"${seconds}s" -s "$root/bench/intake.lua" \
  "http://127.0.0.1:$port" >"$work/wrk.txt" &
wrk_pid=$!
sleep 2
perf record -g -o "$work/perf.data" -p "$server_pid" -- sleep $((seconds - 4)) 2>/dev/null
wait "$wrk_pid"
grep -E "Requests/sec" "$work/wrk.txt"
perf report -i "$work/perf.data" --no-children --sort dso -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -5
perf report -i "$work/perf.data" --no-children --sort sym -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | head -40
