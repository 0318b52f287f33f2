{{/*
What central does against its own cluster's apiserver (read from central/src): it watches the
Strimzi kinds, writes their status, adds and removes the topic and user operators' finalizers (a
JSON patch of metadata.finalizers), keeps Kafka Connect offsets in ConfigMaps (and reads the one a Kafka's metricsConfig names), keeps each Kafka's
cluster and clients CAs (Strimzi's `<cluster>-cluster-ca` / `-cluster-ca-cert`, the same for
clients) and node certificates in Secrets, writes each KafkaUser's Secret (and reads the Secret
a user's password is taken from) and records Events. It deletes only the Secrets it generated
(with their Kafka, or a user's whose credentials are no longer kept), and never touches pods here:
member-cluster objects reach the agents over the link.
(With leader election the leader labels its own pod, a rule of the release namespace only.)
*/}}
{{- define "kstretch-central.rules" -}}
- apiGroups: ["kafka.strimzi.io"]
  resources: ["kafkas", "kafkanodepools", "kafkatopics", "kafkausers", "kafkaconnects", "kafkaconnectors"]
  verbs: ["get", "list", "watch", "patch", "update"]
- apiGroups: ["kafka.strimzi.io"]
  resources: ["kafkas/status", "kafkanodepools/status", "kafkatopics/status", "kafkausers/status", "kafkaconnects/status", "kafkaconnectors/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["kafka.strimzi.io"]
  resources: ["kafkas/finalizers", "kafkanodepools/finalizers", "kafkatopics/finalizers", "kafkausers/finalizers", "kafkaconnects/finalizers", "kafkaconnectors/finalizers"]
  verbs: ["update"]
- apiGroups: ["kstretch.io"]
  resources: ["kafkaoperations"]
  # create/delete: the drains of moving pools' leaving brokers.
  verbs: ["get", "list", "watch", "create", "delete"]
- apiGroups: ["kstretch.io"]
  resources: ["kafkaoperations/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "update", "patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
