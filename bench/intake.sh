#!/usr/bin/env bash
# closer's intake benchmark. Starts a release `closer serve --role intake` on
# a fresh database, drives it with wrk (real signed issues.opened payloads,
# unique delivery ids), then kill -9s it and checks that every delivery that
# got a 2xx is in the database.
#
#   bench/intake.sh [sqlite|postgres] [connections] [seconds] [process|fsync]
#
# Needs: wrk (apt-get install wrk), openssl; psql for postgres.
# Prints one Markdown table row for docs/benchmarks.md.
set -euo pipefail

backend=${1:-sqlite}
connections=${2:-32}
seconds=${3:-20}
durability=${4:-process}
threads=${BENCH_THREADS:-2}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup

case "$backend" in
  sqlite) db="sqlite://$work/bench.db" ;;
  postgres)
    name="closer_bench_$$"
    psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $name" postgres
    db="postgres://postgres@127.0.0.1:5432/$name"
    ;;
  *) echo "backend must be sqlite or postgres" >&2; exit 2 ;;
esac
start_server "$db" "$durability"

ticks() { awk '{print $14 + $15}' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)
cpu_before=$(ticks)

BENCH_BODY=$body BENCH_SIGNATURE=$signature BENCH_RUN="r$$" \
  wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency \
  -s "$root/bench/intake.lua" "http://127.0.0.1:$port" >"$work/wrk.txt"

cpu_after=$(ticks)
rss_kb=$(awk '/VmHWM/ {print $2}' "/proc/$server_pid/status")
stored=$(curl -s "http://127.0.0.1:$port/metrics" |
  awk -F' ' '/closer_webhook_deliveries_total\{event="issues",outcome="stored"\}/ {print $2}')
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=

requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
non2xx=$(awk '/Non-2xx/ {print $5}' "$work/wrk.txt")
non2xx=${non2xx:-0}
rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.txt")
p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")
p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")

# After kill -9: every acknowledged delivery must be in the database.
case "$backend" in
  sqlite) in_db=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from deliveries').fetchone()[0])" "$work/bench.db") ;;
  postgres) in_db=$(psql -tA -h 127.0.0.1 -U postgres -c "SELECT count(*) FROM deliveries" "$name")
            psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE $name" postgres ;;
esac
acked=$((requests - non2xx))
cpu_us=$(python3 -c "print(round(($cpu_after - $cpu_before) / $hz * 1e6 / max(1, ${stored:-0})))")
verdict=ok
[ "$in_db" -ge "$acked" ] || verdict="LOST $((acked - in_db))"

cat "$work/wrk.txt" >&2
echo "| $backend | $durability | $connections | $seconds s | $rps | $p50 | $p99 | $cpu_us µs | $((rss_kb / 1024)) MB | $acked acked, $in_db stored after kill -9: $verdict |"
