#!/usr/bin/env bash
# tests/env/nodes.sh — owns: the real nodes of each simulated cluster (beside its kwok nodes):
# a network namespace per node that plays the node's host, with containerd, kubelet and
# kube-proxy in it, the local images imported, and everything they leave behind removed again.
#   nodes.sh up     start or keep every real node, wait until each Node is Ready
#   nodes.sh down   stop them and remove their containers, mounts, cgroups, network
#                   namespaces and host settings (also of nodes whose processes died)
#   nodes.sh lose C   stop cluster C's nodes alone, as if its machines were gone (lose.sh);
#                   their volumes stay, so up.sh brings its pods back on their old data
#   nodes.sh leftovers   print what a real node left on the machine (nothing when clean)
#   nodes.sh import ARCHIVE...   import OCI image archives into every running node
# Run by up.sh and down.sh (which hold the environment lock); not alone while they run.
#
# Layout of cluster i (0-based) named C, node "C-real-0":
#   netns kstretch-C with eth0 10.250.i.2/24, its host end ksv<i> 10.250.i.1/24; pods on
#   bridge cni0 in 10.(110+i).0.0/24, masqueraded to the node's address when they leave.
#   The apiserver (on host loopback) is reached at 10.250.i.1:<its port> through a socat
#   relay; kubelet and kube-proxy verify its certificate under the name "localhost".
#   A NodePort of the cluster is reached at 10.250.i.2:<node port> from the host, from the
#   other nodes and from pods of every cluster, the way two clusters' nodes reach each other.
#   Claims of StorageClass local-path (local-path-provisioner, one per cluster, on the host)
#   are directories under $STATE/nodes/C/volumes, kept across pods, removed with the claim.
#   Taint kstretch.test/real-node=true:NoSchedule, labels kstretch.test/node=real and
#   kstretch.test/cluster=C: only pods that ask for a real node land there.
#   LoadBalancer Services get an address in 10.250.i.200-239 from MetalLB (layer 2 mode, its
#   controller and speaker pods on the real node): the speaker answers ARP for it on eth0 and
#   kube-proxy forwards it, so the host, other clusters' nodes and pods reach it, as a cloud's.
# The spare node "C-real-1" of a cluster in KSTRETCH_SPARE_NODES (a pod moved to another node
# of its cluster lands there): netns kstretch-C-1, eth0 10.251.i.2/24, host end ksv<i>-1
# 10.251.i.1/24, pods in 10.(110+i).1.0/24; the node reaches the apiserver's relay through
# the host. Labelled like C-real-0 (zone C-zone-spare), also tainted
# kstretch.test/spare-node=true:NoSchedule and kept cordoned: only a test that uncordons it
# places pods there, and only pods that tolerate both taints. The host forwards between the
# pods of one cluster's nodes, as the cluster's network does.
set -euo pipefail
LOG_TAG=nodes
# shellcheck source=lib.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh"

NODE_BIN_DIR=$CACHE/k8s-node-$KSTRETCH_K8S_VERSION
LOCAL_PATH_BIN=$CACHE/local-path-$KSTRETCH_LOCAL_PATH_VERSION/local-path-provisioner
IMAGE_HASH=$(image_hash "$ENV_DIR/image")
METALLB_CRDS=$CACHE/metallb-$KSTRETCH_METALLB_VERSION/crds.yaml
IMAGE_DIRS=("$CACHE/pause-image-$IMAGE_HASH" "$CACHE/kafka-image-$KSTRETCH_KAFKA_VERSION-$IMAGE_HASH"
  "$CACHE/metallb-image-$KSTRETCH_METALLB_VERSION-$IMAGE_HASH"
  "$CACHE/kafka-image-$KSTRETCH_KAFKA_NEXT_VERSION-$IMAGE_HASH")
# A spare node runs no MetalLB and no upgrade: the pause and Kafka images are enough.
SPARE_IMAGES=2
FORWARD_SAVED=$STATE/nodes/ip_forward.before
ISOLATION=kstretch-test-pods

ctr_node() { ctr --address "$(node_dir "$CUR_C" "$CUR_J")/containerd.sock" --namespace k8s.io "$@"; }
# The current node's name for its processes and logs: C (node 0) or C-J.
node_key() { printf '%s%s' "$CUR_C" "$(node_suffix "$CUR_J")"; }

