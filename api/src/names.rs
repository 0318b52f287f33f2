//! Well-known API groups, label, annotation and finalizer names shared with Strimzi.
//!
//! The values are Strimzi's, so that existing manifests, selectors and habits keep working. The
//! only kstretch-specific name is [`STRETCH_CLUSTER_ALIAS`], taken from Strimzi's stretch-cluster
//! proposal.

/// API group of the user-facing kinds (`Kafka`, `KafkaNodePool`, `KafkaTopic`, ...).
pub const KAFKA_GROUP: &str = "kafka.strimzi.io";
/// API group of the internal `StrimziPodSet` kind.
pub const CORE_GROUP: &str = "core.strimzi.io";
/// The storage version, and the only version the operator reads and writes.
pub const V1: &str = "v1";
/// The older version, still served for existing manifests (deprecated).
pub const V1BETA2: &str = "v1beta2";
/// The CRD category shared by every kind (`kubectl get strimzi`).
pub const CATEGORY: &str = "strimzi";

// ---------------------------------------------------------------------------------------------
// Labels
// ---------------------------------------------------------------------------------------------

/// Label naming the `Kafka` (or `KafkaConnect`) cluster a resource belongs to.
pub const CLUSTER: &str = "strimzi.io/cluster";
/// Label with the kind of the custom resource that owns a generated resource (`Kafka`, ...).
pub const KIND: &str = "strimzi.io/kind";
/// Label with the name of a generated component (for example `my-cluster-kafka`).
pub const NAME: &str = "strimzi.io/name";
/// Label with the name of the `KafkaNodePool` a pod belongs to.
pub const POOL_NAME: &str = "strimzi.io/pool-name";
/// Label with the kind of the controller owning a pod (`StrimziPodSet`).
pub const CONTROLLER: &str = "strimzi.io/controller";
/// Label with the name of the controller (the `StrimziPodSet`) owning a pod.
pub const CONTROLLER_NAME: &str = "strimzi.io/controller-name";
/// Label with the pod's own name, used by per-pod services.
pub const POD_NAME: &str = "strimzi.io/pod-name";
/// Label on Kafka pods saying whether the node has the broker role (`"true"`/`"false"`).
pub const BROKER_ROLE: &str = "strimzi.io/broker-role";
/// Label on Kafka pods saying whether the node has the controller role (`"true"`/`"false"`).
pub const CONTROLLER_ROLE: &str = "strimzi.io/controller-role";
/// Label with the component type (for example `kafka`).
pub const COMPONENT_TYPE: &str = "strimzi.io/component-type";
/// Label marking services that clients may discover.
pub const DISCOVERY: &str = "strimzi.io/discovery";

/// Recommended Kubernetes label: the application name.
pub const APP_NAME: &str = "app.kubernetes.io/name";
/// Recommended Kubernetes label: the instance (cluster) name.
pub const APP_INSTANCE: &str = "app.kubernetes.io/instance";
/// Recommended Kubernetes label: the larger application this is part of.
pub const APP_PART_OF: &str = "app.kubernetes.io/part-of";
/// Recommended Kubernetes label: the tool managing the resource.
pub const APP_MANAGED_BY: &str = "app.kubernetes.io/managed-by";

// ---------------------------------------------------------------------------------------------
// Annotations
// ---------------------------------------------------------------------------------------------

