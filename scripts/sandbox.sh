#!/usr/bin/env bash
# scripts/sandbox.sh — owns: the local multi-cluster sandbox. `up` brings up the real test
# environment, installs the CRD chart in every cluster, starts central (in the first cluster)
# and one agent per cluster as local processes, applies examples/kafka-stretch.yaml (a Kafka
# whose pods run on the environment's real nodes in two clusters) and prints what runs, how to
# look at it and one command that moves a record from one cluster's broker to the other's. `down` stops the sandbox processes and the environment.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOG_TAG=sandbox
# shellcheck source=../tests/env/lib.sh
. "$ROOT/tests/env/lib.sh"

NAMESPACE=${KSTRETCH_SANDBOX_NAMESPACE:-kafka}
CENTRAL_HTTP=18180
CENTRAL_GRPC=18190
CENTRAL_LINK=18191
AGENT_HTTP_BASE=18181
PKI=$STATE/sandbox-pki

kubeconfig_of() { local v; v=KSTRETCH_KUBECONFIG_$(upper "$1"); printf '%s' "${!v}"; }

# make_pki CLUSTER... — a CA, central's server certificate and one client certificate per
# cluster, whose URI SAN kstretch://cluster/<alias> is the agent's identity on the link.
# Kept across runs; made once.
make_pki() {
  mkdir -p "$PKI"
  [[ -f $PKI/ca.pem ]] || {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
      -subj "/CN=kstretch sandbox CA" -keyout "$PKI/ca-key.pem" -out "$PKI/ca.pem" 2>/dev/null
  }
  issue() { # issue NAME SUBJECT_ALT_NAMES
    [[ -f $PKI/$1.pem ]] && return 0
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
      -keyout "$PKI/$1-key.pem" -out "$PKI/$1.csr" 2>/dev/null
    openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca-key.pem" \
      -CAcreateserial -days 365 -out "$PKI/$1.pem" \
      -extfile <(printf 'subjectAltName=%s\nbasicConstraints=CA:FALSE\n' "$2") 2>/dev/null
    rm -f "$PKI/$1.csr"
  }
  issue central "DNS:localhost,IP:127.0.0.1"
  local c
  for c in "$@"; do issue "agent-$c" "URI:kstretch://cluster/$c"; done
}

down() {
  stop_proc sandbox-central
  for c in "${CLUSTERS[@]}"; do stop_proc "sandbox-agent-$c"; done
  rm -f "$STATE"/prometheus/targets/sandbox-*.json
  "$ROOT/tests/env/down.sh"
}

# scrape NAME ADDRESS — Prometheus scrapes the sandbox process NAME at ADDRESS (host:port,
# its /metrics), as the tests add theirs: a file in its file_sd directory, written whole.
scrape() {
  local file=$KSTRETCH_PROMETHEUS_TARGETS/sandbox-$1.json
  printf '[{"targets": ["%s"], "labels": {"test": "sandbox", "component": "%s"}}]\n' "$2" "$1" >"$file.partial"
  mv -f "$file.partial" "$file"
}

# series_from_every_cluster EXPR — whether Prometheus has series of EXPR from every cluster
# (their cluster label).
series_from_every_cluster() {
  curl -sf --get "$KSTRETCH_PROMETHEUS_URL/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys
seen = {r["metric"].get("cluster") for r in json.load(sys.stdin)["data"]["result"]}
sys.exit(0 if set(sys.argv[1:]) <= seen else 1)' "${CLUSTERS[@]}"
}