# for_nodes FUNCTION [C] — FUNCTION for every real node (of cluster C only, if given), with
# CUR_C, CUR_I, CUR_J and NODE_DIR set.
for_nodes() {
  local i j
  for i in "${!CLUSTERS[@]}"; do
    [[ -z ${2:-} || ${CLUSTERS[$i]} == "$2" ]] || continue
    for j in $(node_indexes "${CLUSTERS[$i]}"); do
      CUR_C=${CLUSTERS[$i]} CUR_I=$i CUR_J=$j NODE_DIR=$(node_dir "${CLUSTERS[$i]}" "$j")
      "$1"
    done
  done
}

# ------------------------------------------------------------------ certificates & configs
# cert NAME CN O — a client certificate of the cluster's CA, for this node's components.
cert() {
  local dir=$NODE_DIR/pki name=$1 cn=$2 o=$3 pki=$STATE/$CUR_C/pki
  [[ -s $dir/$name.crt && -s $dir/$name.key ]] && return 0
  mkdir -p "$dir"
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$dir/$name.key" -out "$dir/$name.csr" \
    -subj "/O=$o/CN=$cn" 2>/dev/null
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=clientAuth" >"$dir/$name.ext"
  openssl x509 -req -sha256 -days 3650 -in "$dir/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
    -CAcreateserial -CAserial "$dir/ca.srl" -extfile "$dir/$name.ext" -out "$dir/$name.crt" 2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
  chmod 600 "$dir/$name.key"
}

# kubeconfig NAME — a kubeconfig for the component with certificate NAME, through the relay.
kubeconfig() {
  local name=$1
  cat >"$NODE_DIR/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $CUR_C
  cluster:
    server: https://$(host_ip "$CUR_I"):$(apiserver_port "$CUR_I")
    tls-server-name: localhost
    certificate-authority: $STATE/$CUR_C/pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $NODE_DIR/pki/$name.crt
    client-key: $NODE_DIR/pki/$name.key
contexts:
- name: $CUR_C
  context: {cluster: $CUR_C, user: $name}
current-context: $CUR_C
EOF
}

# The local-path provisioner's directories: each node of the cluster its own.
path_map() {
  local j sep=""
  for j in $(node_indexes "$CUR_C"); do
    printf '%s{"node": "%s", "paths": ["%s/volumes"]}' "$sep" "$(node_name "$CUR_C" "$j")" "$(node_dir "$CUR_C" "$j")"
    sep=", "
  done
}

