#!/usr/bin/env bash
# tests/env/smoke.sh — owns: a quick end-to-end check that a running test environment
# (from up.sh) really works; it does not start anything. Per cluster: 3 Ready kwok
# nodes, a Pod that becomes Running+Ready on a kwok node, garbage collection of a Pod
# owned by a deleted ConfigMap, a PVC bound by kwok's volume stages. Kafka: a topic
# with replication factor 3. Connect: both FileStream connectors listed, and a
# FileStreamSource connector that runs and moves a line into a topic. Kafka nodelete:
# deleting a topic is refused (TopicDeletionDisabledException).
# Everything it creates has a unique name and is deleted again, except the nodelete
# cluster's topic `smoke-nodelete`, which cannot be deleted and is reused by every run.
set -euo pipefail
LOG_TAG=smoke # used by log() in lib.sh
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

[[ -f $STATE/env ]] || die "no $STATE/env: run tests/env/up.sh first"
set -a
# shellcheck disable=SC1091
. "$STATE/env"
set +a

ID=smoke-$(date +%s)-$$
T0=$SECONDS
pass=0
ok() {
  pass=$((pass + 1))
  log "ok: $*"
}
kafka() { "$KSTRETCH_BIN_DIR/kafka-run-class" "$@"; }

for c in $KSTRETCH_CLUSTERS; do
  kc() { KUBECONFIG=$KSTRETCH_KUBECONFIG "$KSTRETCH_BIN_DIR/kubectl" --context "$c" "$@"; }
  ready=$(kc get nodes -l type=kwok -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True || true)
  [[ $ready -ge 3 ]] || die "$c: $ready Ready kwok nodes"
  ok "$c: $ready Ready kwok nodes"

  kc create namespace "$ID" >/dev/null
  kc -n "$ID" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ConfigMap
metadata: {name: owner}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
EOF
  uid=$(kc -n "$ID" get configmap owner -o jsonpath='{.metadata.uid}')
  kc -n "$ID" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: app
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: $uid}]
spec:
  containers: [{name: app, image: busybox, resources: {requests: {cpu: 100m, memory: 64Mi}}}]
EOF
  wait_for 60 "$c: pod Ready" kc -n "$ID" wait --for=condition=Ready pod/app --timeout=5s >/dev/null ||
    die "$c: pod not Ready: $(kc -n "$ID" get pod app -o wide 2>&1)"
  node=$(kc -n "$ID" get pod app -o jsonpath='{.spec.nodeName} {.status.phase} {.status.podIP}')
  ok "$c: pod Running+Ready ($node)"
  pvc_bound() { [[ $(kc -n "$ID" get pvc data -o jsonpath='{.status.phase}') == Bound ]]; }
  wait_for 60 "$c: PVC Bound" pvc_bound || die "$c: PVC not bound"
  ok "$c: PVC bound by kwok (StorageClass kwok-volume)"
  kc -n "$ID" delete configmap owner --wait=true >/dev/null
  pod_gone() { ! kc -n "$ID" get pod app -o name >/dev/null 2>&1; }
  wait_for 60 "$c: owned pod garbage-collected" pod_gone || die "$c: pod not garbage-collected"
  ok "$c: pod garbage-collected after its owner ConfigMap was deleted"
  kc delete namespace "$ID" --wait=false >/dev/null
done

kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_BOOTSTRAP" \
  --create --topic "$ID" --partitions 3 --replication-factor 3 >/dev/null
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_BOOTSTRAP" --list | grep -qx "$ID" ||
  die "topic $ID not listed"
ok "Kafka: topic $ID (RF 3) created and listed"

# The nodelete cluster refuses topic deletion: DeleteTopics -> TOPIC_DELETION_DISABLED.
NODELETE_TOPIC=smoke-nodelete
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_NODELETE_BOOTSTRAP" \
  --create --if-not-exists --topic "$NODELETE_TOPIC" --partitions 1 --replication-factor 1 >/dev/null
if out=$(kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_NODELETE_BOOTSTRAP" \
  --delete --topic "$NODELETE_TOPIC" 2>&1); then
  die "Kafka nodelete: deleting topic $NODELETE_TOPIC succeeded: $out"
fi
grep -q TopicDeletionDisabledException <<<"$out" ||
  die "Kafka nodelete: deleting topic $NODELETE_TOPIC failed, but not because deletion is disabled: $out"
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_NODELETE_BOOTSTRAP" --list |
  grep -qx "$NODELETE_TOPIC" || die "Kafka nodelete: topic $NODELETE_TOPIC is gone after a refused deletion"
ok "Kafka nodelete: deleting topic $NODELETE_TOPIC refused (TopicDeletionDisabledException), topic kept"

plugins=$(curl -sf "$KSTRETCH_CONNECT_URL/connector-plugins")
if ! grep -q FileStreamSourceConnector <<<"$plugins" || ! grep -q FileStreamSinkConnector <<<"$plugins"; then
  die "connector plugins: $plugins"
fi
ok "Connect: FileStreamSourceConnector and FileStreamSinkConnector listed"

src=$(mktemp)
printf 'hello-%s\n' "$ID" >"$src"
curl -sf -X PUT -H 'Content-Type: application/json' "$KSTRETCH_CONNECT_URL/connectors/$ID/config" \
  -d "{\"connector.class\":\"FileStreamSource\",\"tasks.max\":\"1\",\"file\":\"$src\",\"topic\":\"$ID\"}" >/dev/null
running() { curl -sf "$KSTRETCH_CONNECT_URL/connectors/$ID/status" | grep -q '"tasks":\[{"id":0,"state":"RUNNING"'; }
wait_for 60 "connector $ID RUNNING" running || die "connector not running: $(curl -s "$KSTRETCH_CONNECT_URL/connectors/$ID/status")"
got=$(kafka org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server "$KSTRETCH_KAFKA_BOOTSTRAP" \
  --topic "$ID" --from-beginning --max-messages 1 --timeout-ms 30000 2>/dev/null || true)
[[ $got == *"hello-$ID"* ]] || die "record from FileStreamSource not in topic $ID (got: $got)"
ok "Connect: FileStreamSource connector copied a line into topic $ID"
curl -sf -X DELETE "$KSTRETCH_CONNECT_URL/connectors/$ID" >/dev/null
kafka org.apache.kafka.tools.TopicCommand --bootstrap-server "$KSTRETCH_KAFKA_BOOTSTRAP" --delete --topic "$ID" >/dev/null
rm -f "$src"

echo "smoke: $pass passed, 0 failed in $((SECONDS - T0))s"
