#!/usr/bin/env bash
# tests/env/up.sh — owns: bringing the kstretch test environment up, idempotently, on
# 127.0.0.1 only, with all state under ${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}:
#   * one etcd shared by all simulated clusters (distinct --etcd-prefix per cluster);
#   * per cluster of KSTRETCH_CLUSTERS (default "alpha beta"): kube-apiserver,
#     kube-controller-manager, kube-scheduler, kwok, 3 fake Nodes, kubeconfig;
#   * Kafka KRaft: node 0 controller-only, nodes 1..3 broker-only;
#   * a second, independent Kafka cluster "nodelete": one combined broker+controller node
#     with delete.topic.enable=false (process kafka-nodelete), for topic deletion tests;
#   * one Kafka Connect distributed worker;
#   * the env file $STATE/env that tests source (`set -a; . "$STATE/env"; set +a`).
# A process whose pidfile points to a live process of the expected command that passes
# its health check is kept; anything else of ours is stopped and restarted. A changed
# environment definition (fingerprint of tests/env) tears everything down and starts
# fresh. Ports held by processes that are not ours make it fail, naming the holder.
set -euo pipefail
LOG_TAG=up
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

T_START=$SECONDS
TIMINGS=()
phase_start() { PHASE=$1 PHASE_T=$SECONDS; }
phase_end() { TIMINGS+=("$(printf '%-26s %4ss' "$PHASE" $((SECONDS - PHASE_T)))"); }

mkdir -p "$STATE" "$LOG_DIR" "$PID_DIR"
exec 9>"$STATE/.lock"
flock -w 900 9 || die "another up.sh/down.sh is running on $STATE (lock $STATE/.lock)"
export KSTRETCH_LOCK_HELD=1

# ------------------------------------------------------------------ binaries
phase_start install
"$ENV_DIR/install.sh"
phase_end

# ------------------------------------------------------------------ fingerprint
# Over the files that define what runs (not down.sh/status.sh/smoke.sh, which do not).
FINGERPRINT=$( {
  cat "$ENV_DIR"/{versions,lib,install,up,nodes}.sh "$ENV_DIR"/kafka/{pom.xml,log4j2.properties}
  (cd "$ENV_DIR/image" && find . -type f | LC_ALL=C sort | xargs cat)
  printf 'clusters=%s\nstate=%s\ncache=%s\n' "$KSTRETCH_CLUSTERS" "$STATE" "$CACHE"
} | sha256sum | cut -d' ' -f1)
if [[ ! -f $STATE/fingerprint || $(<"$STATE/fingerprint") != "$FINGERPRINT" ]]; then
  if [[ -f $STATE/fingerprint ]] || compgen -G "$PID_DIR/*.pid" >/dev/null; then
    log "environment definition changed (or unknown): tearing down and starting fresh"
  fi
  "$ENV_DIR/down.sh" --purge
  mkdir -p "$STATE" "$LOG_DIR" "$PID_DIR"
  printf '%s\n' "$FINGERPRINT" >"$STATE/fingerprint"
fi

# ------------------------------------------------------------------ bin dir
mkdir -p "$BIN_DIR"
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  ln -sfn "$K8S_DIR/$b" "$BIN_DIR/$b"
done
ln -sfn "$ETCD_BIN" "$BIN_DIR/etcd"
ln -sfn "$KWOK_DIR/kwok" "$BIN_DIR/kwok"
ln -sfn "$HELM_BIN" "$BIN_DIR/helm"
ln -sfn "$CACHE/prometheus-$KSTRETCH_PROMETHEUS_VERSION/promtool" "$BIN_DIR/promtool"
cat >"$BIN_DIR/kafka-run-class" <<EOF
#!/usr/bin/env bash
# kafka-run-class CLASS ARGS... — run a Kafka tool class with the test env's jars,
# e.g. kafka-run-class org.apache.kafka.tools.TopicCommand --bootstrap-server ... --list
exec java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \\
  -Dlog4j2.configurationFile="$STATE/kafka/log4j2-tools.properties" -cp "$KAFKA_LIBS/*" "\$@"
EOF
chmod +x "$BIN_DIR/kafka-run-class"

# ------------------------------------------------------------------ helpers
JAVA_COMMON=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -XX:+ExitOnOutOfMemoryError
  -Djava.awt.headless=true -Dlog4j2.configurationFile="$STATE/kafka/log4j2.properties")

kafka_tool() {
  java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \
    -Dlog4j2.configurationFile="$STATE/kafka/log4j2-tools.properties" -cp "$KAFKA_LIBS/*" "$@"
}

# ensure NAME CHECK_FN START_FN KEEP_TIMEOUT MARKER... — keep a live, healthy NAME;
# otherwise stop what is left of it and start it again (without waiting for health).
ensure() {
  local name=$1 check=$2 start=$3 keep_timeout=$4 pid rc
  shift 4
  if pid=$(live_pid "$name" "$@"); then
    rc=0
    wait_proc_healthy "$name" "$keep_timeout" "$check" || rc=$?
    if [[ $rc == 0 ]]; then
      log "kept $name (pid $pid)"
      return 0
    fi
    log "$name (pid $pid) is not healthy: restarting it"
  fi
  stop_proc "$name"
  "$start"
}