write_node_files() {
  local node
  node=$(node_name "$CUR_C" "$CUR_J")
  mkdir -p "$NODE_DIR"/{cni,cni-ipam,containerd,kubelet,pod-logs,volume-plugins}
  cert kubelet "system:node:$node" system:nodes
  cert kube-proxy system:kube-proxy system:node-proxier
  kubeconfig kubelet
  kubeconfig kube-proxy
  cat >"$NODE_DIR/containerd.toml" <<EOF
# generated by tests/env/nodes.sh (defaults for everything not named)
version = 2
root = "$NODE_DIR/containerd/root"
state = "$NODE_DIR/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.internal.v1.opt", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$NODE_DIR/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  # Without CAP_SYS_RESOURCE, runc cannot lower oom_score_adj: every sandbox would fail.
  restrict_oom_score_adj = true
  sandbox_image = "$KSTRETCH_PAUSE_IMAGE"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$NODE_DIR/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
EOF
  cat >"$NODE_DIR/cni/10-bridge.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "kstretch-$CUR_C", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$NODE_DIR/cni-ipam",
            "ranges": [[{"subnet": "$(pod_cidr "$CUR_I" "$CUR_J")"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  # Pods have no cluster DNS here, and the machine's resolver is out of their reach: each
  # lookup would wait 10 s for it. A broker's SASL listener looks its peers' addresses up, so a
  # SCRAM client in a pod timed out before its first answer. A resolver at the node's own
  # address answers at once that nothing is there, as a cluster's DNS answers that no name is.
  cat >"$NODE_DIR/resolv.conf" <<EOF
# generated by tests/env/nodes.sh
nameserver $(node_ip "$CUR_I" "$CUR_J")
options timeout:1 attempts:1
EOF
  cat >"$NODE_DIR/kubelet.yaml" <<EOF
# generated by tests/env/nodes.sh
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$NODE_DIR/containerd.sock
imageServiceEndpoint: unix://$NODE_DIR/containerd.sock
address: $(node_ip "$CUR_I" "$CUR_J")
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $STATE/$CUR_C/pki/ca.crt}
authorization: {mode: AlwaysAllow}
# The machine mounts cgroup v1 and has no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$(cgroup_root "$CUR_C" "$CUR_J")
failSwapOn: false
podLogsDir: $NODE_DIR/pod-logs
volumePluginDir: $NODE_DIR/volume-plugins
resolvConf: $NODE_DIR/resolv.conf
clusterDomain: cluster.local
maxPods: 40
# Pods are synced (and their ConfigMap volumes refreshed) every 15 s rather than a minute, so
# that a logging change reaches a running broker within a test's patience.
syncFrequency: 15s
serializeImagePulls: false
# Images cannot be pulled again (no registry): never collect them; the disk is shared with
# the whole machine, so evict only when it is really full.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
EOF
  # Claims of StorageClass local-path: a directory per volume under the node's volumes/,
  # made and removed by a helper pod of the Kafka image (it has sh, mkdir and rm) as root.
  cat >"$NODE_DIR/local-path.yaml" <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: local-path-storage}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-path}
provisioner: rancher.io/local-path
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Delete
---
apiVersion: v1
kind: ConfigMap
metadata: {name: local-path-config, namespace: local-path-storage}
data:
  config.json: '{"nodePathMap": [$(path_map)]}'
  setup: |-
    #!/bin/sh
    set -eu
    mkdir -m 0777 -p "\$VOL_DIR"
  teardown: |-
    #!/bin/sh
    set -eu
    rm -rf "\$VOL_DIR"
  helperPod.yaml: |-
    apiVersion: v1
    kind: Pod
    metadata: {name: helper-pod}
    spec:
      securityContext: {runAsUser: 0}
      containers:
      - name: helper-pod
        image: docker.io/apache/kafka:$KSTRETCH_KAFKA_VERSION
        imagePullPolicy: IfNotPresent
EOF
  mkdir -p "$NODE_DIR/volumes"
  # In-cluster clients (pods that use their ServiceAccount, e.g. kstretch's own charts) reach
  # the apiserver at the `kubernetes` Service, 10.96.0.1:443. The apiserver listens on host
  # loopback and manages no endpoints of its own (--endpoint-reconciler-type=none): its
  # endpoint is the relay at the node's host end.
  cat >"$NODE_DIR/apiserver-endpoints.yaml" <<EOF
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
    endpointslice.kubernetes.io/managed-by: kstretch-test-env
addressType: IPv4
endpoints:
- addresses: ["$(host_ip "$CUR_I")"]
  conditions: {ready: true}
ports:
- {name: https, port: $(apiserver_port "$CUR_I"), protocol: TCP}
EOF
  cat >"$NODE_DIR/kube-proxy.yaml" <<EOF
# generated by tests/env/nodes.sh
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $node
clusterCIDR: $(pod_cidr "$CUR_I" "$CUR_J")
clientConnection: {kubeconfig: $NODE_DIR/kube-proxy.kubeconfig}
bindAddress: $(node_ip "$CUR_I" "$CUR_J")
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the machine-wide conntrack table size alone.
conntrack: {maxPerCore: 0}
EOF
}