up() {
  local t0=$SECONDS
  # A fresh machine: the same system prerequisites as `make test`.
  "$ROOT/scripts/prereqs.sh"
  "$ROOT/tests/env/up.sh"
  set -a
  # shellcheck disable=SC1091
  . "$STATE/env"
  set +a
  # The product binaries only: the test crate's benchmark programs need librdkafka, which
  # nothing the sandbox runs does.
  log "building kstretch (cargo build -p kstretch-central -p kstretch-agent -p kstretch-cli)"
  (cd "$ROOT" && cargo build -q -p kstretch-central -p kstretch-agent -p kstretch-cli)
  # The Kafka pods' init container copies the JMX exporter (metricsConfig) from the agent's
  # image: pack this build's agent as that image and put it on every real node.
  local version
  version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$ROOT/Cargo.toml")
  log "packing the agent's image for the nodes (scripts/build-images.sh, tests/env/nodes.sh import)"
  (cd "$ROOT" && scripts/build-images.sh --profile debug --component agent >/dev/null)
  "$ROOT/tests/env/nodes.sh" import "$ROOT/target/images/kstretch-agent-$version.oci.tar" >/dev/null
  local bin=${CARGO_TARGET_DIR:-$ROOT/target}/debug kubectl=$KSTRETCH_BIN_DIR/kubectl helm=$KSTRETCH_BIN_DIR/helm
  local central_cluster=${CLUSTERS[0]} i c kc

  for c in "${CLUSTERS[@]}"; do
    kc=$(kubeconfig_of "$c")
    # --take-ownership and --force-conflicts: the CRDs may already exist, applied by tests or an
    # earlier kubectl apply, which then own fields of them; the chart's version wins.
    # In central's cluster, new KafkaTopics of the sandbox namespace get the topic operator's
    # finalizer at admission (the chart's MutatingAdmissionPolicy), sparing central that write.
    local policy=()
    [[ $c == "$central_cluster" ]] && policy=(--set "topicFinalizerPolicy.namespaces={$NAMESPACE}")
    "$helm" upgrade --install --take-ownership --force-conflicts kstretch-crds "$ROOT/charts/kstretch-crds" \
      "${policy[@]}" --kubeconfig "$kc" >/dev/null
    "$kubectl" --kubeconfig "$kc" apply --server-side --field-manager kstretch-sandbox \
      -f "$ROOT/examples/mcs-serviceexport-crd.yaml" >/dev/null
    "$kubectl" --kubeconfig "$kc" create namespace "$NAMESPACE" --dry-run=client -o yaml |
      "$kubectl" --kubeconfig "$kc" apply -f - >/dev/null
  done
  "$kubectl" --kubeconfig "$(kubeconfig_of "$central_cluster")" wait --for condition=Established \
    --timeout 60s crd --all >/dev/null

  make_pki "${CLUSTERS[@]}"
  # Restart our processes so the sandbox always runs the binaries just built.
  stop_proc sandbox-central
  start_proc sandbox-central "$bin/kstretch-central" \
    --kubeconfig "$(kubeconfig_of "$central_cluster")" --namespace "$NAMESPACE" \
    --http-addr "127.0.0.1:$CENTRAL_HTTP" --grpc-addr "127.0.0.1:$CENTRAL_GRPC" \
    --link-addr "127.0.0.1:$CENTRAL_LINK" \
    --cluster-alias "$central_cluster" --member-clusters "$(IFS=,; echo "${CLUSTERS[*]}")" \
    --tls-ca "$PKI/ca.pem" --tls-cert "$PKI/central.pem" --tls-key "$PKI/central-key.pem"
  for i in "${!CLUSTERS[@]}"; do
    c=${CLUSTERS[$i]}
    stop_proc "sandbox-agent-$c"
    KSTRETCH_AGENT_IMAGE=ghcr.io/kstretch/kstretch-agent:$version \
      start_proc "sandbox-agent-$c" "$bin/kstretch-agent" \
      --kubeconfig "$(kubeconfig_of "$c")" --cluster-alias "$c" --namespace "$NAMESPACE" \
      --http-addr "127.0.0.1:$((AGENT_HTTP_BASE + i))" \
      --central "https://127.0.0.1:$CENTRAL_LINK" --tls-ca "$PKI/ca.pem" \
      --tls-cert "$PKI/agent-$c.pem" --tls-key "$PKI/agent-$c-key.pem"
  done
  wait_proc_healthy sandbox-central 60 curl -sf "http://127.0.0.1:$CENTRAL_HTTP/readyz" ||
    { tail_log sandbox-central; die "central did not become ready"; }
  scrape central "127.0.0.1:$CENTRAL_HTTP"
  for i in "${!CLUSTERS[@]}"; do scrape "agent-${CLUSTERS[$i]}" "127.0.0.1:$((AGENT_HTTP_BASE + i))"; done
  for i in "${!CLUSTERS[@]}"; do
    wait_proc_healthy "sandbox-agent-${CLUSTERS[$i]}" 60 curl -sf "http://127.0.0.1:$((AGENT_HTTP_BASE + i))/readyz" ||
      { tail_log "sandbox-agent-${CLUSTERS[$i]}"; die "agent ${CLUSTERS[$i]} did not become ready"; }
  done

  local kc_central hosts="" first_broker last_broker
  kc_central=$(kubeconfig_of "$central_cluster")
  for c in "${CLUSTERS[@]}"; do
    local ip_var=KSTRETCH_REAL_NODE_IP_$(upper "$c")
    hosts+=${hosts:+,}$c=${!ip_var}
  done
  # An Established CRD may still be answered with 503 for a moment (the apiserver starts serving
  # a CRD's resource after it reports it), so the example is applied again until it takes.
  local tries=0
  until "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" apply --server-side \
    --field-manager kstretch-sandbox -f "$ROOT/examples/kafka-metrics.yaml" \
    -f "$ROOT/examples/kafka-stretch.yaml" >/dev/null; do
    ((++tries < 30)) || die "the example could not be applied (see above)"
    sleep 1
  done
  # Where each cluster's NodePorts are reached: the address of its real node.
  "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" annotate --overwrite \
    kafka/my-cluster "kstretch.io/node-port-hosts=$hosts" >/dev/null
  local agents_up=0
  for _ in $(seq 40); do
    agents_up=$("$bin/kstretch" --central "http://127.0.0.1:$CENTRAL_GRPC" agents 2>/dev/null | awk '$2 == "yes"' | wc -l)
    ((agents_up >= ${#CLUSTERS[@]})) && break
    sleep 0.5
  done
  # Seven JVMs start on the real nodes: minutes on two cores.
  "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" wait kafka/my-cluster \
    --for condition=Ready --timeout 600s >/dev/null ||
    { "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" get kafka/my-cluster -o yaml | sed -n '/^status:/,$p' >&2
      tail_log sandbox-central; die "the example Kafka did not become ready"; }
  "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" wait kafkatopic/orders \
    --for condition=Ready --timeout 120s >/dev/null ||
    { tail_log sandbox-central; die "the example KafkaTopic did not become ready"; }
  first_broker=$("$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" get pods \
    -l strimzi.io/pool-name=brokers-alpha -o jsonpath='{.items[0].metadata.name}')
  last_broker=$("$kubectl" --kubeconfig "$(kubeconfig_of "${CLUSTERS[-1]}")" -n "$NAMESPACE" get pods \
    -l strimzi.io/pool-name=brokers-${CLUSTERS[-1]} -o jsonpath='{.items[0].metadata.name}')
  # A client on this machine, outside both clusters: the external TLS listener, trusting only
  # the cluster CA from its Secret, through a broker in the first cluster and one in the last.
  local client_dir=$STATE/sandbox-client external_first external_last
  mkdir -p "$client_dir"
  "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" get secret my-cluster-cluster-ca-cert \
    -o jsonpath='{.data.ca\.crt}' | base64 -d >"$client_dir/ca.crt"
  printf 'security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location=%s\n' \
    "$client_dir/ca.crt" >"$client_dir/client.properties"
  external_at() {
    local ip_var=KSTRETCH_REAL_NODE_IP_$(upper "$1")
    "$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" get kafka my-cluster \
      -o jsonpath='{.status.listeners[?(@.name=="external")].bootstrapServers}' |
      tr ',' '\n' | grep "^${!ip_var}:" | paste -sd, -
  }
  external_first=$(external_at "$central_cluster")
  external_last=$(external_at "${CLUSTERS[-1]}")
  local tools="java -cp '$KSTRETCH_KAFKA_LIBS/*' org.apache.kafka.tools"
  local outside_record="echo \"hello from outside \$(date +%T)\" | $tools.ConsoleProducer --bootstrap-server $external_first --producer.config $client_dir/client.properties --topic orders && $tools.consumer.ConsoleConsumer --bootstrap-server $external_last --consumer.config $client_dir/client.properties --topic orders --from-beginning --max-messages 1 --timeout-ms 30000"
  local move_record="$kubectl --kubeconfig $kc_central -n $NAMESPACE exec $first_broker -- sh -c 'echo \"hello from $central_cluster \$(date +%T)\" | kafka-console-producer.sh --bootstrap-server localhost:9092 --topic orders' && $kubectl --kubeconfig $(kubeconfig_of "${CLUSTERS[-1]}") -n $NAMESPACE exec $last_broker -- kafka-console-consumer.sh --bootstrap-server localhost:9092 --topic orders --from-beginning --max-messages 1 --timeout-ms 30000"
  # A graph of every broker's partition leaders, from both clusters (the cluster label is the
  # environment Prometheus' scrape job; the names are the JMX exporter rules' of kafka-metrics.yaml).
  local graph leaders="kafka_server_replicamanager_leadercount{namespace=\"$NAMESPACE\", strimzi_io_cluster=\"my-cluster\"}"
  # Printed once it shows every cluster's brokers (Prometheus scrapes the pods every 15 s).
  local tries=0
  until series_from_every_cluster "$leaders"; do
    ((++tries < 60)) || die "Prometheus has no $leaders from every cluster (see $KSTRETCH_PROMETHEUS_URL/targets)"
    sleep 2
  done
  graph="$KSTRETCH_PROMETHEUS_URL/graph?g0.expr=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' \
    "sum by (cluster, kubernetes_pod_name) ($leaders)")&g0.tab=0&g0.range_input=15m"
  # Consumer lag per group and topic, from the example's Kafka Exporter (once a group commits
  # offsets).
  local lag
  lag="$KSTRETCH_PROMETHEUS_URL/graph?g0.expr=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' \
    "sum by (consumergroup, topic) (kafka_consumergroup_lag{namespace=\"$NAMESPACE\", strimzi_io_cluster=\"my-cluster\"})")&g0.tab=0&g0.range_input=15m"

  cat <<EOM

kstretch sandbox is up ($((SECONDS - t0))s). Central runs in cluster '$central_cluster'.

  central       http://127.0.0.1:$CENTRAL_HTTP/{healthz,readyz,metrics}  admin gRPC 127.0.0.1:$CENTRAL_GRPC  agent link (mTLS) 127.0.0.1:$CENTRAL_LINK
$(for i in "${!CLUSTERS[@]}"; do printf '  agent %-7s http://127.0.0.1:%s/{healthz,readyz,metrics}\n' "${CLUSTERS[$i]}" "$((AGENT_HTTP_BASE + i))"; done)
  Kafka         my-cluster: $(IFS=' '; echo "${CLUSTERS[*]}") (its brokers: $("$kubectl" --kubeconfig "$kc_central" -n "$NAMESPACE" get kafka my-cluster -o jsonpath='{.status.listeners[0].bootstrapServers}'))
  logs          $LOG_DIR/
  Prometheus    $KSTRETCH_PROMETHEUS_URL (scrapes the Kafka pods of both clusters, central and the agents; Strimzi's dashboards and kstretch's work on it)
  a graph       $graph
  consumer lag  $lag

kstretch status:
$("$bin/kstretch" --central "http://127.0.0.1:$CENTRAL_GRPC" status | sed 's/^/  /')

kstretch agents ($agents_up of ${#CLUSTERS[@]} connected, identified by their certificates in $PKI):
$("$bin/kstretch" --central "http://127.0.0.1:$CENTRAL_GRPC" agents | sed 's/^/  /')

Resources in cluster '$central_cluster', namespace '$NAMESPACE':
$("$kubectl" --kubeconfig "$(kubeconfig_of "$central_cluster")" -n "$NAMESPACE" get k,knp,kt 2>&1 | sed 's/^/  /')
$(for c in "${CLUSTERS[@]}"; do
    printf "\nKafka pods in cluster '%s' (on its real node: kubelet and containerd):\n" "$c"
    "$kubectl" --kubeconfig "$(kubeconfig_of "$c")" -n "$NAMESPACE" get sps,pods -o wide 2>&1 | sed 's/^/  /'
  done)

Produce a record through a broker in '$central_cluster' and consume it through one in '${CLUSTERS[-1]}':
  $move_record

The same from this machine, outside both clusters, through the external TLS listener (host
names verified against the cluster CA only):
  $outside_record

Look around:
  export KUBECONFIG=$KSTRETCH_KUBECONFIG PATH=$KSTRETCH_BIN_DIR:\$PATH
  kubectl --context $central_cluster -n $NAMESPACE get k,knp,kt
  $bin/kstretch --central http://127.0.0.1:$CENTRAL_GRPC status
Stop everything: make sandbox-down
EOM
}

case ${1:-up} in
  up) up ;;
  down) down ;;
  *) die "usage: $0 up|down" ;;
esac