# await NAME TIMEOUT CHECK — wait for a started process to become healthy, else fail
# with the tail of its log.
await() {
  local name=$1 timeout=$2 check=$3 rc=0
  wait_proc_healthy "$name" "$timeout" "$check" || rc=$?
  case $rc in
    0) return 0 ;;
    1) tail_log "$name"; die "$name did not become healthy in ${timeout}s (log: $LOG_DIR/$name.log)" ;;
    *) tail_log "$name"; die "$name exited during startup (log: $LOG_DIR/$name.log)" ;;
  esac
}

# ------------------------------------------------------------------ etcd
ETCD_DATA=$STATE/etcd/data

etcd_start() {
  require_free_ports etcd "$KSTRETCH_ETCD_CLIENT_PORT" "$KSTRETCH_ETCD_PEER_PORT"
  mkdir -p "$ETCD_DATA"
  chmod 700 "$ETCD_DATA"
  # --unsafe-no-fsync: test data only; a killed process loses nothing (page cache
  # survives), only a machine crash could, and then the data is simply re-created.
  start_proc etcd "$ETCD_BIN" --name=kstretch --data-dir="$ETCD_DATA" \
    --listen-client-urls="$ETCD_URL" --advertise-client-urls="$ETCD_URL" \
    --listen-peer-urls="http://127.0.0.1:$KSTRETCH_ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$KSTRETCH_ETCD_PEER_PORT" \
    --initial-cluster="kstretch=http://127.0.0.1:$KSTRETCH_ETCD_PEER_PORT" \
    --unsafe-no-fsync=true --quota-backend-bytes=4294967296 --log-level=warn
}

ETCD_WIPED=0
phase_start etcd
ensure etcd etcd_check etcd_start 15 "$ETCD_BIN"
rc=0
wait_proc_healthy etcd 30 etcd_check || rc=$?
if [[ $rc != 0 ]]; then
  # Unusable data (e.g. corrupted by a crash): etcd only holds test state, so wipe it.
  tail_log etcd 15
  log "etcd did not come up with its data: wiping $ETCD_DATA and starting fresh"
  stop_proc etcd
  require_free_ports etcd "$KSTRETCH_ETCD_CLIENT_PORT" "$KSTRETCH_ETCD_PEER_PORT"
  rm -rf "$ETCD_DATA"
  ETCD_WIPED=1
  etcd_start
  await etcd 30 etcd_check
fi
phase_end