# MetalLB as its own manifests deploy it (a controller Deployment, a speaker per node with the
# node's network), trimmed to layer 2 without memberlist or webhooks, and kept on the real node.
write_metallb_files() {
  local net
  net=$(node_ip "$CUR_I")
  net=${net%.*}
  cat >"$NODE_DIR/metallb.yaml" <<EOF
# generated by tests/env/nodes.sh
apiVersion: v1
kind: Namespace
metadata: {name: metallb-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: controller, namespace: metallb-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: speaker, namespace: metallb-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "metallb-system:controller"}
rules:
- {apiGroups: [""], resources: [services, namespaces, nodes, secrets, configmaps], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [services/status], verbs: [update]}
- {apiGroups: [""], resources: [events], verbs: [create, patch]}
- {apiGroups: [apps], resources: [deployments], verbs: [get]}
- {apiGroups: [metallb.io], resources: ["*"], verbs: [get, list, watch]}
- {apiGroups: [metallb.io], resources: [ipaddresspools/status], verbs: [update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "metallb-system:speaker"}
rules:
- {apiGroups: [""], resources: [services, endpoints, nodes, namespaces, pods, secrets, configmaps], verbs: [get, list, watch]}
- {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [get, list, watch]}
- {apiGroups: [""], resources: [events], verbs: [create, patch]}
- {apiGroups: [metallb.io], resources: ["*"], verbs: [get, list, watch]}
- {apiGroups: [metallb.io], resources: [servicel2statuses, servicel2statuses/status, servicebgpstatuses, servicebgpstatuses/status], verbs: ["*"]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "metallb-system:controller"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "metallb-system:controller"}
subjects: [{kind: ServiceAccount, name: controller, namespace: metallb-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "metallb-system:speaker"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "metallb-system:speaker"}
subjects: [{kind: ServiceAccount, name: speaker, namespace: metallb-system}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: controller, namespace: metallb-system}
spec:
  selector: {matchLabels: {app: metallb, component: controller}}
  template:
    metadata: {labels: {app: metallb, component: controller}}
    spec:
      serviceAccountName: controller
      nodeSelector: {kstretch.test/node: real}
      tolerations: [{key: kstretch.test/real-node, operator: Exists}]
      terminationGracePeriodSeconds: 0
      containers:
      - name: controller
        image: $KSTRETCH_METALLB_IMAGE
        imagePullPolicy: Never
        command: [/controller, --port=7472, --webhook-mode=disabled, --disable-cert-rotation]
        env: [{name: METALLB_NAMESPACE, value: metallb-system}]
        readinessProbe: {httpGet: {path: /metrics, port: 7472}}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: speaker, namespace: metallb-system}
spec:
  selector: {matchLabels: {app: metallb, component: speaker}}
  template:
    metadata: {labels: {app: metallb, component: speaker}}
    spec:
      serviceAccountName: speaker
      hostNetwork: true
      nodeSelector: {kstretch.test/node: real}
      tolerations: [{key: kstretch.test/real-node, operator: Exists}]
      terminationGracePeriodSeconds: 0
      containers:
      - name: speaker
        image: $KSTRETCH_METALLB_IMAGE
        imagePullPolicy: Never
        command: [/speaker, --port=7472]
        env:
        - {name: METALLB_NAMESPACE, value: metallb-system}
        - {name: METALLB_NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}
        - {name: METALLB_POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: METALLB_HOST, valueFrom: {fieldRef: {fieldPath: status.hostIP}}}
        securityContext: {capabilities: {add: [NET_RAW]}}
        readinessProbe: {httpGet: {path: /metrics, port: 7472}}
EOF
  cat >"$NODE_DIR/metallb-pool.yaml" <<EOF
# generated by tests/env/nodes.sh
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: kstretch-test, namespace: metallb-system}
spec:
  addresses: [$net.200-$net.239]
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: kstretch-test, namespace: metallb-system}
spec:
  ipAddressPools: [kstretch-test]
  # Only the real node 0 runs a speaker (a spare node is tainted for it): without memberlist,
  # MetalLB elects among the nodes it is told may announce.
  nodeSelectors: [{matchLabels: {kubernetes.io/hostname: $(node_name "$CUR_C")}}]
EOF
}

