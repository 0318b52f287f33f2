#!/usr/bin/env bash
# scripts/test.sh — owns: the whole test run (what `make test` and CI execute): prerequisites,
# the real environment, formatting, module circles, clippy, CRD freshness, unit tests,
# end-to-end tests and chart checks, each step timed. On failure it prints the tail of the
# environment's logs.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

start=$SECONDS
step() {
  local name=$1 t=$SECONDS
  shift
  echo "=== [$name] $*"
  if ! "$@"; then
    echo "=== [$name] FAILED after $((SECONDS - t))s"
    return 1
  fi
  echo "=== [$name] ok in $((SECONDS - t))s"
}

on_failure() {
  local state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
  echo "=== test run failed after $((SECONDS - start))s; environment logs ($state/logs):"
  for f in "$state"/logs/*.log; do
    [[ -f $f ]] || continue
    echo "--- $f (last 15 lines)"
    tail -n 15 "$f"
  done
}
trap on_failure ERR

step prereqs scripts/prereqs.sh
step env tests/env/up.sh
# Before anything else takes the cores: pods that earlier runs left on the real nodes.
step sweep tests/env/sweep.sh
# shellcheck disable=SC1091
set -a && . "${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}/env" && set +a
step fmt cargo fmt --all -- --check
# No module of any crate uses one that uses it back (shared things live in shared modules).
step modules scripts/check-module-cycles.py
# Every condition reason the code writes is in the reference, with what to do.
step reasons scripts/check-reasons.py
step clippy cargo clippy --workspace --all-targets --all-features -- -D warnings
step unit cargo test --workspace
# All targets, as `cargo test` built them: the binaries then have the features the tests'
# dev-dependencies unify in, and are reused instead of rebuilt (`--bins` alone took a minute).
step build cargo build --workspace --all-targets
step images bash -c "scripts/build-images.sh --profile debug && scripts/check-images.sh"
step e2e scripts/e2e.sh
step charts scripts/check-charts.sh
# Last, because it restarts the environment: a crash is recovered and teardown is complete.
step env-recovery tests/env/recovery-check.sh
echo "=== all checks passed in $((SECONDS - start))s"
