#!/usr/bin/env bash
# Builds closer as an earlier release, once, and prints the binary's path:
# the upgrade story (tests/it/upgrade.rs) runs it before this build on the
# same database. The release is a commit of this repository's history from
# before migration 7 (a run's generation; its decisions go up to 119), so
# the story crosses a migration and the run data, job payloads and
# worktrees that commit wrote.
# The binary is kept in $CLOSER_EARLIER_RELEASE_CACHE (default
# ~/.cache/closer-earlier-release); its build directory is removed.
#
#   CLOSER_EARLIER_RELEASE=$(bash .ci/earlier-release.sh) cargo test --test it upgrade
#
# Exits 3 when the commit is not in this clone (a shallow clone, say).
set -euo pipefail
cd "$(dirname "$0")/.."

commit=b53b89a08f20c4a0bd714d02df34864758ed5ba3
cache="${CLOSER_EARLIER_RELEASE_CACHE:-$HOME/.cache/closer-earlier-release}"
bin="$cache/$commit/closer"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  git fetch -q --unshallow 2>/dev/null || true
fi
if ! git cat-file -e "$commit^{commit}" 2>/dev/null; then
  echo "commit $commit is not in this clone" >&2
  exit 3
fi
mkdir -p "$cache/$commit"
# The build (a few GB) beside the cache rather than in a small /tmp.
work="$(mktemp -d "$cache/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
git archive "$commit" | tar -x -C "$work"
# A build directory of its own: built into the shared one, the earlier
# binary would take the place of this build's target/debug/closer.
(cd "$work" && CARGO_TARGET_DIR="$work/target" cargo build --locked --bin closer >&2)
partial="$(mktemp "$cache/$commit/closer.XXXXXX")"
cp "$work/target/debug/closer" "$partial"
chmod 755 "$partial"
mv "$partial" "$bin"
echo "$bin"
