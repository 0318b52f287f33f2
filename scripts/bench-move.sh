#!/usr/bin/env bash
# scripts/bench-move.sh — owns: running the pool-move benchmark (not a test): a live Kafka on the
# environment's real pods, a one-broker pool holding one replica of every partition of a topic
# filled with MIB MiB, moved from alpha to beta with its drain at THROTTLE bytes/s per broker.
# Prints the drain's plan (bytes, seconds of copying at the throttle: the limit), the drain's
# own time and the whole move's. Figures are recorded in docs/benchmarks.md.
#
#   KSTRETCH_BENCH_MOVE_MIB (1024)  KSTRETCH_BENCH_MOVE_PARTITIONS (12)
#   KSTRETCH_BENCH_MOVE_THROTTLE (52428800, i.e. 50 MiB/s)
set -euo pipefail
cd "$(dirname "$0")/.."
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
[[ -f $state/env ]] || tests/env/up.sh
# shellcheck disable=SC1091
set -a && . "$state/env" && set +a
cargo build -q --workspace --bins
# Run from the tests crate's directory, as its harness expects (like a test binary).
(cd tests && cargo run -q -p kstretch-bench --bin bench_move) 2>&1 |
  grep -E '^(bench-move|pool m moved)|panicked' || {
  echo "[bench] the benchmark failed; rerun with --nocapture for its output" >&2
  exit 1
}
