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
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}

(cd "$root" && cargo build --release --quiet)
bin="$target/release/closer"
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
secret="bench-secret"
body="$root/tests/fixtures/github-webhooks/issues.opened.json"
signature="sha256=$(openssl dgst -sha256 -hmac "$secret" -r "$body" | cut -d' ' -f1)"

GITHUB_WEBHOOK_SECRET=$secret DATABASE_URL="sqlite://$work/bench.db" \
  CLOSER_BIND=127.0.0.1:$port CLOSER_DURABILITY=$durability RUST_LOG=warn \
  "$bin" serve --dry-run --role intake >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && break
  sleep 0.1
done

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
