#!/usr/bin/env bash
# scripts/bench-metrics.sh [PARTITIONS] [SCRAPES] — owns: measuring what a Prometheus scrape of
# a broker costs with each `metricsConfig` type. For the JMX exporter (with the rules of
# examples/kafka-metrics.yaml) and for Strimzi's metrics reporter (with central's default allow
# list), it starts a single-node KRaft cluster on this machine's JVM with the environment's
# Kafka jars and the jars the agent's image carries, creates a topic of PARTITIONS partitions
# (default 1000), scrapes /metrics SCRAPES times back to back (default 20, after 3 to warm up)
# and prints the scrape time (median and slowest), the body's size and series, and the broker
# CPU a scrape costs (CPU while scraping less the idle rate over as long).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../tests/env/versions.sh
. tests/env/versions.sh
partitions=${1:-1000}
scrapes=${2:-20}
cache=${KSTRETCH_CACHE:-$HOME/.cache/kstretch}
libs=$cache/kafka-$KSTRETCH_KAFKA_VERSION/libs
die() { echo "bench-metrics: $*" >&2; exit 1; }
[[ -d $libs ]] || die "no $libs: run tests/env/install.sh kafka"

# The jars as images/Dockerfile pins them, where scripts/build-images.sh caches them.
exporter="" reporter=""
while read -r url dest; do
  jar=$cache/jars/${url##*/}
  [[ -f $jar ]] || die "no $jar: run scripts/build-images.sh --profile debug --component agent"
  case $dest in
    /opt/kstretch/metrics/reporter/*) reporter+=:$jar ;;
    *) exporter=$jar ;;
  esac
done < <(sed -nE 's#^ADD --chmod=0644 --checksum=sha256:[0-9a-f]{64} (https://\S+) (/opt/kstretch/metrics/\S+)$#\1 \2#p' images/Dockerfile)
[[ -n $exporter && -n $reporter ]] || die "images/Dockerfile pins no exporter or reporter jar"

work=$(mktemp -d -t kstretch-bench-metrics.XXXXXX)
pid=""
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) metrics_port=$(free_port)
python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["kafka-metrics-config.yml"])' \
  examples/kafka-metrics.yaml >"$work/rules.yml"
allow_list=$(sed -n '/^pub const DEFAULT_ALLOW_LIST/,/^];/p' central/src/kafka/jmx_exporter.rs | grep -o '"[^"]*"' | tr -d '"' | paste -sd, -)
[[ -n $allow_list ]] || die "no DEFAULT_ALLOW_LIST in central/src/kafka/jmx_exporter.rs"
classpath=$(printf '%s:' "$libs"/*.jar)
# Its log says when it serves (the environment image's log4j2 configuration).
jvm=(-Xmx512m -Dlog4j2.configurationFile="$PWD/tests/env/image/kafka/config/log4j2.yaml")
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }

# measure TYPE — a fresh node serving metrics as TYPE, its topic, then the scrapes; one line.
measure() {
  local type=$1 dir java_opts=("${jvm[@]}" -cp "$classpath")
  dir=$work/$type
  mkdir -p "$dir"
  cat >"$dir/server.properties" <<CONFIG
process.roles=broker,controller
node.id=0
controller.quorum.voters=0@127.0.0.1:$((port + 1))
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$((port + 1))
controller.listener.names=CONTROLLER
log.dirs=$dir/log
offsets.topic.replication.factor=1
CONFIG
  case $type in
    jmxPrometheusExporter) java_opts+=("-javaagent:$exporter=127.0.0.1:$metrics_port:$work/rules.yml") ;;
    strimziMetricsReporter)
      java_opts=("${jvm[@]}" -cp "$classpath$reporter")
      cat >>"$dir/server.properties" <<CONFIG
metric.reporters=io.strimzi.kafka.metrics.KafkaPrometheusMetricsReporter
kafka.metrics.reporters=io.strimzi.kafka.metrics.YammerPrometheusMetricsReporter
prometheus.metrics.reporter.listener.enable=true
prometheus.metrics.reporter.listener=http://127.0.0.1:$metrics_port
prometheus.metrics.reporter.allowlist=$allow_list
CONFIG
      ;;
  esac
  java -cp "$classpath" kafka.tools.StorageTool format -t AAAAAAAAAAAAAAAAAAAAAA -c "$dir/server.properties" >/dev/null 2>&1
  java "${java_opts[@]}" kafka.Kafka "$dir/server.properties" >"$dir/out.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    grep -q "Kafka Server started" "$dir/out.log" && break
    sleep 0.2
  done
  grep -q "Kafka Server started" "$dir/out.log" || { tail -n 20 "$dir/out.log" >&2; die "$type: the node did not start"; }
  java -cp "$classpath" org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$port" --create \
    --topic bench --partitions "$partitions" --replication-factor 1 >/dev/null
  local url=http://127.0.0.1:$metrics_port/metrics
  # Whole bodies, not piped into grep -q: pipefail would take curl's broken pipe for a failure.
  reports_partitions() {
    curl -sf -o "$dir/body" "$url" &&
      grep -Eq "^kafka_server_replicamanager_partitioncount(\{[^}]*\})? $partitions(\.0)?$" "$dir/body"
  }
  for _ in $(seq 300); do
    reports_partitions && break
    sleep 1
  done
  reports_partitions || die "$type: the broker does not report $partitions partitions"
  for _ in 1 2 3; do curl -sf -o /dev/null "$url"; done
  curl -sf -o "$dir/body" "$url"
  local bytes series idle_ticks t0 wall scrape_ticks times
  bytes=$(wc -c <"$dir/body")
  series=$(grep -vc '^#' "$dir/body")
  # The idle rate first, over 10 s, then the scrapes back to back.
  idle_ticks=$(cpu_ticks); sleep 10; idle_ticks=$(($(cpu_ticks) - idle_ticks))
  scrape_ticks=$(cpu_ticks); t0=$(date +%s.%N)
  times=$(for _ in $(seq "$scrapes"); do curl -sf -o /dev/null -w '%{time_total}\n' "$url"; done)
  wall=$(echo "$(date +%s.%N) - $t0" | bc -l); scrape_ticks=$(($(cpu_ticks) - scrape_ticks))
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  echo "$times" | sort -n | awk -v type="$type" -v n="$scrapes" -v bytes="$bytes" -v series="$series" \
    -v st="$scrape_ticks" -v it="$idle_ticks" -v wall="$wall" -v hz="$hz" -v p="$partitions" '
    {t[NR] = $1} END {
      cpu = (st - it * wall / 10) / hz / n
      printf "%-23s %d partitions: scrape median %.0f ms, slowest %.0f ms; body %.0f KiB, %d series; broker CPU %.0f ms per scrape\n",
        type, p, t[int((NR + 1) / 2)] * 1000, t[NR] * 1000, bytes / 1024, series, (cpu < 0 ? 0 : cpu) * 1000
    }'
}

measure jmxPrometheusExporter
measure strimziMetricsReporter
