{{/*
What the agent does against its cluster's apiserver (read from agent/src): the StrimziPodSet
controller watches podsets and pods, creates, patches and deletes pods, writes podset status and
removes a podset's manual-rolling-update annotation once it handed it to the pods;
the link server-side applies, lists (to prune) and deletes the kinds central sends (agent/src/link/objects.rs:
ConfigMap, Secret, Service, Ingress, Route, TLSRoute, PersistentVolumeClaim, ServiceExport,
StrimziPodSet, PodDisruptionBudget, Deployment: Kafka Exporter), watches the
per-node Services and records Events. Nothing else: no Strimzi user kinds. (It also reads the
cluster's nodes, cluster-wide and read only, in rbac.yaml: where `nodeport` listeners are reached.)
*/}}
{{- define "kstretch-agent.rules" -}}
- apiGroups: ["core.strimzi.io"]
  resources: ["strimzipodsets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["core.strimzi.io"]
  resources: ["strimzipodsets/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["core.strimzi.io"]
  resources: ["strimzipodsets/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods", "configmaps", "secrets", "services", "persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["route.openshift.io"]
  resources: ["routes"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["gateway.networking.k8s.io"]
  resources: ["tlsroutes"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["serviceexports"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
