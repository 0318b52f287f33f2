# shellcheck shell=bash disable=SC2034
# tests/env/versions.sh — owns: the pinned versions, ports and default paths of the
# kstretch test environment. Sourced by install.sh, up.sh, down.sh and status.sh;
# every other script takes its versions from here and nowhere else.

KSTRETCH_K8S_VERSION=v1.36.3      # k8s.io/kubernetes; staging modules pinned to v0.36.3
KSTRETCH_ETCD_VERSION=v3.6.16     # go.etcd.io/etcd/server/v3
KSTRETCH_KWOK_VERSION=v0.8.0      # sigs.k8s.io/kwok
KSTRETCH_HELM_VERSION=v4.3.1      # helm.sh/helm/v4
KSTRETCH_KAFKA_VERSION=4.1.2      # org.apache.kafka (Maven Central), see kafka/pom.xml
KSTRETCH_KAFKA_NEXT_VERSION=4.3.1 # the version Kafka upgrades are tested to (its image only)
KSTRETCH_LOCAL_PATH_VERSION=v0.0.30  # github.com/rancher/local-path-provisioner (real nodes' claims)
KSTRETCH_METALLB_VERSION=v0.15.2     # go.universe.tf/metallb (real nodes' LoadBalancer Services)
KSTRETCH_PROMETHEUS_VERSION=v0.316.0 # github.com/prometheus/prometheus (scrapes the real pods)

KSTRETCH_CACHE=${KSTRETCH_CACHE:-$HOME/.cache/kstretch}
KSTRETCH_STATE_DIR=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
KSTRETCH_CLUSTERS=${KSTRETCH_CLUSTERS:-alpha beta}
# Clusters that get a second, spare real node (cordoned until a test moves a pod onto it).
KSTRETCH_SPARE_NODES=${KSTRETCH_SPARE_NODES-alpha}

# Ports (everything binds 127.0.0.1 only). Cluster i (0-based) of KSTRETCH_CLUSTERS
# gets BASE+i for each of its components.
KSTRETCH_ETCD_CLIENT_PORT=12379
KSTRETCH_ETCD_PEER_PORT=12380
KSTRETCH_APISERVER_BASE_PORT=16443   # kube-apiserver (https)
KSTRETCH_KCM_BASE_PORT=17000         # kube-controller-manager secure port (healthz)
KSTRETCH_SCHED_BASE_PORT=17100       # kube-scheduler secure port (healthz)
KSTRETCH_KWOK_BASE_PORT=17200        # kwok server (healthz, fake kubelet port)
KSTRETCH_KAFKA_BASE_PORT=19090       # Kafka node n -> 19090+n (0 = controller, 1..3 brokers)
KSTRETCH_CONNECT_PORT=18083          # Kafka Connect REST
KSTRETCH_PROMETHEUS_PORT=19191       # Prometheus, scraping the real nodes' pods
# The second, independent Kafka cluster: one combined node with delete.topic.enable=false.
KSTRETCH_KAFKA_NODELETE_PORT=19095             # its broker listener (PLAINTEXT)
KSTRETCH_KAFKA_NODELETE_CONTROLLER_PORT=19096  # its controller listener

export KSTRETCH_K8S_VERSION KSTRETCH_ETCD_VERSION KSTRETCH_KWOK_VERSION \
  KSTRETCH_HELM_VERSION KSTRETCH_KAFKA_VERSION KSTRETCH_KAFKA_NEXT_VERSION \
  KSTRETCH_LOCAL_PATH_VERSION KSTRETCH_METALLB_VERSION KSTRETCH_PROMETHEUS_VERSION KSTRETCH_CACHE KSTRETCH_STATE_DIR KSTRETCH_CLUSTERS \
  KSTRETCH_SPARE_NODES

# Real nodes (one per cluster, beside the kwok nodes): the sandbox image containerd uses.
KSTRETCH_PAUSE_IMAGE=registry.k8s.io/pause:3.10
# MetalLB's controller and speaker, in one locally built image.
KSTRETCH_METALLB_IMAGE=kstretch.test/metallb:$KSTRETCH_METALLB_VERSION
# image_hash DIR — the version of the images built from DIR (tests/env/image): a hash of its files.
image_hash() { (cd "$1" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12); }
