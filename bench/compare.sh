#!/usr/bin/env bash
# closer against Probot on a realistic delivery mix, side by side in one run:
# Probot (a minimal app that stores nothing), then `closer serve` as role
# `intake` (no workers) and as the default role `all` (intake and workers in
# one process), each on SQLite and on PostgreSQL. The same wrk load, payload
# mix (bench/mix.py: 95 % deliveries that cannot matter, 5 % that can, 0.1 %
# label triggers that start runs) and webhook secret for all.
#
#   bench/compare.sh [seconds per cell, default 15] [connections, default 32]
#
# BENCH_CELLS picks cells (default: all five, in this order):
#   BENCH_CELLS="probot sqlite-all" bench/compare.sh
# Two more cells, not in the default set, measure working off a backlog
# (see `backlog` below): sqlite-backlog, postgres-backlog.
# BENCH_DRAIN_SECS (default 60) bounds the wait for the queue after an `all` cell.
# BENCH_CODE_COLD=1 drops closer's program pages from its resident set once it
# has started (bench/code_pages.py), so its peak RSS is what the load touches.
# BENCH_SMAPS=DIR keeps each cell's /proc/<pid>/status and smaps there, taken
# at the end of its load (where the memory is).
#
# closer runs the release build with --dry-run against bench/fake_github.py
# (GITHUB_API_URL), so runs really start: config read, permission check,
# status comment, labels, then the start step, which fails at once because no
# LLM is configured. After each `all` cell closer is given up to 60 s to work
# off its queue; the runs it started are counted then.
#
# Needs: wrk, openssl, node + npm (Probot is installed into bench/probot,
# pinned by its package-lock.json), psql for PostgreSQL.
# Prints one Markdown table for docs/benchmarks.md.
set -euo pipefail

seconds=${1:-15}
connections=${2:-32}
threads=${BENCH_THREADS:-2}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_setup

(cd "$root/bench/probot" && [ -d node_modules ] || npm ci --no-audit --no-fund --silent)
python3 "$root/bench/mix.py" "$root/tests/fixtures/github-webhooks" "$work/mix" "$secret"
openssl genrsa -out "$work/app.pem" 2048 2>/dev/null
gh_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$root/bench/fake_github.py" "$gh_port" &
fake_pid=$!
pids_to_kill=("$fake_pid")
trap 'kill "${pids_to_kill[@]}" 2>/dev/null || true; bench_cleanup' EXIT

wait_http() {
  for _ in $(seq 200); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "$2 did not come up" >&2
  return 1
}

# Drives the server at $1 (path $2) with the mix, after the installation
# its events come from; sets rps p50 p99 non2xx requests.
drive() {
  IFS=$'\t' read -r event signature file <"$work/mix/installation.tsv"
  curl -sf -o /dev/null -X POST -H "Content-Type: application/json" -H "X-GitHub-Event: $event" \
    -H "X-GitHub-Delivery: install-$RANDOM$RANDOM" -H "X-Hub-Signature-256: $signature" \
    --data-binary "@$file" "$1$2"
  BENCH_MIX="$work/mix" BENCH_PATH=$2 BENCH_RUN="r$RANDOM$RANDOM" BENCH_THREADS=$threads \
    wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency \
    -s "$root/bench/mix.lua" "$1" >"$work/wrk.txt"
  rps=$(awk '/Requests\/sec/ {printf "%d", $2}' "$work/wrk.txt")
  p50=$(awk '$1 == "50%" {print $2}' "$work/wrk.txt")
  p99=$(awk '$1 == "99%" {print $2}' "$work/wrk.txt")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$work/wrk.txt")
  non2xx=${non2xx:-0}
  requests=$(awk '/requests in/ {print $1}' "$work/wrk.txt")
}

# Peak resident memory, then (in brackets) the anonymous part at the end of
# the load: the rest is the program's own code, mapped from its file.
peak_rss_mb() {
  if [ -n "${BENCH_SMAPS:-}" ]; then
    mkdir -p "$BENCH_SMAPS"
    cp "/proc/$1/status" "$BENCH_SMAPS/$cell.status"
    cp "/proc/$1/smaps" "$BENCH_SMAPS/$cell.smaps"
  fi
  awk '/VmHWM/ {h = $2} /RssAnon/ {a = $2} END {printf "%d MB (anon %d)", h / 1024, a / 1024}' "/proc/$1/status"
}

row() {
  echo "| $1 | $2 | $rps | $p50 | $p99 | $3 | $requests sent, $non2xx non-2xx | $4 |"
}

probot() {
  local port
  cell=probot
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  (cd "$root/bench/probot" && APP_ID=1 PRIVATE_KEY_PATH="$work/app.pem" WEBHOOK_SECRET=$secret \
    PORT=$port HOST=127.0.0.1 LOG_LEVEL=fatal exec node node_modules/probot/bin/probot.js run ./index.js \
    >"$work/probot.log" 2>&1) &
  local pid=$!
  pids_to_kill+=("$pid")
  wait_http "http://127.0.0.1:$port/" Probot
  drive "http://127.0.0.1:$port" /api/github/webhooks
  local rss
  rss=$(peak_rss_mb "$pid")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  row "Probot $(node -p 'require("./bench/probot/node_modules/probot/package.json").version' 2>/dev/null || echo 14)" "—" "$rss" "stores nothing"
}

