//! The `KafkaUser` kind (`kafka.strimzi.io`): a Kafka user of the `Kafka` named by its
//! `strimzi.io/cluster` label, with its credentials (a client certificate or a SCRAM password,
//! kept in a Secret named after the user), its ACLs and its quotas, as Strimzi's user operator
//! manages them.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;
use crate::schema::{keep_unknown_fields, opaque_object};

/// Desired state of a user.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "kafka.strimzi.io",
    version = "v1",
    kind = "KafkaUser",
    plural = "kafkausers",
    singular = "kafkauser",
    shortname = "ku",
    category = "strimzi",
    namespaced,
    status = "KafkaUserStatus",
    derive = "PartialEq",
    doc = "A Kafka user of the Kafka cluster named by its strimzi.io/cluster label: credentials, ACLs and quotas.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.strimzi\\.io/cluster",
        description = "The Kafka cluster the user belongs to"
    ),
    printcolumn(
        name = "Authentication",
        type_ = "string",
        json_path = ".spec.authentication.type",
        description = "How the user authenticates"
    ),
    printcolumn(
        name = "Authorization",
        type_ = "string",
        json_path = ".spec.authorization.type",
        description = "How the user's rights are given"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the user is reconciled"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaUserSpec {
    /// How the user authenticates; without it the user has no credentials (ACLs and quotas
    /// only, for a principal another mechanism authenticates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<UserAuthentication>,
    /// The user's rights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization: Option<UserAuthorization>,
    /// Limits on the user's traffic and requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quotas: Option<UserQuotas>,
    /// Labels and annotations of the user's Secret (`secret.metadata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opaque_object")]
    pub template: Option<crate::common::OpaqueObject>,
}

/// How a user authenticates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct UserAuthentication {
    #[serde(rename = "type")]
    pub type_: UserAuthenticationType,
    /// For `scram-sha-512`: the password from a Secret; generated when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<UserPassword>,
    /// For `tls`: days the user's certificate is valid; the clients CA's `validityDays` when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub validity_days: Option<u32>,
    /// For `tls`: days before expiry when the certificate is renewed; the clients CA's
    /// `renewalDays` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub renewal_days: Option<u32>,
}

/// The user's authentication mechanism.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum UserAuthenticationType {
    /// A client certificate issued by the cluster's clients CA (principal `CN=<user>`).
    #[serde(rename = "tls")]
    Tls,
    /// A client certificate issued elsewhere, with subject `CN=<user>`; no Secret is made.
    #[serde(rename = "tls-external")]
    TlsExternal,
    /// SASL SCRAM-SHA-512 with a password.
    #[serde(rename = "scram-sha-512")]
    ScramSha512,
}

/// Where a SCRAM password comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserPassword {
    pub value_from: PasswordSource,
}

/// A password kept in a Secret of the user's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PasswordSource {
    pub secret_key_ref: SecretKeyRef,
}

/// A key of a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    pub name: String,
    pub key: String,
}

/// The user's rights.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct UserAuthorization {
    /// `simple`: Kafka ACLs.
    #[serde(rename = "type")]
    pub type_: UserAuthorizationType,
    /// The ACL rules.
    #[serde(default)]
    pub acls: Vec<AclRule>,
}

/// How a user's rights are given.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum UserAuthorizationType {
    /// Kafka ACLs.
    #[serde(rename = "simple")]
    Simple,
}

/// One ACL rule: what the user may (or may not) do on a resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AclRule {
    /// `allow` (the default) or `deny`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<AclRuleType>,
    pub resource: AclRuleResource,
    /// The operations the rule is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<AclRuleOperation>,
    /// Deprecated single operation (use `operations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<AclRuleOperation>,
    /// The client host the rule applies to; `*` (every host) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Allow or deny.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AclRuleType {
    Allow,
    Deny,
}

/// The resource of an ACL rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AclRuleResource {
    #[serde(rename = "type")]
    pub type_: AclResourceKind,
    /// The resource's name (not for `cluster`, which is `kafka-cluster`); `*` means every
    /// resource of the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `literal` (the default) or `prefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_type: Option<AclPatternType>,
}

/// What an ACL rule is about.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum AclResourceKind {
    Topic,
    Group,
    Cluster,
    TransactionalId,
}

/// How an ACL rule's name matches.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AclPatternType {
    Literal,
    Prefix,
}

/// An operation of an ACL rule (Kafka's names).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum AclRuleOperation {
    Read,
    Write,
    Create,
    Delete,
    Alter,
    Describe,
    ClusterAction,
    AlterConfigs,
    DescribeConfigs,
    IdempotentWrite,
    All,
}

/// Limits on a user (Kafka's client quotas for the `user` entity).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserQuotas {
    /// Bytes per second the user may produce, per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub producer_byte_rate: Option<i64>,
    /// Bytes per second the user may fetch, per broker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub consumer_byte_rate: Option<i64>,
    /// Percentage of a broker's request-handler and network threads' time the user may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub request_percentage: Option<i64>,
    /// Partition mutations (creations, deletions, additions) per second the user may cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub controller_mutation_rate: Option<f64>,
}

/// Observed state of a user.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = keep_unknown_fields)]
pub struct KafkaUserStatus {
    /// Status conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The user's name in Kafka: `CN=<name>` for certificate users, `<name>` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The Secret with the user's credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}
