#!/usr/bin/env bash
# scripts/check-charts.sh — owns: linting and rendering every chart under charts/ with helm,
# and applying the rendered CRD chart to a real apiserver of the test environment.
set -euo pipefail
cd "$(dirname "$0")/.."
state=${KSTRETCH_STATE_DIR:-$HOME/.local/state/kstretch}
# shellcheck disable=SC1091
set -a && . "$state/env" && set +a
helm=$KSTRETCH_BIN_DIR/helm
kubectl=$KSTRETCH_BIN_DIR/kubectl
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for chart in charts/*/; do
  name=$(basename "$chart")
  "$helm" lint --strict "$chart"
  "$helm" template "$name" "$chart" >"$out/$name.yaml"
  echo "rendered $name: $(grep -c '^kind:' "$out/$name.yaml") objects"
done
# Apply for real (not a dry run), as a user's `helm install` would, in the first cluster.
first=${KSTRETCH_CLUSTERS%% *}
kc_var=KSTRETCH_KUBECONFIG_$(printf '%s' "$first" | tr '[:lower:]-' '[:upper:]_')
"$kubectl" --kubeconfig "${!kc_var}" apply --server-side --force-conflicts \
  --field-manager kstretch-chart-check -f "$out/kstretch-crds.yaml"
"$kubectl" --kubeconfig "${!kc_var}" wait --for condition=Established --timeout 60s \
  -f "$out/kstretch-crds.yaml"
