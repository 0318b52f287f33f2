#!/usr/bin/env bash
# scripts/bench-central.sh — owns: running central's benchmark (not a test) against the real
# environment: a release kstretch-central for alpha with members alpha, beta (real agents) and
# gamma (a raw link client), one stretched Kafka of 3 pools x 30 nodes; the time until every
# cluster has its desired state, the time a config change takes to reach all three (p50/max),
# snapshot sizes, and central's RSS. Figures are recorded in docs/benchmarks.md.
#
# BENCH_PROFILE=debug builds and runs debug binaries instead of release ones; BENCH_CENTRAL_LOG
# is central's RUST_LOG (default info; e.g. info,kstretch_kadmin=debug). Extra arguments
# go to the benchmark (e.g. --changes 10 --replicas 50 --poll-ms 20).
set -euo pipefail
cd "$(dirname "$0")/.."
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
[[ -f $state/env ]] || tests/env/up.sh

profile=${BENCH_PROFILE:-release}
case $profile in
  release) flags=(--release) ;;
  debug) flags=() ;;
  *) echo "[bench] BENCH_PROFILE must be release or debug, not $profile" >&2; exit 2 ;;
esac
cargo build "${flags[@]}" -p kstretch-central -p kstretch-agent
cargo build "${flags[@]}" -p kstretch-bench --bin bench_central
target=${CARGO_TARGET_DIR:-target}
exec "$target/$profile/bench_central" \
  --central "$target/$profile/kstretch-central" \
  --agent "$target/$profile/kstretch-agent" "$@"
