#!/usr/bin/env bash
# scripts/prereqs.sh — owns: making sure the machine has the system tools kstretch's build and
# test environment need (installing missing ones from Debian's packages), and failing clearly
# when a toolchain is missing or too old.
set -euo pipefail

need_apt=()
# The real nodes of the test environment (tests/env/nodes.sh): containerd, runc and the CNI
# plugins; debootstrap builds the Kafka image's root filesystem.
have() { command -v "$1" >/dev/null 2>&1; }
for pair in cmake:cmake g++:g++ make:make openssl:openssl curl:curl ss:iproute2 \
  pgrep:procps setsid:util-linux mvn:maven java:openjdk-17-jdk-headless python3:python3 \
  containerd:containerd runc:runc iptables:iptables conntrack:conntrack socat:socat \
  debootstrap:debootstrap nsenter:util-linux gcc:gcc; do
  tool=${pair%%:*} pkg=${pair#*:}
  have "$tool" || need_apt+=("$pkg")
done
[[ -x /usr/lib/cni/bridge ]] || need_apt+=(containernetworking-plugins)
# librdkafka (built by the rdkafka crate for the tests) includes curl's header even when curl
# support is off.
[[ -f /usr/include/x86_64-linux-gnu/curl/curl.h || -f /usr/include/curl/curl.h ]] ||
  need_apt+=(libcurl4-openssl-dev)
if ((${#need_apt[@]})); then
  echo "[prereqs] installing missing Debian packages: ${need_apt[*]}" >&2
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

# Toolchains that cannot come from apt in a usable version: say what is missing.
have go || { echo "[prereqs] Go (>= 1.25) is required to build the Kubernetes test binaries" >&2; exit 1; }
have cargo || { echo "[prereqs] Rust (cargo, >= 1.89) is required: https://rustup.rs" >&2; exit 1; }
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
((go_minor >= 25)) || { echo "[prereqs] Go $(go env GOVERSION) is too old: Kubernetes v1.36 needs Go >= 1.25" >&2; exit 1; }
if have rustup; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi
java_major=$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -n1)
((java_major >= 17)) || { echo "[prereqs] Java >= 17 is required for Kafka 4 (found ${java_major:-none})" >&2; exit 1; }
