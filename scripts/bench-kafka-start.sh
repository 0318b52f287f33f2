#!/usr/bin/env bash
# scripts/bench-kafka-start.sh [ROUNDS] — owns: measuring what a class archive (AppCDS) saves a
# Kafka node at start-up, the reason the test environment's Kafka image carries one
# (tests/env/image/kafka-class-archive.sh). On this machine's JVM and the environment's Kafka
# jars (tests/env/install.sh kafka), it makes an archive from one training start, then starts a
# single-node KRaft cluster ROUNDS times (default 3) without and with it, alternating, and
# prints each start's CPU time (user + system) until "Kafka Server started", and the medians.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tests/env/versions.sh
. tests/env/versions.sh
rounds=${1:-3}
libs=${KSTRETCH_CACHE:-$HOME/.cache/kstretch}/kafka-$KSTRETCH_KAFKA_VERSION/libs
[[ -d $libs ]] || { echo "bench-kafka-start: no $libs: run tests/env/install.sh kafka" >&2; exit 1; }
work=$(mktemp -d -t kstretch-bench-kafka-start.XXXXXX)
trap 'rm -rf "$work"' EXIT
classpath=$(printf '%s:' "$libs"/*.jar)
java_opts=(-Xmx320m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$PWD/tests/env/image/kafka/config/log4j2.yaml" -cp "$classpath")
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# start LABEL JVM-OPTION... — formats a fresh node, starts it, prints its CPU seconds until it
# serves (or after a graceful stop when the archive is being written), and stops it.
start() {
  local label=$1 dir pid ticks
  shift
  dir=$(mktemp -d "$work/node.XXXXXX")
  cat >"$dir/server.properties" <<CONFIG
process.roles=broker,controller
node.id=0
controller.quorum.voters=0@127.0.0.1:$((port + 1))
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
controller.listener.names=CONTROLLER
log.dirs=$dir/log
offsets.topic.replication.factor=1
CONFIG
  java "${java_opts[@]}" kafka.tools.StorageTool format -t AAAAAAAAAAAAAAAAAAAAAA -c "$dir/server.properties" >/dev/null 2>&1
  java "${java_opts[@]}" "$@" kafka.Kafka "$dir/server.properties" >"$dir/out.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "Kafka Server started" "$dir/out.log" && break
    sleep 0.1
  done
  grep -q "Kafka Server started" "$dir/out.log" || { tail -n 20 "$dir/out.log" >&2; kill "$pid"; exit 1; }
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  [[ $label == training ]] || echo "$label $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}')"
}

start training -XX:ArchiveClassesAtExit="$work/kafka.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off
[[ -s $work/kafka.jsa ]] || { echo "bench-kafka-start: no archive was written" >&2; exit 1; }
results=$(for _ in $(seq "$rounds"); do
  start without
  start with -XX:SharedArchiveFile="$work/kafka.jsa"
done)
echo "$results" | awk '{print "start-up CPU, " $1 " the class archive: " $2 " s"}'
for label in without with; do
  echo "$results" | awk -v l="$label" '$1 == l {print $2}' | sort -n |
    awk -v l="$label" '{v[NR] = $1} END {printf "median %s: %.2f s (%d starts)\n", l, v[int((NR + 1) / 2)], NR}'
done
echo "machine: $(nproc) cores, $(java -version 2>&1 | head -n1), Kafka $KSTRETCH_KAFKA_VERSION"