/// Annotation on a pod (and its podset entry) with the hash of its desired definition; a
/// difference between desired and current means the pod must be rolled.
pub const REVISION: &str = "strimzi.io/revision";
/// `KafkaNodePool` annotation: node IDs (single IDs, lists or ranges such as `[1000-1010]`) to
/// use first when the pool scales up.
pub const NEXT_NODE_IDS: &str = "strimzi.io/next-node-ids";
/// `KafkaNodePool` annotation: node IDs to remove first when the pool scales down.
pub const REMOVE_NODE_IDS: &str = "strimzi.io/remove-node-ids";
/// `Kafka` annotation: scale brokers down even if they still host partition replicas.
pub const SKIP_BROKER_SCALEDOWN_CHECK: &str = "strimzi.io/skip-broker-scaledown-check";
/// Annotation on any custom resource: `"true"` stops its reconciliation until removed.
pub const PAUSE_RECONCILIATION: &str = "strimzi.io/pause-reconciliation";
/// `KafkaConnect` annotation: `"true"` means its connectors are managed with `KafkaConnector`
/// resources.
pub const USE_CONNECTOR_RESOURCES: &str = "strimzi.io/use-connector-resources";
/// `KafkaConnector` annotation requesting an offsets operation: [`CONNECTOR_OFFSETS_LIST`],
/// [`CONNECTOR_OFFSETS_ALTER`] or [`CONNECTOR_OFFSETS_RESET`].
pub const CONNECTOR_OFFSETS: &str = "strimzi.io/connector-offsets";
/// Value of [`CONNECTOR_OFFSETS`]: write the current offsets to `spec.listOffsets.toConfigMap`.
pub const CONNECTOR_OFFSETS_LIST: &str = "list";
/// Value of [`CONNECTOR_OFFSETS`]: apply the offsets from `spec.alterOffsets.fromConfigMap`.
pub const CONNECTOR_OFFSETS_ALTER: &str = "alter";
/// Value of [`CONNECTOR_OFFSETS`]: reset all offsets of the (stopped) connector.
pub const CONNECTOR_OFFSETS_RESET: &str = "reset";
/// Key of the offsets document in the ConfigMaps used by the offsets operations.
pub const CONNECTOR_OFFSETS_CONFIG_MAP_KEY: &str = "offsets.json";
/// `KafkaConnector` annotation: restart the connector once: `"true"`, or `includeTasks`
/// and/or `onlyFailed` (comma-separated) for Connect's restart options.
pub const RESTART: &str = "strimzi.io/restart";
/// Value of [`RESTART`]: restart the tasks too.
pub const RESTART_INCLUDE_TASKS: &str = "includeTasks";
/// Value of [`RESTART`]: restart only what has failed.
pub const RESTART_ONLY_FAILED: &str = "onlyFailed";
/// `KafkaMirrorMaker2` annotation: restart the named connector once.
pub const RESTART_CONNECTOR: &str = "strimzi.io/restart-connector";
/// `KafkaConnector` annotation: restart the task with the given ID once.
pub const RESTART_TASK: &str = "strimzi.io/restart-task";
/// `KafkaConnector` annotation: restart the connector and/or its tasks once.
pub const RESTART_CONNECTOR_TASK: &str = "strimzi.io/restart-connector-task";
/// Annotation on a pod or podset (in its member cluster), value `"true"`: restart it, one pod
/// at a time in the roll's safe order. The agent hands a podset's to its pods.
pub const MANUAL_ROLLING_UPDATE: &str = "strimzi.io/manual-rolling-update";
/// Annotation on a pod: delete the pod and its PVCs (to recover from a broken disk).
pub const DELETE_POD_AND_PVC: &str = "strimzi.io/delete-pod-and-pvc";
/// Annotation on a PVC: whether it is deleted together with its node (`deleteClaim`).
pub const DELETE_CLAIM: &str = "strimzi.io/delete-claim";
/// Annotation on a podset with the storage configuration its PVCs were created from.
pub const STORAGE: &str = "strimzi.io/storage";
/// Annotation on a pod with the hash of the configuration it runs with.
pub const CONFIGURATION_HASH: &str = "strimzi.io/configuration-hash";
/// Annotation on a pod or podset with the Kafka version it runs.
pub const KAFKA_VERSION: &str = "strimzi.io/kafka-version";
/// `KafkaTopic` annotation: `"false"` detaches the resource from the topic in Kafka (the topic
/// is neither changed nor deleted any more).
pub const MANAGED: &str = "strimzi.io/managed";
/// kstretch's label on the Services that expose one node each (`loadbalancer` and `nodeport`
/// addressing); agents report where these are reachable.
pub const NODE_SERVICE: &str = "kstretch.io/node-service";
/// Annotation central stamps on every object it sends to a member cluster: the kind of the
/// resource that owns it (`Kafka` or `KafkaConnect`); the owner's name is `strimzi.io/cluster`.
pub const OWNER_KIND: &str = "kstretch.io/owner-kind";
/// Annotation central stamps on every object it sends: the UID of the owning resource, so that
/// a declared deletion removes only the objects of the resource that was deleted.
pub const OWNER_UID: &str = "kstretch.io/owner-uid";
/// Annotation on a StrimziPodSet: the Kafka cluster ID its pods are configured with, read back
/// to adopt a running cluster whose `Kafka` lost its status.
pub const CLUSTER_ID: &str = "kstretch.io/cluster-id";
/// Annotation on a `Kafka`: `static` keeps its controller quorum static (and gives a new cluster
/// a static one); `dynamic`, the default, gives new clusters a dynamic quorum (KIP-853) and turns
/// static ones dynamic where their Kafka version can. On a StrimziPodSet: how its pods find the
/// quorum, read back to adopt a running cluster whose `Kafka` lost its status.
pub const CONTROLLER_QUORUM: &str = "kstretch.io/controller-quorum";
/// `KafkaNodePool` annotation naming the Kubernetes cluster the pool runs in (from Strimzi's
/// stretch-cluster proposal); no annotation means the central cluster itself.
pub const STRETCH_CLUSTER_ALIAS: &str = "strimzi.io/stretch-cluster-alias";
/// `KafkaNodePool` annotation: the replication throttle (bytes per second per broker) of the
/// drain central runs when the pool moves to another cluster; without it, operations' default.
pub const MOVE_THROTTLE: &str = "kstretch.io/move-throttle";
/// Annotation on a `KafkaOperation` central created for a pool's move: the move's
/// `status.leaving.startedAt`, telling the operations of one move from those of an earlier one.
pub const MOVE_STARTED_AT: &str = "kstretch.io/move-started-at";
/// `Kafka` annotation: the member clusters (aliases, comma-separated) lost for good and
/// forgotten (`kstretch forget`): their nodes are taken out of Kafka, their partitions get
/// replicas on the survivors, and the `Kafka`'s objects there are deleted if the cluster ever
/// comes back.
pub const FORGOTTEN_CLUSTERS: &str = "kstretch.io/forgotten-clusters";
/// Legacy `Kafka` annotation (Strimzi before 0.46) enabling node pools; accepted and ignored,
/// node pools are always used.
pub const NODE_POOLS: &str = "strimzi.io/node-pools";
/// Legacy `Kafka` annotation (Strimzi before 0.46) enabling KRaft; accepted and ignored, KRaft is
/// the only mode.
pub const KRAFT: &str = "strimzi.io/kraft";

// ---------------------------------------------------------------------------------------------
// Finalizers
// ---------------------------------------------------------------------------------------------

/// Finalizer on `Kafka` and `KafkaConnect` resources: their objects in member clusters are
/// deleted, and every agent has confirmed it, before the resource goes.
pub const MEMBER_OBJECTS_FINALIZER: &str = "kstretch.io/member-objects";
/// Finalizer on `KafkaTopic` resources: the topic is deleted in Kafka before the resource goes.
pub const TOPIC_OPERATOR_FINALIZER: &str = "strimzi.io/topic-operator";
/// Finalizer on `KafkaUser` resources: the user's credentials, ACLs and quotas are removed from
/// Kafka before the resource goes.
pub const USER_OPERATOR_FINALIZER: &str = "kstretch.io/kafka-user";
