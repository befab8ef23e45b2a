#!/usr/bin/env bash
# closer's fuzz run: every target in tests/fuzz (or the ones named) for a
# budget per target, built with the `fuzz` profile (optimised, overflow and
# debug checks on; FUZZ_PROFILE=test uses the unoptimised test build, which
# has the same checks and needs no second build). Prints inputs, panics, rate
# and slowest input (with its seed) per target, and a total; exits non-zero
# on any panic, naming the seed to replay.
#
#   bench/fuzz.sh 120s                 # 120 seconds per target
#   bench/fuzz.sh 1000000              # one million inputs per target
#   bench/fuzz.sh 30s diff,secrets     # only these targets
#   bench/fuzz.sh replay diff:0x34fd…  # re-run (and time) one reported input
#
# CLOSER_FUZZ_SEED fixes the base seed (default: the time). Runs at the
# lowest CPU priority: the machine is shared.
set -euo pipefail
cd "$(dirname "$0")/.."

budget=${1:-60s}
targets=${2:-}
unset CLOSER_FUZZ_INPUTS CLOSER_FUZZ_SECONDS CLOSER_FUZZ_REPLAY
case "$budget" in
  replay) export CLOSER_FUZZ_REPLAY=${2:?"replay needs <target>:<seed>"}; targets= ;;
  *s) export CLOSER_FUZZ_SECONDS=${budget%s} ;;
  *[!0-9_]*) echo "budget: a count (1000000) or seconds (120s)" >&2; exit 2 ;;
  *) export CLOSER_FUZZ_INPUTS=$budget ;;
esac
export CLOSER_FUZZ_TARGETS=$targets
nice -n 19 cargo test --quiet --profile "${FUZZ_PROFILE:-fuzz}" --test fuzz budget -- --ignored --nocapture --test-threads 1 2>&1 |
  grep --line-buffered -Ev '^(running [0-9]+ tests?|test budget \.\.\. ok|test result: .*|\.)?$'