# ------------------------------------------------------------------ host side
make_cgroups() {
  local ctrl root
  root=$(cgroup_root "$CUR_C" "$CUR_J")
  for ctrl in /sys/fs/cgroup/*/; do
    [[ -f $ctrl/cgroup.procs && ! -f $ctrl/cgroup.controllers ]] || continue # v1 only
    mkdir -p "$ctrl$root"
    if [[ -f $ctrl/cpuset.cpus ]]; then
      [[ -n $(<"$ctrl$root/cpuset.cpus") ]] || cat "$ctrl/cpuset.cpus" >"$ctrl$root/cpuset.cpus"
      [[ -n $(<"$ctrl$root/cpuset.mems") ]] || cat "$ctrl/cpuset.mems" >"$ctrl$root/cpuset.mems"
    fi
  done
}

# The host ends of a node's veth pair: ksv<i> and ksn<i> (node 0), ksv<i>-J and ksn<i>-J.
veth_host() { printf 'ksv%s%s' "$CUR_I" "$(node_suffix "$CUR_J")"; }
veth_node() { printf 'ksn%s%s' "$CUR_I" "$(node_suffix "$CUR_J")"; }

# forward RULE... — an iptables FORWARD rule of the isolation, inserted once.
forward() {
  iptables -C FORWARD "$@" -m comment --comment "$ISOLATION" 2>/dev/null ||
    iptables -I FORWARD "$@" -m comment --comment "$ISOLATION"
}

make_network() {
  local ns hv nv k
  ns=$(netns "$CUR_C" "$CUR_J") hv=$(veth_host) nv=$(veth_node)
  if [[ ! -e /run/netns/$ns ]]; then
    ip netns add "$ns"
  fi
  if ! ip link show "$hv" >/dev/null 2>&1; then
    in_node ip link del eth0 2>/dev/null || true
    ip link add "$hv" type veth peer name "$nv"
    ip link set "$nv" netns "$ns"
    in_node ip link set "$nv" name eth0
  fi
  ip addr replace "$(host_ip "$CUR_I" "$CUR_J")/24" dev "$hv"
  ip link set "$hv" up
  in_node ip link set lo up
  in_node ip addr replace "$(node_ip "$CUR_I" "$CUR_J")/24" dev eth0
  in_node ip link set eth0 up
  in_node ip route replace default via "$(host_ip "$CUR_I" "$CUR_J")"
  in_node sysctl -qw net.ipv4.ip_forward=1
  # The host reaches the cluster's pods (Prometheus scrapes them); other clusters' nodes and
  # pods do not: the host forwards nothing to them, only between one cluster's nodes.
  ip route replace "$(pod_cidr "$CUR_I" "$CUR_J")" via "$(node_ip "$CUR_I" "$CUR_J")" dev "$hv"
  # Each node lets the cluster's other nodes through to its pods, above its own DROP.
  forward -d "$(pod_cidr "$CUR_I" "$CUR_J")" -j DROP
  for k in $(node_indexes "$CUR_C"); do
    ((k == CUR_J)) && continue
    forward -s "$(node_ip "$CUR_I" "$k")" -d "$(pod_cidr "$CUR_I" "$CUR_J")" -j ACCEPT
    forward -s "$(pod_cidr "$CUR_I" "$k")" -d "$(pod_cidr "$CUR_I" "$CUR_J")" -j ACCEPT
  done
  # Nodes of different clusters reach each other through the host.
  mkdir -p "$STATE/nodes"
  [[ -s $FORWARD_SAVED ]] || cat /proc/sys/net/ipv4/ip_forward >"$FORWARD_SAVED"
  sysctl -qw net.ipv4.ip_forward=1
}

# The isolation's FORWARD rules that name the current node's pods or address, as -A lines.
node_forward_rules() {
  iptables -S FORWARD 2>/dev/null | grep -- "$ISOLATION" |
    grep -E -- "(-d|-s) ($(pod_cidr "$CUR_I" "$CUR_J")|$(node_ip "$CUR_I" "$CUR_J")/32) " || true
}

# ------------------------------------------------------------------ processes
apiproxy_start() {
  start_proc "$CUR_C-apiproxy" socat -lf "$LOG_DIR/$CUR_C-apiproxy.socat.log" \
    "TCP-LISTEN:$(apiserver_port "$CUR_I"),bind=$(host_ip "$CUR_I"),reuseaddr,fork" \
    "TCP:127.0.0.1:$(apiserver_port "$CUR_I")"
}
containerd_start() {
  start_proc "$(node_key)-containerd" nsenter --net="/run/netns/$(netns "$CUR_C" "$CUR_J")" \
    containerd --config "$NODE_DIR/containerd.toml"
}
kubelet_start() {
  local labels="kstretch.test/node=real,kstretch.test/cluster=$CUR_C"
  local zone=$CUR_C-zone-real taints="kstretch.test/real-node=true:NoSchedule"
  if ((CUR_J > 0)); then
    labels+=",kstretch.test/spare=true" zone=$CUR_C-zone-spare
    taints+=",kstretch.test/spare-node=true:NoSchedule"
  fi
  start_proc "$(node_key)-kubelet" nsenter --net="/run/netns/$(netns "$CUR_C" "$CUR_J")" \
    "$NODE_BIN_DIR/kubelet" --config "$NODE_DIR/kubelet.yaml" \
    --kubeconfig "$NODE_DIR/kubelet.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
    --hostname-override "$(node_name "$CUR_C" "$CUR_J")" --node-ip "$(node_ip "$CUR_I" "$CUR_J")" \
    --node-labels "$labels,topology.kubernetes.io/zone=$zone,topology.kubernetes.io/region=$CUR_C" \
    --register-with-taints "$taints"
}
local_path_start() {
  start_proc "$CUR_C-local-path" "$LOCAL_PATH_BIN" start \
    --kubeconfig "$STATE/$CUR_C/kubeconfig" --namespace local-path-storage \
    --provisioner-name rancher.io/local-path --service-account-name default \
    --helper-image "docker.io/apache/kafka:$KSTRETCH_KAFKA_VERSION"
}
kube_proxy_start() {
  start_proc "$(node_key)-kube-proxy" nsenter --net="/run/netns/$(netns "$CUR_C" "$CUR_J")" \
    "$NODE_BIN_DIR/kube-proxy" --config "$NODE_DIR/kube-proxy.yaml"
}

# keep NAME CHECK START MARKER... — keep a live, healthy NAME, else (re)start it.
keep() {
  local name=$1 check=$2 start=$3 pid
  shift 3
  if pid=$(live_pid "$name" "$@") && wait_proc_healthy "$name" 10 "$check"; then
    log "kept $name (pid $pid)"
    return 0
  fi
  stop_proc "$name"
  "$start"
}
await_healthy() {
  local name=$1 timeout=$2 check=$3 rc=0
  wait_proc_healthy "$name" "$timeout" "$check" || rc=$?
  ((rc == 0)) && return 0
  tail_log "$name"
  die "$name did not become healthy in ${timeout}s (log: $LOG_DIR/$name.log)"
}

import_images() {
  local dir name digest dirs=("${IMAGE_DIRS[@]}")
  ((CUR_J == 0)) || dirs=("${IMAGE_DIRS[@]:0:SPARE_IMAGES}")
  for dir in "${dirs[@]}"; do
    [[ -s $dir/index.json ]] || die "image $dir is missing: run tests/env/install.sh images"
    name=$(sed -n 's/.*"io.containerd.image.name": "\([^"]*\)".*/\1/p' "$dir/index.json")
    digest=$(sed -n 's/.*"digest": "\(sha256:[0-9a-f]*\)".*/\1/p' "$dir/index.json")
    # Kept when the node has this name at this digest.
    [[ $(ctr_node images ls "name==$name" | awk 'NR==2 {print $3}') == "$digest" ]] && continue
    log "importing $name into $(node_name "$CUR_C" "$CUR_J")"
    tar -C "$dir" -cf - . | ctr_node images import - >/dev/null
  done
}