# ------------------------------------------------------------------ PKI & configs
# Per cluster: its own CA (also client CA), a serving cert for 127.0.0.1/localhost, a
# service-account key pair and a static admin token (group system:masters).
gen_cluster_pki() {
  local c=$1 dir=$STATE/$1/pki tmp
  [[ -s $dir/ca.crt && -s $dir/ca.key && -s $dir/apiserver.crt && -s $dir/apiserver.key &&
    -s $dir/sa.key && -s $dir/sa.pub && -s $dir/admin.token && -s $dir/kubelet-client.crt ]] && return 0
  tmp=$(mktemp -d "$STATE/$c/.pki.XXXXXX")
  (
    cd "$tmp"
    openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -keyout ca.key -out ca.crt \
      -subj "/CN=kstretch-$c-ca" -addext "basicConstraints=critical,CA:TRUE" \
      -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.96.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" \
      "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=serverAuth" "authorityKeyIdentifier=keyid,issuer" "subjectKeyIdentifier=hash" >apiserver.ext
    openssl x509 -req -sha256 -days 3650 -in apiserver.csr -CA ca.crt -CAkey ca.key \
      -CAcreateserial -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    # The apiserver's identity towards kubelets (kubectl logs/exec on real nodes).
    openssl req -newkey rsa:2048 -nodes -sha256 -keyout kubelet-client.key -out kubelet-client.csr \
      -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
      "extendedKeyUsage=clientAuth" >kubelet-client.ext
    openssl x509 -req -sha256 -days 3650 -in kubelet-client.csr -CA ca.crt -CAkey ca.key \
      -CAcreateserial -extfile kubelet-client.ext -out kubelet-client.crt 2>/dev/null
    rm -f kubelet-client.csr kubelet-client.ext
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    openssl rand -hex 24 >admin.token
    rm -f apiserver.csr apiserver.ext ca.srl
    chmod 600 ./*.key admin.token
  )
  rm -rf "$dir"
  mv "$tmp" "$dir"
}


write_cluster_files() {
  local c=$1 i=$2 dir=$STATE/$1 token port n zone
  token=$(<"$dir/pki/admin.token")
  port=$(cluster_port "$KSTRETCH_APISERVER_BASE_PORT" "$i")
  printf '%s,kstretch-admin,kstretch-admin,"system:masters"\n' "$token" >"$dir/tokens.csv"
  chmod 600 "$dir/tokens.csv"
  cat >"$dir/kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $c
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority-data: $(base64 -w0 <"$dir/pki/ca.crt")
users:
- name: $c-admin
  user:
    token: $token
contexts:
- name: $c
  context:
    cluster: $c
    user: $c-admin
    namespace: default
current-context: $c
EOF
  chmod 600 "$dir/kubeconfig.tmp"
  mv -f "$dir/kubeconfig.tmp" "$dir/kubeconfig"
  : >"$dir/nodes.yaml"
  for n in 0 1 2; do
    zone=$c-zone-$n
    cat >>"$dir/nodes.yaml" <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $c-node-$n
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/hostname: $c-node-$n
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    topology.kubernetes.io/zone: $zone
    topology.kubernetes.io/region: $c
    kstretch.test/cluster: $c
status:
  allocatable: {cpu: "128", memory: 512Gi, pods: "1100", ephemeral-storage: 1Ti}
  capacity: {cpu: "128", memory: 512Gi, pods: "1100", ephemeral-storage: 1Ti}
EOF
  done
}

for i in "${!CLUSTERS[@]}"; do
  c=${CLUSTERS[$i]}
  [[ $c =~ ^[a-z][a-z0-9-]*$ ]] || die "cluster name '$c' must match ^[a-z][a-z0-9-]*\$"
  mkdir -p "$STATE/$c"
  gen_cluster_pki "$c"
  write_cluster_files "$c" "$i"
done

# ------------------------------------------------------------------ Kafka configs
KAFKA_DIR=$STATE/kafka
CONNECT_DIR=$STATE/connect
mkdir -p "$KAFKA_DIR" "$CONNECT_DIR"
cp "$ENV_DIR/kafka/log4j2.properties" "$KAFKA_DIR/log4j2.properties"
sed -e 's/^rootLogger.level = .*/rootLogger.level = WARN/' "$ENV_DIR/kafka/log4j2.properties" \
  >"$KAFKA_DIR/log4j2-tools.properties"
[[ -s $KAFKA_DIR/cluster-id ]] || kafka_tool kafka.tools.StorageTool random-uuid >"$KAFKA_DIR/cluster-id"
KAFKA_CLUSTER_ID=$(<"$KAFKA_DIR/cluster-id")
KAFKA_CONTROLLER=127.0.0.1:$KSTRETCH_KAFKA_BASE_PORT
KAFKA_BOOTSTRAP=
for n in "${KAFKA_BROKERS[@]}"; do
  KAFKA_BOOTSTRAP+=${KAFKA_BOOTSTRAP:+,}127.0.0.1:$((KSTRETCH_KAFKA_BASE_PORT + n))
done

write_kafka_config() {
  local n=$1 dir=$KAFKA_DIR/$1 port=$((KSTRETCH_KAFKA_BASE_PORT + $1))
  mkdir -p "$dir"
  {
    printf '# generated by tests/env/up.sh\nnode.id=%s\n' "$n"
    printf 'log.dirs=%s\n' "$dir/data"
    printf 'controller.listener.names=CONTROLLER\n'
    printf 'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n'
    # Dynamic quorum (KIP-853): the controller is formatted --standalone.
    printf 'controller.quorum.bootstrap.servers=%s\n' "$KAFKA_CONTROLLER"
    if [[ $n == 0 ]]; then
      printf 'process.roles=controller\nlisteners=CONTROLLER://%s\n' "$KAFKA_CONTROLLER"
    else
      printf 'process.roles=broker\nlisteners=PLAINTEXT://127.0.0.1:%s\n' "$port"
      printf 'advertised.listeners=PLAINTEXT://127.0.0.1:%s\n' "$port"
      printf 'inter.broker.listener.name=PLAINTEXT\n'
    fi
    cat <<'EOF'
num.partitions=1
default.replication.factor=3
min.insync.replicas=1
offsets.topic.replication.factor=3
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=1
auto.create.topics.enable=false
delete.topic.enable=true
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=4
background.threads=4
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
log.segment.bytes=8388608
log.index.size.max.bytes=1048576
log.retention.hours=24
log.retention.bytes=268435456
log.cleaner.dedupe.buffer.size=8388608
log.cleaner.threads=1
metadata.log.segment.bytes=8388608
metadata.max.retention.bytes=67108864
broker.session.timeout.ms=9000
broker.heartbeat.interval.ms=1000
EOF
  } >"$dir/server.properties"
}
for n in "${KAFKA_NODES[@]}"; do write_kafka_config "$n"; done

cat >"$CONNECT_DIR/worker.properties" <<EOF
# generated by tests/env/up.sh
bootstrap.servers=$KAFKA_BOOTSTRAP
group.id=kstretch-connect
listeners=http://127.0.0.1:$KSTRETCH_CONNECT_PORT
rest.advertised.host.name=127.0.0.1
rest.advertised.port=$KSTRETCH_CONNECT_PORT
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=false
value.converter.schemas.enable=false
offset.storage.topic=kstretch-connect-offsets
config.storage.topic=kstretch-connect-configs
status.storage.topic=kstretch-connect-status
offset.storage.replication.factor=3
config.storage.replication.factor=3
status.storage.replication.factor=3
offset.storage.partitions=5
status.storage.partitions=3
offset.flush.interval.ms=1000
# A restarted worker gets its connectors back at once, not after the default 5 minutes.
scheduled.rebalance.max.delay.ms=0
connector.client.config.override.policy=All
# Plugins come from the classpath (connect-file is on it); no plugin.path.
plugin.discovery=service_load
EOF

# The nodelete cluster: its own cluster id, config and data dir; one node, id 0, in
# combined mode (broker and controller), with topic deletion disabled.
mkdir -p "$KAFKA_NODELETE_DIR"
[[ -s $KAFKA_NODELETE_DIR/cluster-id ]] ||
  kafka_tool kafka.tools.StorageTool random-uuid >"$KAFKA_NODELETE_DIR/cluster-id"
KAFKA_NODELETE_CLUSTER_ID=$(<"$KAFKA_NODELETE_DIR/cluster-id")
KAFKA_NODELETE_BOOTSTRAP=127.0.0.1:$KSTRETCH_KAFKA_NODELETE_PORT
KAFKA_NODELETE_CONTROLLER=127.0.0.1:$KSTRETCH_KAFKA_NODELETE_CONTROLLER_PORT
{
  printf '# generated by tests/env/up.sh\nnode.id=0\n'
  printf 'log.dirs=%s\n' "$KAFKA_NODELETE_DIR/data"
  printf 'process.roles=broker,controller\n'
  printf 'controller.listener.names=CONTROLLER\n'
  printf 'listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n'
  printf 'controller.quorum.bootstrap.servers=%s\n' "$KAFKA_NODELETE_CONTROLLER"
  printf 'listeners=PLAINTEXT://%s,CONTROLLER://%s\n' "$KAFKA_NODELETE_BOOTSTRAP" "$KAFKA_NODELETE_CONTROLLER"
  printf 'advertised.listeners=PLAINTEXT://%s\n' "$KAFKA_NODELETE_BOOTSTRAP"
  printf 'inter.broker.listener.name=PLAINTEXT\n'
  cat <<'EOF'
# The point of this cluster: DeleteTopics is answered with TOPIC_DELETION_DISABLED (both
# roles read it; in KRaft the controller enforces it).
delete.topic.enable=false
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
num.network.threads=2
num.io.threads=2
background.threads=2
num.replica.fetchers=1
num.recovery.threads.per.data.dir=1
log.segment.bytes=8388608
log.index.size.max.bytes=1048576
log.retention.hours=24
log.retention.bytes=268435456
log.cleaner.dedupe.buffer.size=8388608
log.cleaner.threads=1
metadata.log.segment.bytes=8388608
metadata.max.retention.bytes=67108864
broker.session.timeout.ms=9000
broker.heartbeat.interval.ms=1000
EOF
} >"$KAFKA_NODELETE_DIR/server.properties"

# ------------------------------------------------------------------ Kafka storage
# Kafka data is all-or-nothing: every node formatted with our cluster id, or all four
# are wiped and formatted again (a broker's metadata must match the controller's).
kafka_node_formatted() {
  grep -qx "cluster.id=$KAFKA_CLUSTER_ID" "$KAFKA_DIR/$1/data/meta.properties" 2>/dev/null
}
kafka_stop_all() {
  stop_proc connect
  local n pids=()
  for n in "${KAFKA_BROKERS[@]}"; do
    stop_proc "kafka-$n" &
    pids+=($!)
  done
  # Wait for these only: a bare `wait` would also wait for the daemons we started.
  wait "${pids[@]}"
  stop_proc kafka-0
}
kafka_format_all() {
  local n pids=() fmt
  log "formatting Kafka storage (cluster id $KAFKA_CLUSTER_ID)"
  for n in "${KAFKA_NODES[@]}"; do
    rm -rf "$KAFKA_DIR/$n/data"
    if [[ $n == 0 ]]; then fmt=(--standalone); else fmt=(); fi
    kafka_tool kafka.tools.StorageTool format -t "$KAFKA_CLUSTER_ID" \
      -c "$KAFKA_DIR/$n/server.properties" "${fmt[@]}" >"$LOG_DIR/kafka-$n.format.log" 2>&1 &
    pids+=($!)
  done
  for n in "${!pids[@]}"; do
    wait "${pids[$n]}" || { cat "$LOG_DIR/kafka-$n.format.log" >&2; die "formatting kafka-$n failed"; }
  done
}

# The nodelete cluster's data is all-or-nothing on its own: only its own data dir is
# ever wiped, the main cluster's never.
kafka_nodelete_formatted() {
  grep -qx "cluster.id=$KAFKA_NODELETE_CLUSTER_ID" "$KAFKA_NODELETE_DIR/data/meta.properties" 2>/dev/null
}
kafka_nodelete_format() {
  log "formatting $KAFKA_NODELETE storage (cluster id $KAFKA_NODELETE_CLUSTER_ID)"
  rm -rf "$KAFKA_NODELETE_DIR/data"
  kafka_tool kafka.tools.StorageTool format -t "$KAFKA_NODELETE_CLUSTER_ID" \
    -c "$KAFKA_NODELETE_DIR/server.properties" --standalone >"$LOG_DIR/$KAFKA_NODELETE.format.log" 2>&1 ||
    { cat "$LOG_DIR/$KAFKA_NODELETE.format.log" >&2; die "formatting $KAFKA_NODELETE failed"; }
}

phase_start kafka-storage
need_format=0
for n in "${KAFKA_NODES[@]}"; do kafka_node_formatted "$n" || need_format=1; done
if [[ $need_format == 1 ]]; then
  kafka_stop_all
  kafka_format_all
fi
if ! kafka_nodelete_formatted; then
  stop_proc "$KAFKA_NODELETE"
  kafka_nodelete_format
fi
phase_end

# ------------------------------------------------------------------ Kafka nodes (start)
kafka_node_start() {
  local n=$KAFKA_N heap=(-Xms128m -Xmx512m)
  [[ $n == 0 ]] && heap=(-Xms64m -Xmx256m)
  require_free_ports "kafka-$n" $((KSTRETCH_KAFKA_BASE_PORT + n))
  start_proc "kafka-$n" java "${heap[@]}" "${JAVA_COMMON[@]}" -cp "$KAFKA_LIBS/*" \
    kafka.Kafka "$KAFKA_DIR/$n/server.properties"
}
kafka_ensure_all() {
  for KAFKA_N in "${KAFKA_NODES[@]}"; do
    ensure "kafka-$KAFKA_N" kafka_node_check kafka_node_start 15 kafka.Kafka "$KAFKA_DIR/$KAFKA_N/server.properties"
  done
}
kafka_nodelete_start() {
  require_free_ports "$KAFKA_NODELETE" "$KSTRETCH_KAFKA_NODELETE_PORT" "$KSTRETCH_KAFKA_NODELETE_CONTROLLER_PORT"
  start_proc "$KAFKA_NODELETE" java -Xms64m -Xmx256m "${JAVA_COMMON[@]}" -cp "$KAFKA_LIBS/*" \
    kafka.Kafka "$KAFKA_NODELETE_DIR/server.properties"
}
kafka_nodelete_ensure() {
  ensure "$KAFKA_NODELETE" kafka_nodelete_check kafka_nodelete_start 15 kafka.Kafka "$KAFKA_NODELETE_DIR/server.properties"
}
phase_start kafka-start
kafka_ensure_all
kafka_nodelete_ensure
phase_end

# ------------------------------------------------------------------ apiservers
apiserver_start() {
  local c=$CUR_C i=$CUR_I dir=$STATE/$CUR_C port
  port=$(cluster_port "$KSTRETCH_APISERVER_BASE_PORT" "$i")
  require_free_ports "$c-apiserver" "$port"
  mkdir -p "$dir/apiserver"
  start_proc "$c-apiserver" "$K8S_DIR/kube-apiserver" \
    --etcd-servers="$ETCD_URL" --etcd-prefix="/kstretch/$c" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$port" \
    --cert-dir="$dir/apiserver" \
    --tls-cert-file="$dir/pki/apiserver.crt" --tls-private-key-file="$dir/pki/apiserver.key" \
    --client-ca-file="$dir/pki/ca.crt" --token-auth-file="$dir/tokens.csv" \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$dir/pki/sa.pub" \
    --service-account-signing-key-file="$dir/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range=10.96.0.0/16 \
    --endpoint-reconciler-type=none \
    --kubelet-client-certificate="$dir/pki/kubelet-client.crt" --kubelet-client-key="$dir/pki/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --allow-privileged=true --profiling=false
}

phase_start apiservers
for i in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$i]} CUR_I=$i
  if [[ $ETCD_WIPED == 1 ]]; then
    for comp in kwok scheduler controller-manager apiserver; do stop_proc "$CUR_C-$comp"; done
  fi
  ensure "$CUR_C-apiserver" apiserver_check apiserver_start 20 "$K8S_DIR/kube-apiserver" "--etcd-prefix=/kstretch/$CUR_C"
