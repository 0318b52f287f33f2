#!/usr/bin/env bash
# scripts/bench-topics.sh — owns: running the topic operator benchmark (not a test): a release
# kstretch-central as the topic operator of a fresh namespace of cluster alpha, a private KRaft
# Kafka of its own (never the environment's shared one) from the environment's jars, 10,000
# KafkaTopics created at once; the time until all are Ready, topics per second, p50/p99
# create-to-Ready latency, central's peak RSS, and its CPU while the topics sit idle (timed
# reconciliation included). Figures are recorded in docs/benchmarks.md.
#
# BENCH_PROFILE=debug builds and runs debug binaries instead of release ones; BENCH_CENTRAL_LOG
# is central's RUST_LOG (default info). Extra arguments go to the benchmark, e.g.
#   --topics N (10000)  --partitions P (the most the machine's open-file and memory-map limits
#   allow, up to 12)  --replicas R (1; R Kafka nodes)  --idle-secs N (60)  --concurrency N (48)
#   --full-reconcile-secs N (120)  --kafka-heap SIZE (1g)  --central-arg ARG (repeatable,
#   passed on to central, e.g. --central-arg --topic-batch-size=500)  --hold-secs N (keep the
#   namespace and the private Kafka that long after the figures, for inspection)
#   --writes-only true (the apiserver alone: the benchmark makes the create, finalizer and status
#   writes itself, with neither central nor Kafka running and nothing watching)
#   --finalizer-policy false (no crds-chart MutatingAdmissionPolicy: central writes the finalizer)
#   --pause-others true (SIGSTOP the environment processes the benchmark does not use while
#   creating: cluster beta, the shared Kafka and Connect; SIGCONT afterwards)
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
cargo build "${flags[@]}" -p kstretch-central
cargo build "${flags[@]}" -p kstretch-bench --bin bench_topics
target=${CARGO_TARGET_DIR:-target}
exec "$target/$profile/bench_topics" --central "$target/$profile/kstretch-central" "$@"