# import_archives FILE... — OCI image archives (e.g. scripts/build-images.sh's) into every node.
import_archives() {
  local file
  for file in "$@"; do [[ -s $file ]] || die "no image archive $file"; done
  ARCHIVES=("$@")
  for_nodes import_archives_into_node
}
import_archives_into_node() {
  local file
  containerd_check || die "$(node_key)-containerd is not running: run tests/env/up.sh"
  for file in "${ARCHIVES[@]}"; do
    ctr_node images import "$file" >/dev/null ||
      die "$(node_name "$CUR_C" "$CUR_J") could not import $file"
    log "imported $file into $(node_name "$CUR_C" "$CUR_J")"
  done
}

metallb_apply() {
  local kc=("$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig")
  [[ -s $METALLB_CRDS ]] || die "MetalLB's CRDs are missing: run tests/env/install.sh metallb"
  write_metallb_files
  "${kc[@]}" apply --server-side --force-conflicts -f "$METALLB_CRDS" >/dev/null
  "${kc[@]}" wait --for condition=Established --timeout 30s -f "$METALLB_CRDS" >/dev/null
  "${kc[@]}" apply -f "$NODE_DIR/metallb.yaml" -f "$NODE_DIR/metallb-pool.yaml" >/dev/null
}
metallb_ready() {
  "$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig" -n metallb-system get pods \
    -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' |
    awk '$2 == "True" {n++} END {exit n < 2}'
}

