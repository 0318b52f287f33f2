#!/usr/bin/env bash
# tests/env/install.sh — owns: building/fetching every binary of the kstretch test
# environment into the versioned cache ${KSTRETCH_CACHE:-$HOME/.cache/kstretch}:
#   k8s-<v>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   etcd-<v>/etcd   kwok-<v>/{kwok,stages/*.yaml}   helm-<v>/helm   kafka-<v>/libs/*.jar
# A component is rebuilt only when its final files are missing. Each one is built in a
# temporary directory inside the cache and moved into place with one rename, so an
# interrupted build never leaves a half-filled versioned directory behind.
# Usage: install.sh [k8s|etcd|kwok|helm|kafka ...]   (no argument = all)
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

build_k8s() {
  local v=$KSTRETCH_K8S_VERSION minor patch major work gomod staging x
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  patch=${v##*.}
  staging=v0.$minor.$patch
  work=$(tmpdir k8s)
  (
    cd "$work"
    go mod init kstretch.test/k8s-build >/dev/null 2>&1
    gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
    [[ -s $gomod ]] || die "could not download k8s.io/kubernetes@$v go.mod"
    # Every `k8s.io/<x> => ./staging/...` replace of k8s's own go.mod, pinned to the
    # published staging module version instead.
    while read -r x; do
      go mod edit -replace="$x=$x@$staging"
    done < <(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*#\1#p' "$gomod")
    grep -q 'k8s.io/api =>' go.mod || die "no staging replaces found in $gomod"
    go get "k8s.io/kubernetes@$v" 2>&1 | grep -v '^go: downloading' >&2 || true
    grep -q "k8s.io/kubernetes $v" go.mod || die "go get k8s.io/kubernetes@$v failed"
    local pkg=k8s.io/component-base/version
    mkdir out
    # One `go build` for all four, so shared packages compile once.
    go build -mod=mod -trimpath -o out/ \
      -ldflags "-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
      k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
    ./out/kube-apiserver --version | grep -qx "Kubernetes $v" || die "kube-apiserver reports $(./out/kube-apiserver --version)"
  )
  publish "$work/out" "$K8S_DIR"
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

# ---------------------------------------------------------------- kafka
KAFKA_DIR=$CACHE/kafka-$KSTRETCH_KAFKA_VERSION

kafka_complete() {
  [[ -f $KAFKA_DIR/.complete ]] && compgen -G "$KAFKA_DIR/libs/kafka_2.13-$KSTRETCH_KAFKA_VERSION.jar" >/dev/null
}

build_kafka() {
  local work
  work=$(tmpdir kafka)
  mkdir -p "$work/out/libs"
  # (sed: Maven 3.8's -q still prints bare ANSI resets)
  mvn -q -B -Dstyle.color=never -f "$ENV_DIR/kafka/pom.xml" -Dkafka.version="$KSTRETCH_KAFKA_VERSION" \
    dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$work/out/libs" \
    -Dmdep.overWriteReleases=true 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g' -e '/^[[:space:]]*$/d' >&2
  [[ -s $work/out/libs/kafka_2.13-$KSTRETCH_KAFKA_VERSION.jar ]] || die "kafka jar missing after mvn"
  date -u +%FT%TZ >"$work/out/.complete"
  publish "$work/out" "$KAFKA_DIR"
  rm -rf "$work"
}

# ---------------------------------------------------------------- main
want() { [[ $# -eq 0 ]] && return 0; local c; for c in "${SELECTED[@]}"; do [[ $c == "$1" ]] && return 0; done; return 1; }
SELECTED=("$@")
[[ ${#SELECTED[@]} -eq 0 ]] && SELECTED=(k8s etcd kwok helm kafka)

TOTAL_START=$(date +%s)

# Maven is network/IO bound: run it in the background, overlapping the Go builds.
KAFKA_PID=
if want kafka; then
  if kafka_complete; then
    log "cached kafka-$KSTRETCH_KAFKA_VERSION"
  else
    timed "kafka-$KSTRETCH_KAFKA_VERSION" build_kafka &
    KAFKA_PID=$!
  fi
fi

# Go builds are CPU bound and the machine has 2 cores: one after the other.
if want k8s; then
  if have "$K8S_DIR" "${K8S_BINS[@]}"; then log "cached k8s-$KSTRETCH_K8S_VERSION"
  else timed "k8s-$KSTRETCH_K8S_VERSION" build_k8s; fi
fi
if want etcd; then
  if have "$ETCD_DIR" etcd; then log "cached etcd-$KSTRETCH_ETCD_VERSION"
  else timed "etcd-$KSTRETCH_ETCD_VERSION" build_etcd; fi
fi
if want kwok; then
  if kwok_complete; then log "cached kwok-$KSTRETCH_KWOK_VERSION"
  else timed "kwok-$KSTRETCH_KWOK_VERSION" build_kwok; fi
fi
if want helm; then
  if have "$HELM_DIR" helm; then log "cached helm-$KSTRETCH_HELM_VERSION"
  else timed "helm-$KSTRETCH_HELM_VERSION" build_helm; fi
fi

if [[ -n $KAFKA_PID ]]; then
  wait "$KAFKA_PID" || die "kafka download failed"
fi
log "install done in $(($(date +%s) - TOTAL_START))s (cache: $CACHE)"
