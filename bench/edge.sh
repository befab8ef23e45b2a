#!/usr/bin/env bash
# closer's HTTP edge under hostile clients. Starts a release `closer serve
# --dry-run` (intake and workers) on a fresh SQLite database and:
#
#  1. holds CONNECTIONS slow or unsigned connections open for SECONDS
#     (half-open, slowloris heads, 25 MB bodies with a wrong signature,
#     unsigned 25 MB posts) while sampling the server's RSS and the latency
#     of GET /healthz every 0.25 s;
#  2. restarts it, opens three idle keep-alive connections (and, the second
#     time, one request whose head never ends), sends SIGTERM and times the
#     exit against `[http] shutdown_grace_secs` (GRACE).
#
#   bench/edge.sh [connections] [seconds] [grace]
#
# Needs: python3, curl, openssl. Prints the figures for docs/benchmarks.md.
set -euo pipefail

connections=${1:-200}
seconds=${2:-20}
grace=${3:-5}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup

cat >"$work/closer.toml" <<TOML
[http]
shutdown_grace_secs = $grace
TOML

start() {
  GITHUB_WEBHOOK_SECRET=$secret DATABASE_URL="sqlite://$work/bench.db" \
    CLOSER_BIND=127.0.0.1:$port CLOSER_DATA_DIR="$work/data" RUST_LOG=warn \
    "$bin" serve --dry-run --config "$work/closer.toml" >>"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "the server did not become ready; its log:" >&2
  cat "$work/server.log" >&2
  return 1
}

start
echo "load: $(python3 "$root/bench/edge.py" load "$server_pid" "$port" "$seconds" "$connections")"
kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=

# SIGTERM with idle keep-alive connections, then with one unfinished head too.
sigterm() {
  start
  python3 "$root/bench/edge.py" idle "$port" 3 $1 >"$work/idle.out" &
  idle_pid=$!
  for _ in $(seq 50); do grep -q ready "$work/idle.out" 2>/dev/null && break; sleep 0.1; done
  started=$(date +%s.%N)
  kill -TERM "$server_pid"
  status=0
  wait "$server_pid" || status=$?
  ended=$(date +%s.%N)
  server_pid=
  kill "$idle_pid" 2>/dev/null || true
  wait "$idle_pid" 2>/dev/null || true
  echo "sigterm ($2): exit_status=$status exit_secs=$(echo "$ended - $started" | bc) grace_secs=$grace"
}
sigterm "" "3 idle keep-alive connections"
sigterm half "3 idle keep-alive connections + 1 unfinished request head"