# SQL on the cell's database.
sql() {
  case "$backend" in
    sqlite) python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])" "$work/$cell.db" "$1" ;;
    postgres) psql -tA -h 127.0.0.1 -U postgres -c "$1" "$dbname" ;;
  esac
}

# Makes the cell's database ($db; $dbname on PostgreSQL).
new_database() {
  case "$backend" in
    sqlite) db="sqlite://$work/$cell.db" ;;
    postgres)
      dbname="closer_compare_$$_$RANDOM"
      psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $dbname" postgres
      db="postgres://postgres@127.0.0.1:5432/$dbname" ;;
  esac
}

drop_database() {
  [ "$backend" = postgres ] && psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE $dbname" postgres
  return 0
}

# Starts `closer serve --role $1` on the cell's database; sets $server_pid.
start_closer() {
  mkdir -p "$work/$cell-data"
  GITHUB_WEBHOOK_SECRET=$secret DATABASE_URL=$db CLOSER_BIND=127.0.0.1:$port \
    GITHUB_APP_ID=1 GITHUB_PRIVATE_KEY_PATH="$work/app.pem" GITHUB_API_URL="http://127.0.0.1:$gh_port" \
    CLOSER_DATA_DIR="$work/$cell-data" RUST_LOG=warn \
    "$bin" serve --dry-run --role "$1" >>"$work/$cell.log" 2>&1 &
  server_pid=$!
  wait_http "http://127.0.0.1:$port/readyz" closer
  sleep 1 # the App's slug, asked of the fake GitHub at start
}

stop_closer() {
  kill -9 "$server_pid"; wait "$server_pid" 2>/dev/null || true
  server_pid=
}

pending_jobs() {
  sql "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'leased')"
}

# Waits until no job is pending, for up to BENCH_DRAIN_SECS, looking every
# $1 seconds.
drain() {
  local until=$((SECONDS + ${BENCH_DRAIN_SECS:-60}))
  while [ "$SECONDS" -lt "$until" ] && [ "$(pending_jobs)" != 0 ]; do
    sleep "$1"
  done
}

closer() {
  backend=$1
  local role=$2
  cell="closer-$backend-$role-$RANDOM"
  new_database
  start_closer "$role"
  [ "${BENCH_CODE_COLD:-0}" = 1 ] && python3 "$root/bench/code_pages.py" "$server_pid"
  drive "http://127.0.0.1:$port" /webhooks
  local rss
  rss=$(peak_rss_mb "$server_pid")
  local note="intake only: relevant deliveries stay queued"
  if [ "$role" = all ]; then
    drain 1
    note="$(sql "SELECT COUNT(*) FROM runs") runs started; queue after ≤ 60 s: $(pending_jobs) jobs left"
  fi
  note="$(sql "SELECT COUNT(*) FROM deliveries WHERE status = 'ignored'") ignored, $(sql "SELECT COUNT(*) FROM deliveries WHERE status <> 'ignored'") with a job; $note"
  stop_closer
  drop_database
  row "closer, role $role" "$backend" "$rss" "$note"
}

# A backlog, as after an outage: role `intake` takes the mix (no workers, so
# every relevant delivery's job stays queued), then the default process
# starts on that database and works the queue off for up to
# BENCH_DRAIN_SECS (timed from its start). Its rate is what claiming costs
# once jobs have piled up.
backlog() {
  backend=$1
  cell="closer-$backend-backlog-$RANDOM"
  new_database
  start_closer intake
  drive "http://127.0.0.1:$port" /webhooks
  stop_closer
  local queued left started secs
  queued=$(pending_jobs)
  started=$(date +%s.%N)
  start_closer all
  drain 0.25
  left=$(pending_jobs)
  secs=$(awk -v s="$started" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
  local rss
  rss=$(peak_rss_mb "$server_pid")
  stop_closer
  drop_database
  row "closer, role all after intake" "$backend" "$rss" \
    "$queued jobs queued; $((queued - left)) worked off in $secs s ($(awk -v n=$((queued - left)) -v s="$secs" 'BEGIN {printf "%d", n / s}')/s), $left left"
}

echo "| server | database | deliveries/s | p50 | p99 | peak RSS | requests | deliveries |"
echo "|---|---|---|---|---|---|---|---|"
for cell_name in ${BENCH_CELLS:-probot sqlite-intake sqlite-all postgres-intake postgres-all}; do
  case "$cell_name" in
    probot) probot ;;
    sqlite-intake | sqlite-all | postgres-intake | postgres-all) closer "${cell_name%-*}" "${cell_name#*-}" ;;
    sqlite-backlog | postgres-backlog) backlog "${cell_name%-*}" ;;
    *) echo "unknown cell $cell_name" >&2; exit 2 ;;
  esac
done
curl -s "http://127.0.0.1:$gh_port/_stats" >&2; echo >&2