node_ready() {
  "$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig" get node "$(node_name "$CUR_C" "$CUR_J")" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}' |
    tee /dev/stderr | grep -q '^True'
}

# node_up — the current node's files, network and processes started or kept; the cluster's
# relay, local-path provisioner and MetalLB with its node 0.
node_up() {
  local key
  key=$(node_key)
  write_node_files
  make_cgroups
  make_network
  if ((CUR_J == 0)); then
    keep "$CUR_C-apiproxy" apiproxy_check apiproxy_start "$LOG_DIR/$CUR_C-apiproxy.socat.log"
    await_healthy "$CUR_C-apiproxy" 10 apiproxy_check
  fi
  keep "$key-containerd" containerd_check containerd_start "$NODE_DIR/containerd.toml"
  await_healthy "$key-containerd" 30 containerd_check
  import_images
  keep "$key-kubelet" kubelet_check kubelet_start "$NODE_DIR/kubelet.yaml"
  keep "$key-kube-proxy" kube_proxy_check kube_proxy_start "$NODE_DIR/kube-proxy.yaml"
  ((CUR_J == 0)) || return 0
  "$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig" apply -f "$NODE_DIR/local-path.yaml" \
    -f "$NODE_DIR/apiserver-endpoints.yaml" >/dev/null
  metallb_apply
  keep "$CUR_C-local-path" local_path_check local_path_start "$LOCAL_PATH_BIN"
}

# node_await — the current node Ready (a spare one cordoned), MetalLB Ready with node 0.
node_await() {
  local key kc=("$KUBECTL" --kubeconfig "$STATE/$CUR_C/kubeconfig")
  key=$(node_key)
  await_healthy "$key-kubelet" 60 kubelet_check
  await_healthy "$key-kube-proxy" 60 kube_proxy_check
  wait_for 90 "node $(node_name "$CUR_C" "$CUR_J") to be Ready" node_ready ||
    { tail_log "$key-kubelet"; die "$(node_name "$CUR_C" "$CUR_J") is not Ready"; }
  if ((CUR_J > 0)); then
    "${kc[@]}" cordon "$(node_name "$CUR_C" "$CUR_J")" >/dev/null
    return 0
  fi
  wait_for 60 "MetalLB's controller and speaker in $CUR_C to be Ready" metallb_ready ||
    die "MetalLB in $CUR_C is not Ready: ${kc[*]} -n metallb-system describe pods"
}

nodes_up() {
  for_nodes node_up
  for_nodes node_await
}