done
for i in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$i]} CUR_I=$i
  await "$CUR_C-apiserver" 180 apiserver_check
done
phase_end

# ------------------------------------------------------------------ per-cluster controllers
kc() { "$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig" --context "$CUR_C" "$@"; }

kcm_start() {
  local c=$CUR_C dir=$STATE/$CUR_C port
  port=$(cluster_port "$KSTRETCH_KCM_BASE_PORT" "$CUR_I")
  require_free_ports "$c-controller-manager" "$port"
  mkdir -p "$dir/controller-manager"
  start_proc "$c-controller-manager" "$K8S_DIR/kube-controller-manager" \
    --kubeconfig="$dir/kubeconfig" \
    --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$port" --cert-dir="$dir/controller-manager" \
    --leader-elect=false --cluster-name="$c" \
    --root-ca-file="$dir/pki/ca.crt" --service-account-private-key-file="$dir/pki/sa.key" \
    --cluster-signing-cert-file="$dir/pki/ca.crt" --cluster-signing-key-file="$dir/pki/ca.key" \
    --use-service-account-credentials=false --profiling=false
}
sched_start() {
  local c=$CUR_C dir=$STATE/$CUR_C port
  port=$(cluster_port "$KSTRETCH_SCHED_BASE_PORT" "$CUR_I")
  require_free_ports "$c-scheduler" "$port"
  mkdir -p "$dir/scheduler"
  start_proc "$c-scheduler" "$K8S_DIR/kube-scheduler" \
    --kubeconfig="$dir/kubeconfig" \
    --authentication-kubeconfig="$dir/kubeconfig" --authorization-kubeconfig="$dir/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$port" --cert-dir="$dir/scheduler" \
    --leader-elect=false --profiling=false
}
kwok_start() {
  local c=$CUR_C dir=$STATE/$CUR_C port stages
  port=$(cluster_port "$KSTRETCH_KWOK_BASE_PORT" "$CUR_I")
  require_free_ports "$c-kwok" "$port"
  # Only the nodes annotated kwok.x-k8s.io/node=fake are kwok's: its "kubelet".
  stages=$(printf '%s,' "$KWOK_DIR"/stages/*.yaml)
  start_proc "$c-kwok" "$KWOK_DIR/kwok" \
    --kubeconfig="$dir/kubeconfig" --config="${stages%,}" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --manage-nodes-with-label-selector= \
    --node-ip=127.0.0.1 --node-port="$port" --server-address="127.0.0.1:$port" \
    --cidr="10.$((100 + CUR_I)).0.1/16" --node-lease-duration-seconds=40
}

phase_start cluster-controllers
for i in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$i]} CUR_I=$i
  kc apply -f "$KWOK_DIR/manifests/storage-class.yaml" >/dev/null
  if [[ $(kc get nodes -l type=kwok -o name | wc -l) -lt 3 ]]; then
    kc apply -f "$STATE/$CUR_C/nodes.yaml" >/dev/null
  fi
  ensure "$CUR_C-controller-manager" kcm_check kcm_start 10 "$K8S_DIR/kube-controller-manager" "$STATE/$CUR_C/"
  ensure "$CUR_C-scheduler" sched_check sched_start 10 "$K8S_DIR/kube-scheduler" "$STATE/$CUR_C/"
  ensure "$CUR_C-kwok" kwok_check kwok_start 10 "$KWOK_DIR/kwok" "$STATE/$CUR_C/"
done
for i in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$i]} CUR_I=$i
  await "$CUR_C-controller-manager" 90 kcm_check
  await "$CUR_C-scheduler" 90 sched_check
  await "$CUR_C-kwok" 90 kwok_check
done
phase_end

# ------------------------------------------------------------------ Kafka (ready)
brokers_registered() {
  local out
  out=$(kafka_tool org.apache.kafka.tools.ClusterTool list-endpoints --bootstrap-server "$KAFKA_BOOTSTRAP" 2>&1) || {
    printf '%s\n' "$out"
    return 1
  }
  printf '%s\n' "$out"
  local n
  for n in "${KAFKA_BROKERS[@]}"; do
    grep -Eq "^${n}[[:space:]].*[[:space:]]unfenced[[:space:]]" <<<"$out" || return 1
  done
}
kafka_dead_nodes() {
  local n
  for n in "${KAFKA_NODES[@]}"; do live_pid "kafka-$n" kafka.Kafka >/dev/null || printf 'kafka-%s ' "$n"; done
}

# Every node started (per its own log), then every broker registered and unfenced
# according to the cluster metadata.
kafka_ready() {
  for KAFKA_N in "${KAFKA_NODES[@]}"; do
    kafka_node_check || {
      echo "kafka-$KAFKA_N has not finished starting (see $LOG_DIR/kafka-$KAFKA_N.log)"
      return 1
    }
  done
  brokers_registered
}

phase_start kafka-ready
if ! wait_for 150 "Kafka nodes to start and brokers ${KAFKA_BROKERS[*]} to register" kafka_ready; then
  dead=$(kafka_dead_nodes)
  for n in "${KAFKA_NODES[@]}"; do tail_log "kafka-$n" 10; done
  # Unusable data (or a node that will not start on it): Kafka holds only test data,
  # so wipe all four nodes, format again and start fresh once.
  log "Kafka did not come up (dead: ${dead:-none}): wiping Kafka data and starting fresh"
  kafka_stop_all
  kafka_format_all
  kafka_ensure_all
  wait_for 150 "Kafka to start after a fresh start" kafka_ready ||
    die "Kafka did not come up; see $LOG_DIR/kafka-*.log"
fi
phase_end

# ------------------------------------------------------------------ Kafka Connect
connect_start() {
  require_free_ports connect "$KSTRETCH_CONNECT_PORT"
  start_proc connect java -Xms128m -Xmx512m "${JAVA_COMMON[@]}" -cp "$KAFKA_LIBS/*" \
    org.apache.kafka.connect.cli.ConnectDistributed "$CONNECT_DIR/worker.properties"
}
phase_start connect
ensure connect connect_check connect_start 10 ConnectDistributed "$CONNECT_DIR/worker.properties"
await connect 180 connect_check
phase_end

# ------------------------------------------------------------------ Kafka nodelete (ready)
# Started with the main cluster, checked here so that its start overlaps with Connect's.
kafka_nodelete_ready() {
  kafka_nodelete_check || {
    echo "$KAFKA_NODELETE has not finished starting (see $LOG_DIR/$KAFKA_NODELETE.log)"
    return 1
  }
  local out
  out=$(kafka_tool org.apache.kafka.tools.ClusterTool list-endpoints --bootstrap-server "$KAFKA_NODELETE_BOOTSTRAP" 2>&1) || {
    printf '%s\n' "$out"
    return 1
  }
  printf '%s\n' "$out"
  grep -Eq "^0[[:space:]].*[[:space:]]unfenced[[:space:]]" <<<"$out"
}
phase_start kafka-nodelete
if ! wait_for 150 "$KAFKA_NODELETE to start and register" kafka_nodelete_ready; then
  tail_log "$KAFKA_NODELETE" 10
  log "$KAFKA_NODELETE did not come up: wiping its data (only) and starting it fresh"
  stop_proc "$KAFKA_NODELETE"
  kafka_nodelete_format
  kafka_nodelete_ensure
  wait_for 150 "$KAFKA_NODELETE to start after a fresh start" kafka_nodelete_ready ||
    die "$KAFKA_NODELETE did not come up; see $LOG_DIR/$KAFKA_NODELETE.log"
fi
phase_end

# ------------------------------------------------------------------ cluster readiness
default_sa_exists() { kc -n default get serviceaccount default -o name; }
nodes_ready() {
  local out
  out=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')
  printf '%s\n' "$out"
  [[ $(grep -c '=True$' <<<"$out") -ge 3 ]]
}
phase_start cluster-ready
for i in "${!CLUSTERS[@]}"; do
  CUR_C=${CLUSTERS[$i]} CUR_I=$i
  wait_for 120 "ServiceAccount default/default in $CUR_C (kube-controller-manager)" default_sa_exists ||
    { tail_log "$CUR_C-controller-manager"; die "$CUR_C: no default ServiceAccount"; }
  wait_for 120 "3 Ready kwok nodes in $CUR_C (kwok)" nodes_ready ||
    { tail_log "$CUR_C-kwok"; die "$CUR_C: nodes not Ready"; }
done
phase_end

# ------------------------------------------------------------------ real nodes
phase_start real-nodes
"$ENV_DIR/nodes.sh" up
phase_end

# ------------------------------------------------------------------ Prometheus
# Prometheus, as a user's would run beside their clusters: it finds the pods of every
# cluster that name a container port tcp-prometheus (Strimzi's metrics port) through that
# cluster's apiserver, and scrapes them at their pod IPs (the host routes to each real node's
# pods), labelled with the cluster's name.
PROMETHEUS_DIR=$STATE/prometheus
write_prometheus_config() {
  local c
  mkdir -p "$PROMETHEUS_DIR/data" "$PROMETHEUS_DIR/targets"
  {
    echo "# generated by tests/env/up.sh"
    echo "global: {scrape_interval: 5s, evaluation_interval: 5s}"
    # The alerts kstretch ships, as a user loads them.
    echo "rule_files: [$ENV_DIR/../../charts/kstretch-central/files/prometheus-rules.yaml]"
    echo "scrape_configs:"
    # kstretch's own processes that tests start write their addresses here (one file each).
    cat <<EOF
- job_name: kstretch
  file_sd_configs:
  - {files: ['$PROMETHEUS_DIR/targets/*.json'], refresh_interval: 5s}
EOF
    for c in "${CLUSTERS[@]}"; do
      cat <<EOF
- job_name: pods-$c
  # A Kafka node's scrape costs it CPU (the JMX exporter's, with rules as Strimzi's, about half
  # a second of CPU: docs/benchmarks.md); on two cores, every 15 s at most, with room to answer.
  scrape_interval: 15s
  scrape_timeout: 10s
  kubernetes_sd_configs:
  - {role: pod, kubeconfig_file: $STATE/$c/kubeconfig}
  relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_container_port_name], regex: tcp-prometheus, action: keep}
  - {target_label: cluster, replacement: $c}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: kubernetes_pod_name}
  - {source_labels: [__meta_kubernetes_pod_node_name], target_label: node_name}
  - {regex: __meta_kubernetes_pod_label_strimzi_io_(.+), action: labelmap, replacement: strimzi_io_\$1}
# kstretch's own pods (the charts' central and agents), found as a Prometheus without the
# Prometheus Operator finds them: by their prometheus.io annotations. Their series carry a
# cluster label of their own (an agent's alias), so the pod's cluster is kube_cluster.
- job_name: kstretch-pods-$c
  kubernetes_sd_configs:
  - {role: pod, kubeconfig_file: $STATE/$c/kubeconfig}
  relabel_configs:
  - {source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_part_of], regex: kstretch, action: keep}
  - {source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape], regex: "true", action: keep}
  - {source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path], regex: (.+), target_label: __metrics_path__}
  - source_labels: [__meta_kubernetes_pod_ip, __meta_kubernetes_pod_annotation_prometheus_io_port]
    regex: (.+);(.+)
    replacement: \$1:\$2
    target_label: __address__
  - {target_label: kube_cluster, replacement: $c}
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: kubernetes_pod_name}
EOF
    done
  } >"$PROMETHEUS_DIR/prometheus.yml.tmp"
  mv -f "$PROMETHEUS_DIR/prometheus.yml.tmp" "$PROMETHEUS_DIR/prometheus.yml"
}
prometheus_start() {
  require_free_ports prometheus "$KSTRETCH_PROMETHEUS_PORT"
  start_proc prometheus "$CACHE/prometheus-$KSTRETCH_PROMETHEUS_VERSION/prometheus" --config.file="$PROMETHEUS_DIR/prometheus.yml" \
    --storage.tsdb.path="$PROMETHEUS_DIR/data" --storage.tsdb.retention.time=6h \
    --web.listen-address="127.0.0.1:$KSTRETCH_PROMETHEUS_PORT" --web.enable-lifecycle
}
phase_start prometheus
write_prometheus_config
ensure prometheus prometheus_check prometheus_start 10 "$PROMETHEUS_DIR/prometheus.yml"
await prometheus 60 prometheus_check
# A kept Prometheus reads the configuration written now.
curl -sf -X POST "http://127.0.0.1:$KSTRETCH_PROMETHEUS_PORT/-/reload" >/dev/null ||
  die "prometheus did not reload $PROMETHEUS_DIR/prometheus.yml (see $LOG_DIR/prometheus.log)"
phase_end

# ------------------------------------------------------------------ env file
KUBECONFIGS=()
{
  printf 'KSTRETCH_STATE_DIR=%s\n' "$STATE"
  printf 'KSTRETCH_LOG_DIR=%s\n' "$LOG_DIR"
  printf 'KSTRETCH_BIN_DIR=%s\n' "$BIN_DIR"
  printf 'KSTRETCH_CLUSTERS="%s"\n' "${CLUSTERS[*]}"
  for c in "${CLUSTERS[@]}"; do
    printf 'KSTRETCH_KUBECONFIG_%s=%s\n' "$(upper "$c")" "$STATE/$c/kubeconfig"
    KUBECONFIGS+=("$STATE/$c/kubeconfig")
  done
  printf 'KSTRETCH_KUBECONFIG=%s\n' "$(
    IFS=:
    printf '%s' "${KUBECONFIGS[*]}"
  )"
  printf 'KSTRETCH_KAFKA_BOOTSTRAP=%s\n' "$KAFKA_BOOTSTRAP"
  printf 'KSTRETCH_KAFKA_CONTROLLER=%s\n' "$KAFKA_CONTROLLER"
  printf 'KSTRETCH_KAFKA_BROKER_IDS=%s\n' "$(
    IFS=,
    printf '%s' "${KAFKA_BROKERS[*]}"
  )"
  printf 'KSTRETCH_KAFKA_CONTROLLER_IDS=0\n'
  printf 'KSTRETCH_KAFKA_CLUSTER_ID=%s\n' "$KAFKA_CLUSTER_ID"
  printf 'KSTRETCH_KAFKA_LIBS=%s\n' "$KAFKA_LIBS"
  printf 'KSTRETCH_KAFKA_NEXT_VERSION=%s\n' "$KSTRETCH_KAFKA_NEXT_VERSION"
  printf 'KSTRETCH_KAFKA_NEXT_LIBS=%s\n' "$CACHE/kafka-$KSTRETCH_KAFKA_NEXT_VERSION/libs"
  printf 'KSTRETCH_CONNECT_URL=%s\n' "$CONNECT_URL"
  printf 'KSTRETCH_PROMETHEUS_URL=http://127.0.0.1:%s\n' "$KSTRETCH_PROMETHEUS_PORT"
  printf 'KSTRETCH_PROMETHEUS_TARGETS=%s\n' "$PROMETHEUS_DIR/targets"
  printf 'KSTRETCH_KAFKA_NODELETE_BOOTSTRAP=%s\n' "$KAFKA_NODELETE_BOOTSTRAP"
  printf 'KSTRETCH_KAFKA_NODELETE_CLUSTER_ID=%s\n' "$KAFKA_NODELETE_CLUSTER_ID"
  for i in "${!CLUSTERS[@]}"; do
    printf 'KSTRETCH_REAL_NODE_IP_%s=10.250.%s.2\n' "$(upper "${CLUSTERS[$i]}")" "$i"
  done
} >"$STATE/env.tmp"
mv -f "$STATE/env.tmp" "$STATE/env"

# ------------------------------------------------------------------ summary
{
  echo
  echo "kstretch test environment is up (state: $STATE)"
  printf '  %-28s %s\n' "etcd" "$ETCD_URL"
  for i in "${!CLUSTERS[@]}"; do
    c=${CLUSTERS[$i]}
    printf '  %-28s %s  (kubeconfig %s, context %s)\n' "cluster $c" "$(apiserver_url "$i")" "$STATE/$c/kubeconfig" "$c"
  done
  printf '  %-28s %s\n' "Kafka controller (id 0)" "$KAFKA_CONTROLLER"
  printf '  %-28s %s\n' "Kafka brokers (ids 1,2,3)" "$KAFKA_BOOTSTRAP"
  printf '  %-28s %s\n' "Kafka Connect" "$CONNECT_URL"
  printf '  %-28s %s\n' "Prometheus" "http://127.0.0.1:$KSTRETCH_PROMETHEUS_PORT"
  printf '  %-28s %s\n' "Kafka nodelete (id 0)" "$KAFKA_NODELETE_BOOTSTRAP  (delete.topic.enable=false)"
  echo "  env file: $STATE/env      logs: $LOG_DIR/      binaries: $BIN_DIR/"
  echo "  look:     KUBECONFIG=$STATE/${CLUSTERS[0]}/kubeconfig $BIN_DIR/kubectl --context ${CLUSTERS[0]} get nodes"
  echo "            $BIN_DIR/kafka-run-class org.apache.kafka.tools.TopicCommand --bootstrap-server $KAFKA_BOOTSTRAP --list"
  echo "  timings:"
  printf '    %s\n' "${TIMINGS[@]}"
  echo "  total: $((SECONDS - T_START))s"
} >&2
echo "$STATE/env"
