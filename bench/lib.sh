# Shared by the bench scripts (sourced, not run): builds the release binary,
# makes a scratch directory that is removed on exit (killing the server),
# signs the issues.opened fixture, and starts `closer serve --role intake`.
#
# After `bench_setup`: $root $bin $work $port $secret $body $signature.
# BENCH_BIN runs another closer binary instead of building this checkout's
# (an A/B comparison of two builds in one window).
# After `start_server DATABASE_URL DURABILITY`: $server_pid, the server ready.

bench_setup() {
  root=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
  local target=${CARGO_TARGET_DIR:-$root/target}
  if [ -n "${BENCH_BIN:-}" ]; then
    bin=$BENCH_BIN
  else
    (cd "$root" && cargo build --release --quiet --bin closer)
    bin="$target/release/closer"
  fi
  work=$(mktemp -d)
  server_pid=
  trap bench_cleanup EXIT
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  secret="bench-secret"
  body="$root/tests/fixtures/github-webhooks/issues.opened.json"
  signature="sha256=$(openssl dgst -sha256 -hmac "$secret" -r "$body" | cut -d' ' -f1)"
}

bench_cleanup() {
  [ -n "$server_pid" ] && kill -9 "$server_pid" 2>/dev/null || true
  rm -rf "$work"
}

start_server() {
  GITHUB_WEBHOOK_SECRET=$secret DATABASE_URL=$1 CLOSER_BIND=127.0.0.1:$port \
    CLOSER_DURABILITY=$2 RUST_LOG=warn \
    "$bin" serve --dry-run --role intake >"$work/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "the server did not become ready; its log:" >&2
  cat "$work/server.log" >&2
  return 1
}