# ------------------------------------------------------------------ teardown
# Anything a real node leaves on the machine, one line each (nothing when clean).
leftovers() { for_nodes node_leftovers; }
node_leftovers() {
  local root ctrl
  root=$(cgroup_root "$CUR_C" "$CUR_J")
  [[ -e /run/netns/$(netns "$CUR_C" "$CUR_J") ]] && echo "network namespace $(netns "$CUR_C" "$CUR_J")"
  ip link show "$(veth_host)" >/dev/null 2>&1 && echo "network device $(veth_host)"
  node_forward_rules | sed 's/^-A /iptables rule /'
  for ctrl in /sys/fs/cgroup/*/; do [[ -d $ctrl$root ]] && echo "cgroup $ctrl$root"; done
  mounts_under "$NODE_DIR" | sed 's/^/mount /'
  { pgrep -f -- "-address $NODE_DIR/containerd.sock" || true; } | sed "s/^/container shim pid /"
  return 0
}

# Processes of the node's pods: everything in its cgroup tree (any v1 controller has it all).
pod_pids() {
  local root
  root=$(cgroup_root "$CUR_C" "$CUR_J")
  [[ -d /sys/fs/cgroup/pids/$root ]] || return 0
  find "/sys/fs/cgroup/pids/$root" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u
}

# The pods' network namespaces (bind mounts under /run/netns, made by containerd), told
# apart from anyone else's by the namespace inode of the pods' processes.
pod_netns_files() {
  local p ino f inodes=" "
  for p in "$@"; do
    ino=$(stat -L -c %i "/proc/$p/ns/net" 2>/dev/null) && inodes+="$ino "
  done
  for f in /run/netns/cni-*; do
    [[ -e $f ]] || continue
    ino=$(stat -L -c %i "$f" 2>/dev/null) || continue
    [[ $inodes == *" $ino "* ]] && printf '%s\n' "$f"
  done
}

# Mount points under DIR, deepest first.
mounts_under() {
  awk -v d="$1/" '{ if (index($5 "/", d) == 1) print $5 }' /proc/self/mountinfo | sort -r | uniq
}

remove_cgroups() {
  local root ctrl
  root=$(cgroup_root "$CUR_C" "$CUR_J")
  for ctrl in /sys/fs/cgroup/*/; do
    [[ -d $ctrl$root ]] || continue
    find "$ctrl$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    [[ ! -d $ctrl$root ]] || log "WARNING: cgroup $ctrl$root is still there"
  done
}

node_down() {
  local ns key pids shims netns_files m p rule
  ns=$(netns "$CUR_C" "$CUR_J") key=$(node_key)
  ((CUR_J > 0)) || stop_proc "$CUR_C-local-path"
  stop_proc "$key-kube-proxy"
  stop_proc "$key-kubelet"
  mapfile -t pids < <(pod_pids)
  mapfile -t netns_files < <(pod_netns_files "${pids[@]}")
  ((${#pids[@]} == 0)) || kill -KILL "${pids[@]}" 2>/dev/null || true
  mapfile -t shims < <(pgrep -f -- "containerd-shim-runc-v2 .*-address $NODE_DIR/containerd.sock" || true)
  ((${#shims[@]} == 0)) || kill -KILL "${shims[@]}" 2>/dev/null || true
  stop_proc "$key-containerd"
  ((CUR_J > 0)) || stop_proc "$CUR_C-apiproxy"
  # A killed JVM takes a while to hand back its memory on a busy machine.
  for _ in $(seq 1 300); do
    [[ -z $(pod_pids) ]] && break
    sleep 0.1
  done
  for m in "${netns_files[@]}"; do umount "$m" 2>/dev/null || true; rm -f "$m"; done
  for _ in 1 2 3; do
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done < <(mounts_under "$NODE_DIR")
  done
  remove_cgroups
  while read -r rule; do
    [[ -n $rule ]] || continue
    read -r -a rule <<<"${rule/#-A /-D }"
    iptables "${rule[@]//\"/}" 2>/dev/null || true
  done < <(node_forward_rules)
  ip link del "$(veth_host)" 2>/dev/null || true
  if [[ -e /run/netns/$ns ]]; then ip netns del "$ns"; fi
  rm -f /var/lib/cni/results/"kstretch-$CUR_C"-* 2>/dev/null || true
  mapfile -t pids < <(pod_pids)
  ((${#pids[@]} == 0)) || log "WARNING: pod processes still there: ${pids[*]}"
  return 0
}

nodes_down() {
  for_nodes node_down
  if [[ -s $FORWARD_SAVED ]]; then
    sysctl -qw net.ipv4.ip_forward="$(<"$FORWARD_SAVED")"
    rm -f "$FORWARD_SAVED"
  fi
}

# The nodes of cluster $1 down; the others, and the host's settings, stay.
lose_node() {
  [[ " ${CLUSTERS[*]} " == *" $1 "* ]] || die "no cluster $1 in KSTRETCH_CLUSTERS (${CLUSTERS[*]})"
  for_nodes node_down "$1"
}

case ${1:-} in
  up) nodes_up ;;
  lose) lose_node "${2:?usage: nodes.sh lose CLUSTER}" ;;
  down) nodes_down ;;
  leftovers) leftovers ;;
  import) shift && import_archives "$@" ;;
  *) die "usage: nodes.sh up|down|lose CLUSTER|leftovers|import ARCHIVE..." ;;
esac
