#!/usr/bin/env bash
# scripts/check-charts.sh — owns: checking every Helm chart under charts/: the values tables in
# the READMEs are current, the shipped alerting rules pass `promtool check rules`, `helm lint --strict` and `helm template` pass with the default values
# and with the main options, and the rendered manifests really apply (not a dry run) to the
# test environment's apiservers: the CRDs and kstretch-central to cluster alpha, kstretch-agent
# to cluster beta. Everything it creates goes again at the end (its namespaces, cluster-scoped
# RBAC, and the stand-in cert-manager/ServiceMonitor/PrometheusRule CRDs if it had to add them), so the
# environment stays as it was for other tests.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
# shellcheck disable=SC1091
set -a && . "$state/env" && set +a
helm=$KSTRETCH_BIN_DIR/helm
kubectl=$KSTRETCH_BIN_DIR/kubectl
kc_alpha=$KSTRETCH_KUBECONFIG_ALPHA
kc_beta=$KSTRETCH_KUBECONFIG_BETA
out=$(mktemp -d)
run=chk$(date +%s | tail -c 6)$RANDOM
ns=kstretch-$run            # release namespace in both clusters
ns_topics=kstretch-$run-topics
created_crds=()

cleanup() {
  local rc=$?
  for kc in "$kc_alpha" "$kc_beta"; do
    "$kubectl" --kubeconfig "$kc" delete namespace "$ns" "$ns_topics" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    "$kubectl" --kubeconfig "$kc" delete clusterrole,clusterrolebinding -l "kstretch.io/chart-check=$run" --ignore-not-found >/dev/null 2>&1 || true
  done
  for entry in "${created_crds[@]}"; do
    "$kubectl" --kubeconfig "${entry%%|*}" delete crd "${entry##*|}" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  done
  rm -rf "$out"
  exit "$rc"
}
trap cleanup EXIT

# 1. The values tables in the charts' READMEs match values.yaml, and the alerting rules the
# central chart ships are valid for Prometheus.
python3 scripts/chart-docs.py --check
"$KSTRETCH_BIN_DIR/promtool" check rules charts/kstretch-central/files/prometheus-rules.yaml

