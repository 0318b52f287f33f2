#!/usr/bin/env bash
# tests/env/install.sh — owns: building/fetching every binary of the kstretch test
# environment into the versioned cache ${KSTRETCH_CACHE:-$HOME/.cache/kstretch}:
#   k8s-<v>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   k8s-node-<v>/{kubelet,kube-proxy}   pause-image-*/ debian-jre-*/ kafka-image-*/ (see images)
#   etcd-<v>/etcd   kwok-<v>/{kwok,stages/*.yaml}   helm-<v>/helm   kafka-<v>/libs/*.jar
#   local-path-<v>/local-path-provisioner   metallb-<v>/{controller,speaker,crds.yaml}
#   prometheus-<v>/prometheus, promtool
# A component is rebuilt only when its final files are missing. Each one is built in a
# temporary directory inside the cache and moved into place with one rename, so an
# interrupted build never leaves a half-filled versioned directory behind.
# Usage: install.sh [k8s|k8s-node|etcd|kwok|helm|local-path|metallb|prometheus|kafka|images ...]   (no argument = all)
set -euo pipefail

ENV_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=versions.sh
. "$ENV_DIR/versions.sh"

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
CACHE=$KSTRETCH_CACHE
mkdir -p "$CACHE"

log() { printf '[install %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# have DIR FILE... — true when every FILE exists (non-empty) under DIR.
have() {
  local dir=$1 f
  shift
  for f in "$@"; do [[ -s $dir/$f ]] || return 1; done
}

# tmpdir NAME — a fresh scratch dir inside the cache (same filesystem => atomic mv).
tmpdir() { mktemp -d "$CACHE/.tmp-$1.XXXXXX"; }

# publish TMP/OUT FINAL — atomically move a finished directory into place.
publish() {
  local src=$1 dst=$2
  rm -rf "$dst.old"
  [[ -e $dst ]] && mv "$dst" "$dst.old"
  mv "$src" "$dst"
  rm -rf "$dst.old"
}

# Remove scratch dirs of builds that died (older than a day or not owned by a live pid
# is hard to know; we only remove those older than 1 day to stay safe with parallel runs).
find "$CACHE" -maxdepth 1 -name '.tmp-*' -mmin +1440 -exec rm -rf {} + 2>/dev/null || true

timed() {
  local name=$1 start
  shift
  start=$(date +%s)
  "$@"
  log "built $name in $(($(date +%s) - start))s"
}

# ---------------------------------------------------------------- kubernetes
K8S_DIR=$CACHE/k8s-$KSTRETCH_K8S_VERSION
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

# k8s_build OUT PKG... — build k8s.io/kubernetes commands into OUT, in a throwaway module
# that pins every staging repo (`go install` refuses k8s's own go.mod replaces) and stamps
# the version (unstamped binaries report v0.0.0 and misbehave).
k8s_build() {
  local out=$1 v=$KSTRETCH_K8S_VERSION minor patch major gomod staging x pkg
  shift
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  patch=${v##*.}
  staging=v0.$minor.$patch
  go mod init kstretch.test/k8s-build >/dev/null 2>&1
  gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
  [[ -s $gomod ]] || die "could not download k8s.io/kubernetes@$v go.mod"
  while read -r x; do
    go mod edit -replace="$x=$x@$staging"
  done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")
  grep -q 'k8s.io/api =>' go.mod || die "no staging replaces found in $gomod"
  go get "k8s.io/kubernetes@$v" 2>&1 | grep -v '^go: downloading' >&2 || true
  grep -q "k8s.io/kubernetes $v" go.mod || die "go get k8s.io/kubernetes@$v failed"
  pkg=k8s.io/component-base/version
  mkdir -p "$out"
  # One `go build` for all commands, so shared packages compile once.
  go build -mod=mod -trimpath -o "$out/" \
    -ldflags "-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z" \
    "${@/#/k8s.io/kubernetes/cmd/}"
}

build_k8s() {
  local work
  work=$(tmpdir k8s)
  (
    cd "$work"
    k8s_build out "${K8S_BINS[@]}"
    ./out/kube-apiserver --version | grep -qx "Kubernetes $KSTRETCH_K8S_VERSION" || die "kube-apiserver reports $(./out/kube-apiserver --version)"
  )
  publish "$work/out" "$K8S_DIR"
  rm -rf "$work"
}

# ---------------------------------------------------------------- kubernetes nodes
# What a real node runs besides containerd (Debian's): kubelet and kube-proxy. Kept apart
# from the control plane so a kwok-only environment never waits for them.
K8S_NODE_DIR=$CACHE/k8s-node-$KSTRETCH_K8S_VERSION
K8S_NODE_BINS=(kubelet kube-proxy)

build_k8s_node() {
  local work
  work=$(tmpdir k8s-node)
  (
    cd "$work"
    k8s_build out "${K8S_NODE_BINS[@]}"
    ./out/kubelet --version | grep -qx "Kubernetes $KSTRETCH_K8S_VERSION" || die "kubelet reports $(./out/kubelet --version)"
  )
  publish "$work/out" "$K8S_NODE_DIR"
  rm -rf "$work"
}

# ---------------------------------------------------------------- etcd
ETCD_DIR=$CACHE/etcd-$KSTRETCH_ETCD_VERSION

build_etcd() {
  local work
  work=$(tmpdir etcd)
  (
    cd "$work"
    go mod init kstretch.test/etcd-build >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@$KSTRETCH_ETCD_VERSION" >/dev/null 2>&1
    mkdir out
    go build -mod=mod -trimpath -ldflags "-s -w" -o out/etcd go.etcd.io/etcd/server/v3
    ./out/etcd --version | grep -q "etcd Version: ${KSTRETCH_ETCD_VERSION#v}" || die "etcd reports $(./out/etcd --version)"
  )
  publish "$work/out" "$ETCD_DIR"
  rm -rf "$work"
}

# ---------------------------------------------------------------- kwok
KWOK_DIR=$CACHE/kwok-$KSTRETCH_KWOK_VERSION

# Stage files kwok needs to play the kubelet (the set kwokctl uses for "fast" clusters:
# node initialise + lease heartbeat, pod ready/complete/delete) plus the volume stages
# that provision and bind PVCs of StorageClass kwok-volume (manifests/storage-class.yaml).
KWOK_STAGES=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease
  pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete
  volume/fast/pvc-provision volume/fast/pv-bind volume/fast/pv-delete volume/fast/pvc-delete)

kwok_complete() {
  local s
  have "$KWOK_DIR" kwok manifests/storage-class.yaml || return 1
  for s in "${KWOK_STAGES[@]}"; do have "$KWOK_DIR" "stages/${s##*/}.yaml" || return 1; done
}

build_kwok() (
  local work src s
  work=$(tmpdir kwok)
  mkdir -p "$work/out/stages" "$work/out/manifests"
  cd "$work"
  GOBIN=$work/out go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KSTRETCH_KWOK_VERSION"
  src=$(go mod download -json "sigs.k8s.io/kwok@$KSTRETCH_KWOK_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [[ -d $src/kustomize/stage ]] || die "no kustomize/stage in $src"
  for s in "${KWOK_STAGES[@]}"; do
    install -m 0644 "$src/kustomize/stage/$s.yaml" "$work/out/stages/${s##*/}.yaml"
  done
  install -m 0644 "$src/kustomize/stage/volume/fast/storage-class.yaml" "$work/out/manifests/storage-class.yaml"
  publish "$work/out" "$KWOK_DIR"
  rm -rf "$work"
)

# ---------------------------------------------------------------- helm
HELM_DIR=$CACHE/helm-$KSTRETCH_HELM_VERSION

build_helm() (
  local work
  work=$(tmpdir helm)
  mkdir -p "$work/out"
  cd "$work"
  GOBIN=$work/out go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$KSTRETCH_HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$KSTRETCH_HELM_VERSION"
  publish "$work/out" "$HELM_DIR"
  rm -rf "$work"
)

# ---------------------------------------------------------------- local-path-provisioner
# The dynamic provisioner of the real nodes' claims (a directory on the node per volume).
LOCAL_PATH_DIR=$CACHE/local-path-$KSTRETCH_LOCAL_PATH_VERSION

build_local_path() (
  local work
  work=$(tmpdir local-path)
  mkdir -p "$work/out"
  cd "$work"
  GOBIN=$work/out go install -trimpath -ldflags "-s -w" \
    "github.com/rancher/local-path-provisioner@$KSTRETCH_LOCAL_PATH_VERSION"
  publish "$work/out" "$LOCAL_PATH_DIR"
  rm -rf "$work"
)

# ---------------------------------------------------------------- metallb
# The real nodes' LoadBalancer implementation (layer 2 mode): its controller gives Services
# addresses from a pool on the node's network, its speaker answers ARP for them on the node.
METALLB_DIR=$CACHE/metallb-$KSTRETCH_METALLB_VERSION

build_metallb() (
  local work src
  work=$(tmpdir metallb)
  mkdir -p "$work/out"
  cd "$work"
  GOBIN=$work/out go install -trimpath -ldflags "-s -w" \
    "go.universe.tf/metallb/controller@$KSTRETCH_METALLB_VERSION" \
    "go.universe.tf/metallb/speaker@$KSTRETCH_METALLB_VERSION"
  # Its CRDs ship in the module.
  src=$(go mod download -json "go.universe.tf/metallb@$KSTRETCH_METALLB_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [[ -d $src/config/crd/bases ]] || die "no CRDs in go.universe.tf/metallb@$KSTRETCH_METALLB_VERSION"
  for f in "$src"/config/crd/bases/*.yaml; do printf -- '---\n'; cat "$f"; done >"$work/out/crds.yaml"
  publish "$work/out" "$METALLB_DIR"
  rm -rf "$work"
)

# ---------------------------------------------------------------- prometheus
# Prometheus as it finds pods on Kubernetes, and promtool to check rules (Debian's package is built without Kubernetes
# service discovery): every other discovery left out at build time, which halves the build.
PROMETHEUS_DIR=$CACHE/prometheus-$KSTRETCH_PROMETHEUS_VERSION

build_prometheus() (
  local work
  work=$(tmpdir prometheus)
  mkdir -p "$work/out"
  cd "$work"
  GOBIN=$work/out go install -trimpath -ldflags "-s -w" -tags remove_all_sd,enable_kubernetes_sd \
    "github.com/prometheus/prometheus/cmd/prometheus@$KSTRETCH_PROMETHEUS_VERSION" \
    "github.com/prometheus/prometheus/cmd/promtool@$KSTRETCH_PROMETHEUS_VERSION"
  publish "$work/out" "$PROMETHEUS_DIR"
  rm -rf "$work"
)

# ---------------------------------------------------------------- kafka
# The jars of each Kafka version: the environment's own (local processes and the default image)
# and the one Kafka upgrades go to (only its image).
KAFKA_VERSIONS=("$KSTRETCH_KAFKA_VERSION" "$KSTRETCH_KAFKA_NEXT_VERSION")
kafka_dir() { echo "$CACHE/kafka-$1"; }

kafka_complete() {
  local dir
  dir=$(kafka_dir "$1")
  [[ -f $dir/.complete ]] && compgen -G "$dir/libs/kafka_2.13-$1.jar" >/dev/null
}

build_kafka() {
  local version=$1 work
  work=$(tmpdir "kafka-$version")
  mkdir -p "$work/out/libs"
  # (sed: Maven 3.8's -q still prints bare ANSI resets)
  mvn -q -B -Dstyle.color=never -f "$ENV_DIR/kafka/pom.xml" -Dkafka.version="$version" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/out/libs" \
    -Dmdep.overWriteReleases=true 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2
  [[ -s $work/out/libs/kafka_2.13-$version.jar ]] || die "kafka $version jar missing after mvn"
  date -u +%FT%TZ >"$work/out/.complete"
  publish "$work/out" "$(kafka_dir "$version")"
  rm -rf "$work"
}

# ---------------------------------------------------------------- images
# The images real nodes run, built without an engine or a registry (tests/env/image/):
#   pause-image-<hash>/          OCI layout of containerd's sandbox image
#   metallb-image-<v>-<hash>/    OCI layout of MetalLB's controller and speaker
#   debian-jre-<suite>-17/rootfs.tar   Debian minbase + openjdk-17-jre-headless + appuser (1000)
#   kafka-image-<v>-<hash>/      OCI layout of apache/kafka:<v>: that rootfs plus /opt/kafka
#                                (with its class archive, kafka.jsa), for each of KAFKA_VERSIONS
# The hash covers tests/env/image, so a changed script gives a new image directory.
IMAGE_SRC=$ENV_DIR/image
IMAGE_HASH=$(image_hash "$IMAGE_SRC")
PAUSE_IMAGE_DIR=$CACHE/pause-image-$IMAGE_HASH
JRE_SUITE=bookworm
JRE_DIR=$CACHE/debian-jre-$JRE_SUITE-17
kafka_image_dir() { echo "$CACHE/kafka-image-$1-$IMAGE_HASH"; }

build_pause_image() {
  local work
  work=$(tmpdir pause-image)
  mkdir -p "$work/root"
  gcc -static -Os -s -o "$work/root/pause" "$IMAGE_SRC/pause.c"
  tar --numeric-owner --owner=0 --group=0 -C "$work/root" -cf "$work/layer.tar" pause
  python3 "$IMAGE_SRC/oci.py" --name "$KSTRETCH_PAUSE_IMAGE" --layer "$work/layer.tar" \
    --entrypoint /pause --out "$work/out"
  publish "$work/out" "$PAUSE_IMAGE_DIR"
  rm -rf "$work"
}

metallb_image_dir() { echo "$CACHE/metallb-image-$KSTRETCH_METALLB_VERSION-$IMAGE_HASH"; }

build_metallb_image() {
  local work
  work=$(tmpdir metallb-image)
  tar --numeric-owner --owner=0 --group=0 -C "$METALLB_DIR" -cf "$work/layer.tar" controller speaker
  python3 "$IMAGE_SRC/oci.py" --name "$KSTRETCH_METALLB_IMAGE" --layer "$work/layer.tar" \
    --out "$work/out"
  publish "$work/out" "$(metallb_image_dir)"
  rm -rf "$work"
}

build_jre_rootfs() {
  local work mirror
  work=$(tmpdir debian-jre)
  # The machine's own Debian mirror (the only one reachable).
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
  mirror=${mirror:-$(awk '$1 == "deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)}
  mirror=${mirror:-http://deb.debian.org/debian}
  log "debootstrap $JRE_SUITE from $mirror"
  debootstrap --variant=minbase --include=openjdk-17-jre-headless "$JRE_SUITE" "$work/rootfs" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  chroot "$work/rootfs" /usr/sbin/useradd --uid 1000 --gid 0 --home-dir /home/appuser --create-home \
    --shell /bin/sh appuser
  rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/* \
    "$work/rootfs"/usr/share/doc/* "$work/rootfs"/usr/share/man/* "$work/rootfs"/dev/* \
    "$work/rootfs"/proc/* "$work/rootfs"/sys/*
  mkdir -p "$work/out"
  tar --numeric-owner -C "$work/rootfs" -cf "$work/out/rootfs.tar" .
  publish "$work/out" "$JRE_DIR"
  rm -rf "$work"
}

# make_class_archive ROOT — /opt/kafka/kafka.jsa under ROOT (which holds /opt/kafka), made by
# the image's own JVM: ROOT gets the JRE rootfs too (only opt/ is packed into the layer) and
# the training runs chrooted there, with /proc and /dev of this machine mounted for its time.
make_class_archive() {
  local root=$1 port rc=0
  tar -C "$root" -xf "$JRE_DIR/rootfs.tar"
  cp "$IMAGE_SRC/kafka-class-archive.sh" "$root/tmp/kafka-class-archive.sh"
  port=$(python3 -c '
import socket
for port in range(29100, 29900, 2):
    try:
        for p in (port, port + 1):
            socket.create_server(("127.0.0.1", p)).close()
        print(port)
        break
    except OSError:
        pass
')
  mount -t proc proc "$root/proc"
  mount --bind /dev "$root/dev"
  chroot "$root" /usr/bin/env -i PATH=/opt/kafka/bin:/usr/bin:/bin \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 /bin/sh /tmp/kafka-class-archive.sh "$port" || rc=$?
  umount "$root/dev" "$root/proc"
  ((rc == 0)) || die "the class archive of the Kafka image could not be made"
}

build_kafka_image() {
  local version=$1 work
  work=$(tmpdir "kafka-image-$version")
  mkdir -p "$work/root/opt/kafka/libs" "$work/root/opt/kafka/plugins"
  cp -r "$IMAGE_SRC/kafka/bin" "$IMAGE_SRC/kafka/config" "$work/root/opt/kafka/"
  cp "$(kafka_dir "$version")"/libs/*.jar "$work/root/opt/kafka/libs/"
  make_class_archive "$work/root"
  tar --numeric-owner --owner=1000 --group=0 -C "$work/root" -cf "$work/layer.tar" opt
  python3 "$IMAGE_SRC/oci.py" --name "docker.io/apache/kafka:$version" \
    --layer "$JRE_DIR/rootfs.tar" --layer "$work/layer.tar" --user 1000 --workdir /opt/kafka \
    --env PATH=/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 --out "$work/out"
  publish "$work/out" "$(kafka_image_dir "$version")"
  rm -rf "$work"
}

# ---------------------------------------------------------------- main
want() { [[ $# -eq 0 ]] && return 0; local c; for c in "${SELECTED[@]}"; do [[ $c == "$1" ]] && return 0; done; return 1; }
SELECTED=("$@")
[[ ${#SELECTED[@]} -eq 0 ]] && SELECTED=(k8s k8s-node etcd kwok helm local-path metallb prometheus kafka images)

TOTAL_START=$(date +%s)

# Maven is network/IO bound: run it in the background, overlapping the Go builds.
KAFKA_PID=
if want kafka; then
  missing=()
  for version in "${KAFKA_VERSIONS[@]}"; do
    if kafka_complete "$version"; then log "cached kafka-$version"; else missing+=("$version"); fi
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    (for version in "${missing[@]}"; do timed "kafka-$version" build_kafka "$version"; done) &
    KAFKA_PID=$!
  fi
fi

# Go builds are CPU bound and the machine has 2 cores: one after the other.
if want k8s; then
  if have "$K8S_DIR" "${K8S_BINS[@]}"; then log "cached k8s-$KSTRETCH_K8S_VERSION"
  else timed "k8s-$KSTRETCH_K8S_VERSION" build_k8s; fi
fi
if want k8s-node; then
  if have "$K8S_NODE_DIR" "${K8S_NODE_BINS[@]}"; then log "cached k8s-node-$KSTRETCH_K8S_VERSION"
  else timed "k8s-node-$KSTRETCH_K8S_VERSION" build_k8s_node; fi
fi
if want etcd; then
  if have "$ETCD_DIR" etcd; then log "cached etcd-$KSTRETCH_ETCD_VERSION"
  else timed "etcd-$KSTRETCH_ETCD_VERSION" build_etcd; fi
fi
if want kwok; then
  if kwok_complete; then log "cached kwok-$KSTRETCH_KWOK_VERSION"
  else timed "kwok-$KSTRETCH_KWOK_VERSION" build_kwok; fi
fi
if want local-path; then
  if have "$LOCAL_PATH_DIR" local-path-provisioner; then log "cached local-path-$KSTRETCH_LOCAL_PATH_VERSION"
  else timed "local-path-$KSTRETCH_LOCAL_PATH_VERSION" build_local_path; fi
fi
if want metallb; then
  if have "$METALLB_DIR" controller speaker crds.yaml; then log "cached metallb-$KSTRETCH_METALLB_VERSION"
  else timed "metallb-$KSTRETCH_METALLB_VERSION" build_metallb; fi
fi
if want prometheus; then
  if have "$PROMETHEUS_DIR" prometheus promtool; then log "cached prometheus-$KSTRETCH_PROMETHEUS_VERSION"
  else timed "prometheus-$KSTRETCH_PROMETHEUS_VERSION" build_prometheus; fi
fi
if want helm; then
  if have "$HELM_DIR" helm; then log "cached helm-$KSTRETCH_HELM_VERSION"
  else timed "helm-$KSTRETCH_HELM_VERSION" build_helm; fi
fi

if [[ -n $KAFKA_PID ]]; then
  wait "$KAFKA_PID" || die "kafka download failed"
fi
if want images; then
  if have "$PAUSE_IMAGE_DIR" index.json; then log "cached pause image"
  else timed "pause image" build_pause_image; fi
  if have "$(metallb_image_dir)" index.json; then log "cached metallb image"
  else
    have "$METALLB_DIR" controller speaker || die "the MetalLB image needs its binaries: install.sh metallb"
    timed "metallb image" build_metallb_image
  fi
  if have "$JRE_DIR" rootfs.tar; then log "cached debian-jre-$JRE_SUITE-17"
  else timed "debian-jre-$JRE_SUITE-17" build_jre_rootfs; fi
  for version in "${KAFKA_VERSIONS[@]}"; do
    if have "$(kafka_image_dir "$version")" index.json; then log "cached kafka-image-$version"
    else
      kafka_complete "$version" || die "the Kafka $version image needs its jars: install.sh kafka"
      timed "kafka-image-$version" build_kafka_image "$version"
    fi
  done
fi
log "install done in $(($(date +%s) - TOTAL_START))s (cache: $CACHE)"