# 2. Lint and render. Each variant: <name> <chart> <release namespace> <helm flags...>.
agent_min=(-f charts/kstretch-agent/ci/minimal-values.yaml --set central.url=https://127.0.0.1:9443)
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=chart-check CA" \
  -keyout "$out/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
variants=(
  "crds|kstretch-crds|$ns|"
  "central-default|kstretch-central|$ns|--set tls.generate.agents={beta}"
  "central-clusterwide|kstretch-central|$ns|--set clusterWide=true --set leaderElection.leaseName=lease-cw"
  "central-topics|kstretch-central|$ns|--set watchNamespaces={$ns} --set topicNamespaces={$ns_topics}"
  "central-namespaces|kstretch-central|$ns|--set watchNamespaces={$ns,$ns_topics} --set leaderElection.leaseName=lease-ns"
  "central-secret|kstretch-central|$ns|--set tls.mode=secret --set tls.secretName=external-tls"
  "central-certmanager|kstretch-central|$ns|--set tls.mode=certManager"
  "central-certmanager-issuer|kstretch-central|$ns|--set tls.mode=certManager --set tls.certManager.createIssuer=false --set tls.certManager.issuerRef.name=kstretch-ca --set tls.certManager.issuerRef.kind=ClusterIssuer"
  "central-monitor|kstretch-central|$ns|--set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set replicaCount=1 --set leaderElection.enabled=false"
  "agent-default|kstretch-agent|$ns|${agent_min[*]}"
  "agent-clusterwide|kstretch-agent|$ns|${agent_min[*]} --set clusterWide=true"
  "agent-namespaces|kstretch-agent|$ns|${agent_min[*]} --set watchNamespaces={$ns,$ns_topics}"
  "agent-generate|kstretch-agent|$ns|${agent_min[*]} --set tls.mode=generate --set-file tls.generate.caCert=$out/ca.pem --set-file tls.generate.caKey=$out/ca-key.pem"
  "agent-certmanager|kstretch-agent|$ns|${agent_min[*]} --set tls.mode=certManager --set tls.certManager.issuerRef.name=kstretch-ca"
  "agent-monitor|kstretch-agent|$ns|${agent_min[*]} --set serviceMonitor.enabled=true"
)
for v in "${variants[@]}"; do
  IFS='|' read -r name chart namespace flags <<<"$v"
  # shellcheck disable=SC2086 # flags are words
  "$helm" lint --strict --quiet "charts/$chart" --namespace "$namespace" $flags >/dev/null
  release=$run-${name#*-}
  [[ $chart == kstretch-crds ]] && release=kstretch-crds
  # shellcheck disable=SC2086
  "$helm" template "$release" "charts/$chart" --namespace "$namespace" $flags \
    --set-string "commonLabels.kstretch\.io/chart-check=$run" >"$out/$name.yaml"
  echo "rendered $name: $(grep -c '^kind:' "$out/$name.yaml") objects"
done

# Bad values are refused at render time with a message saying what to fix.
refused() { # <chart> <expected message part> <helm flags...>
  local chart=$1 want=$2 err
  shift 2
  if err=$("$helm" template x "charts/$chart" "$@" 2>&1 >/dev/null); then
    echo "$chart $*: rendered, want refusal ($want)" >&2
    exit 1
  fi
  [[ $err == *"$want"* ]] || { echo "$chart $*: '$err' does not say '$want'" >&2; exit 1; }
}
refused kstretch-central "value must be one of 'generate', 'secret', 'certManager'" --set tls.mode=bogus
refused kstretch-central "tls.mode=secret needs tls.secretName" --set tls.mode=secret
refused kstretch-central "needs tls.certManager.issuerRef.name" \
  --set tls.mode=certManager --set tls.certManager.createIssuer=false
refused kstretch-central "watchNamespaces" --set 'watchNamespaces={a,b,a}'
refused kstretch-agent "watchNamespaces" "${agent_min[@]}" --set 'watchNamespaces={a,a}'
refused kstretch-central "additional properties 'typo' not allowed" --set typo=1
refused kstretch-agent "clusterAlias is required" --set central.url=https://c:9443 --set tls.secretName=s
refused kstretch-agent "central.url is required" --set clusterAlias=beta --set tls.secretName=s
refused kstretch-agent "tls.mode=generate needs tls.generate.caCert" "${agent_min[@]}" --set tls.mode=generate
refused kstretch-agent "maximum: got 2, want 1" "${agent_min[@]}" --set replicaCount=2
echo "bad values are refused"

# No two objects of one kind share a name (a cut-off name that collides replaces an object).
python3 - "$out"/central-*.yaml "$out"/agent-*.yaml <<'PY'
import re, sys
field = lambda doc, pattern: (re.search(pattern, doc, re.M) or [None, None])[1]
for path in sys.argv[1:]:
    seen = set()
    for doc in open(path).read().split("\n---"):
        kind = field(doc, r"^kind: (\S+)")
        if not kind:
            continue
        key = (kind, field(doc, r"^  namespace: (\S+)"), field(doc, r"^  name: (\S+)"))
        if key in seen:
            sys.exit(f"{path}: two {kind} objects named {key[2]}")
        seen.add(key)
PY

# A rendered manifest must state what the options promise.
has() { grep -q -- "$1" "$out/$2" || { echo "$2: no '$1'" >&2; exit 1; }; }
lacks() { if grep -q -- "$1" "$out/$2"; then echo "$2: unexpected '$1'" >&2; exit 1; fi; }
has 'kind: ClusterRoleBinding' central-clusterwide.yaml
# Namespace-scoped, the only cluster-scoped rule is reading three CRDs (ADR 0012).
[[ $(grep -c '^kind: ClusterRole$' "$out/central-default.yaml") == 1 ]] ||
  { echo "central-default.yaml: more than the CRD reader's ClusterRole" >&2; exit 1; }
has 'resourceNames: \["kafkas.kafka.strimzi.io", "kafkaconnects.kafka.strimzi.io", "kafkausers.kafka.strimzi.io"\]' central-default.yaml
lacks '--namespace=' central-clusterwide.yaml
has '--namespace=' central-default.yaml
has 'kind: PodDisruptionBudget' central-default.yaml
has '--leader-election-lease-name=kstretch-central' central-default.yaml
lacks 'kind: PodDisruptionBudget' central-monitor.yaml
has 'kind: Certificate' central-certmanager.yaml
has 'kind: Issuer' central-certmanager.yaml
has 'kstretch://cluster/beta' agent-certmanager.yaml
has 'kind: ServiceMonitor' agent-monitor.yaml
has 'kind: ServiceMonitor' central-monitor.yaml
has 'kind: PrometheusRule' central-monitor.yaml
has 'alert: KstretchAgentDisconnected' central-monitor.yaml
lacks 'kind: PrometheusRule' central-default.yaml
has 'grafana_dashboard: "1"' central-monitor.yaml
has '"uid": "kstretch-central"' central-monitor.yaml
[[ $(grep -c 'kind: RoleBinding' "$out/central-topics.yaml") == 3 ]] # watched, topics, lease
# Several watched namespaces: one --namespace list, the chart's Role and RoleBinding in each.
for chart in central agent; do
  has "--namespace=$ns,$ns_topics" "$chart-namespaces.yaml"
  for namespace in "$ns" "$ns_topics"; do
    for kind in Role RoleBinding; do
      n=$(python3 - "$out/$chart-namespaces.yaml" "$kind" "$run-namespaces-kstretch-$chart" "$namespace" <<'PY'
import sys
text, kind, name, namespace = open(sys.argv[1]).read(), *sys.argv[2:]
print(sum(1 for doc in text.split("\n---")
          if f"\nkind: {kind}\n" in doc and f"\n  name: {name}\n" in doc
          and f"\n  namespace: {namespace}\n" in doc))
PY
      )
      [[ $n == 1 ]] || { echo "$chart-namespaces.yaml: $n ${kind}s $run-namespaces-kstretch-$chart in $namespace, want 1" >&2; exit 1; }
    done
  done
done
for f in "$out"/central-*.yaml "$out"/agent-*.yaml; do
  f=${f##*/}
  has 'readOnlyRootFilesystem: true' "$f"
  has 'runAsNonRoot: true' "$f"
  has 'type: RuntimeDefault' "$f"
  lacks 'subPath:' "$f" # a subPath mount would never see a renewed certificate
done

# 3. Apply for real. The CRD chart first (as a user's `helm install` would), in both clusters.
for kc in "$kc_alpha" "$kc_beta"; do
  "$kubectl" --kubeconfig "$kc" apply --server-side --force-conflicts \
    --field-manager kstretch-chart-check -f "$out/crds.yaml" >/dev/null
  "$kubectl" --kubeconfig "$kc" wait --for condition=Established --timeout 60s \
    -f "$out/crds.yaml" >/dev/null
  # Stand-ins for cert-manager's and the Prometheus Operator's CRDs where they are missing.
  for crd in certificates.cert-manager.io issuers.cert-manager.io clusterissuers.cert-manager.io \
    servicemonitors.monitoring.coreos.com prometheusrules.monitoring.coreos.com; do
    if ! "$kubectl" --kubeconfig "$kc" get crd "$crd" >/dev/null 2>&1; then
      created_crds+=("$kc|$crd")
    fi
  done
  "$kubectl" --kubeconfig "$kc" apply --server-side --field-manager kstretch-chart-check \
    -f tests/fixtures/charts/external-crds.yaml >/dev/null
  "$kubectl" --kubeconfig "$kc" wait --for condition=Established --timeout 60s \
    -f tests/fixtures/charts/external-crds.yaml >/dev/null
  "$kubectl" --kubeconfig "$kc" create namespace "$ns" >/dev/null
  "$kubectl" --kubeconfig "$kc" create namespace "$ns_topics" >/dev/null
done
# Wait until the new kinds are served (discovery), or apply may not know them yet.
for kc in "$kc_alpha" "$kc_beta"; do
  for _ in $(seq 50); do
    "$kubectl" --kubeconfig "$kc" get certificates.cert-manager.io,servicemonitors.monitoring.coreos.com,prometheusrules.monitoring.coreos.com \
      -n "$ns" >/dev/null 2>&1 && break
    sleep 0.2
  done
done
# One apply per cluster (every variant has its own release name, so none overwrites another).
central_files=() agent_files=()
for v in "${variants[@]}"; do
  IFS='|' read -r name chart _ <<<"$v"
  case $chart in
    kstretch-central) central_files+=(-f "$out/$name.yaml") ;;
    kstretch-agent) agent_files+=(-f "$out/$name.yaml") ;;
  esac
done
"$kubectl" --kubeconfig "$kc_alpha" apply --server-side --field-manager kstretch-chart-check \
  "${central_files[@]}" >/dev/null
echo "applied $((${#central_files[@]} / 2)) central variants to alpha"
"$kubectl" --kubeconfig "$kc_beta" apply --server-side --field-manager kstretch-chart-check \
  "${agent_files[@]}" >/dev/null
echo "applied $((${#agent_files[@]} / 2)) agent variants to beta"

# An upgrade keeps the generated CA and the agent certificates (the chart looks them up), and
# re-signs central's own: render again against the cluster, as `helm upgrade` would.
secret_field() { # <manifest> <secret name> <key>: the value of one data key of one Secret
  python3 - "$@" <<'PY'
import sys
text, name, key = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
for doc in text.split("\n---"):
    if "kind: Secret" in doc and f"\n  name: {name}\n" in doc:
        for line in doc.splitlines():
            if line.strip().startswith(key + ":"):
                print(line.split(":", 1)[1].strip())
                sys.exit(0)
sys.exit(f"no {key} in Secret {name}")
PY
}
"$helm" template "$run-default" charts/kstretch-central --namespace "$ns" --dry-run=server --take-ownership \
  --kubeconfig "$kc_alpha" --set 'tls.generate.agents={beta}' \
  --set-string "commonLabels.kstretch\.io/chart-check=$run" >"$out/central-upgrade.yaml"
full=$run-default-kstretch-central
for pair in "$full-ca|tls.crt" "$full-ca|tls.key" "$full-agent-beta|tls.crt" "$full-tls|ca.crt"; do
  first=$(secret_field "$out/central-default.yaml" "${pair%%|*}" "${pair##*|}")
  again=$(secret_field "$out/central-upgrade.yaml" "${pair%%|*}" "${pair##*|}")
  [[ $first == "$again" ]] || { echo "upgrade changed ${pair/|/ }" >&2; exit 1; }
done
[[ $(secret_field "$out/central-default.yaml" "$full-tls" tls.crt) != \
  $(secret_field "$out/central-upgrade.yaml" "$full-tls" tls.crt) ]]
echo "upgrade render keeps the CA and agent certificates"

# A real `helm install`, `helm upgrade` and `helm uninstall` of central: the CA stays the same
# across the upgrade, and the uninstall leaves it (helm.sh/resource-policy: keep).
rel=$run-helm
ca_of() {
  "$kubectl" --kubeconfig "$kc_alpha" -n "$ns" get secret "$rel-kstretch-central-ca" \
    -o jsonpath='{.data.tls\.crt}'
}
for action in install upgrade; do
  "$helm" "$action" "$rel" charts/kstretch-central --namespace "$ns" --kubeconfig "$kc_alpha" \
    --set 'tls.generate.agents={beta}' --set "leaderElection.leaseName=lease-$rel" \
    --set-string "commonLabels.kstretch\.io/chart-check=$run" >/dev/null
  if [[ $action == install ]]; then ca_installed=$(ca_of); fi
done
[[ $(ca_of) == "$ca_installed" ]] || { echo "helm upgrade replaced the CA" >&2; exit 1; }
"$helm" uninstall "$rel" --namespace "$ns" --kubeconfig "$kc_alpha" >/dev/null
[[ $(ca_of) == "$ca_installed" ]] || { echo "helm uninstall removed the CA" >&2; exit 1; }
echo "helm install, upgrade and uninstall keep the CA"

# 4. The RBAC the charts grant, as the apiserver decides it for their ServiceAccounts.
can() { # <kubeconfig> <serviceaccount> <expected yes|no> <verb> <resource> [flags...]
  local kc=$1 sa=$2 want=$3 got
  shift 3
  got=$("$kubectl" --kubeconfig "$kc" auth can-i --as "system:serviceaccount:$ns:$sa" "$@" 2>/dev/null || true)
  if [[ $got != "$want" ]]; then
    echo "RBAC: $sa can-i $* = $got, want $want" >&2
    return 1
  fi
}
c=$run-default-kstretch-central
a=$run-default-kstretch-agent
can "$kc_alpha" "$c" yes watch kafkas.kafka.strimzi.io -n "$ns"
can "$kc_alpha" "$c" yes patch kafkas.kafka.strimzi.io --subresource status -n "$ns"
can "$kc_alpha" "$c" yes patch kafkatopics.kafka.strimzi.io -n "$ns"
can "$kc_alpha" "$c" yes update kafkaconnectors.kafka.strimzi.io --subresource finalizers -n "$ns"
can "$kc_alpha" "$c" yes patch kafkausers.kafka.strimzi.io --subresource status -n "$ns"
can "$kc_alpha" "$c" yes patch kafkaoperations.kstretch.io --subresource status -n "$ns"
can "$kc_alpha" "$c" yes watch kafkaoperations.kstretch.io -n "$ns"
can "$kc_alpha" "$c" yes update kafkausers.kafka.strimzi.io --subresource finalizers -n "$ns"
can "$kc_alpha" "$c" yes get customresourcedefinitions.apiextensions.k8s.io/kafkausers.kafka.strimzi.io
can "$kc_alpha" "$c" yes create configmaps -n "$ns"
can "$kc_alpha" "$c" yes create events.events.k8s.io -n "$ns"
can "$kc_alpha" "$c" yes update leases.coordination.k8s.io/kstretch-central -n "$ns"
can "$kc_alpha" "$c" no update leases.coordination.k8s.io/other -n "$ns"
can "$kc_alpha" "$c" yes patch pods -n "$ns"        # the leader labels its own pod
can "$kc_alpha" "$c" no delete pods -n "$ns"
can "$kc_alpha" "$run-topics-kstretch-central" no patch pods -n "$ns_topics"
can "$kc_alpha" "$c" yes get secrets -n "$ns"          # the cluster CA and node certificates
can "$kc_alpha" "$c" no list secrets -n "$ns"
can "$kc_alpha" "$c" yes delete secrets -n "$ns"       # those it generated, with their Kafka
can "$kc_alpha" "$c" no get secrets -n kube-system
can "$kc_alpha" "$c" no update kafkas.kafka.strimzi.io --subresource scale -n "$ns"
can "$kc_alpha" "$c" no delete configmaps -n "$ns"
can "$kc_alpha" "$c" yes get customresourcedefinitions.apiextensions.k8s.io/kafkas.kafka.strimzi.io
can "$kc_alpha" "$c" no get customresourcedefinitions.apiextensions.k8s.io/kafkatopics.kafka.strimzi.io
can "$kc_alpha" "$c" no delete customresourcedefinitions.apiextensions.k8s.io/kafkas.kafka.strimzi.io
can "$kc_alpha" "$c" no list kafkas.kafka.strimzi.io -n kube-system
can "$kc_alpha" "$c" no list kafkas.kafka.strimzi.io --all-namespaces
can "$kc_alpha" "$run-clusterwide-kstretch-central" yes list kafkas.kafka.strimzi.io --all-namespaces
can "$kc_alpha" "$run-topics-kstretch-central" yes patch kafkatopics.kafka.strimzi.io --subresource status -n "$ns_topics"
can "$kc_beta" "$a" yes create pods -n "$ns"
can "$kc_beta" "$a" yes patch strimzipodsets.core.strimzi.io --subresource status -n "$ns"
can "$kc_beta" "$a" yes delete serviceexports.multicluster.x-k8s.io -n "$ns"
can "$kc_beta" "$a" yes patch poddisruptionbudgets.policy -n "$ns"
can "$kc_beta" "$a" yes delete deployments.apps -n "$ns"
can "$kc_beta" "$a" yes patch ingresses.networking.k8s.io -n "$ns"
can "$kc_beta" "$a" yes patch secrets -n "$ns"
can "$kc_beta" "$a" no get secrets -n kube-system
can "$kc_beta" "$a" no list pods --all-namespaces
can "$kc_beta" "$a" no get kafkas.kafka.strimzi.io -n "$ns"
can "$kc_beta" "$a" no create pods --subresource eviction -n "$ns"
can "$kc_beta" "$run-clusterwide-kstretch-agent" yes list pods --all-namespaces
# Several watched namespaces: each is granted, no other is.
for namespace in "$ns" "$ns_topics"; do
  can "$kc_alpha" "$run-namespaces-kstretch-central" yes watch kafkas.kafka.strimzi.io -n "$namespace"
  can "$kc_beta" "$run-namespaces-kstretch-agent" yes watch pods -n "$namespace"
done
can "$kc_alpha" "$run-namespaces-kstretch-central" no list kafkas.kafka.strimzi.io -n kube-system
can "$kc_beta" "$run-namespaces-kstretch-agent" no list pods -n kube-system
echo "charts: lint, render, apply and RBAC checks passed"
