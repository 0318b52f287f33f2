//! What a `KafkaUser` asks for, read into what Kafka is told: the user name and principal, the
//! credentials to keep, every ACL binding and every quota, with Strimzi's user-operator
//! semantics (`CN=<name>` for certificate users, `kafka-cluster` for the cluster resource, host
//! `*`, one binding per operation). Pure.

use std::collections::BTreeMap;

use kstretch_api::KafkaUser;
use kstretch_api::user::{
    AclPatternType, AclResourceKind, AclRule, AclRuleOperation, AclRuleType, SecretKeyRef,
    UserAuthenticationType, UserQuotas,
};
use kstretch_kadmin::{AclBinding, AclOperation, AclPermission, AclResourceType, PatternType};
use kube::ResourceExt;

/// Kafka's name of the cluster resource.
const CLUSTER_RESOURCE: &str = "kafka-cluster";
/// Longest common name a certificate may have (X.520 `ub-common-name`).
const MAX_COMMON_NAME: usize = 64;

/// Kafka's client-quota keys, in `quotas` order.
pub const QUOTA_KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
];

/// The credentials a user keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credentials {
    /// None: ACLs and quotas only.
    None,
    /// A client certificate of the clients CA, in the user's Secret.
    Certificate {
        validity_days: Option<u32>,
        renewal_days: Option<u32>,
    },
    /// A certificate issued elsewhere; nothing is kept.
    External,
    /// A SCRAM-SHA-512 password, from the Secret key given or generated.
    Scram { from: Option<SecretKeyRef> },
}

/// What Kafka is told about one user.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// The user's name in Kafka (`status.username`).
    pub username: String,
    /// The name of the other kind (`CN=<name>` or `<name>`): a user whose authentication
    /// changed leaves no ACLs or quotas under it.
    pub other_username: String,
    pub credentials: Credentials,
    /// Every binding the principal is to have; any other binding of it is removed.
    pub acls: Vec<AclBinding>,
    /// Set quotas by key; the keys of [`QUOTA_KEYS`] not in here are removed.
    pub quotas: BTreeMap<String, f64>,
}

impl Desired {
    /// `User:<username>`.
    pub fn principal(&self) -> String {
        principal(&self.username)
    }
}

/// `User:<name>`.
pub fn principal(username: &str) -> String {
    format!("User:{username}")
}

/// Why a user cannot be reconciled as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    #[error(
        ".spec.authorization.acls[{index}] {problem}; fix the rule (operations: [Read, Write, ...], resource: {{type, name, patternType}})"
    )]
    Acl { index: usize, problem: String },
    #[error(
        "the user name {name:?} is longer than {MAX_COMMON_NAME} characters, which a certificate's common name cannot be; use a shorter KafkaUser name"
    )]
    NameTooLong { name: String },
    #[error(".spec.authentication: {0}")]
    Authentication(String),
}

impl Invalid {
    pub fn reason(&self) -> &'static str {
        match self {
            Invalid::Acl { .. } => "InvalidAcl",
            Invalid::NameTooLong { .. } => "InvalidUserName",
            Invalid::Authentication(_) => "InvalidAuthentication",
        }
    }
}

/// Reads `user`.
pub fn desired(user: &KafkaUser) -> Result<Desired, Invalid> {
    let name = user.name_any();
    let authentication = user.spec.authentication.as_ref();
    let credentials = match authentication.map(|a| a.type_) {
        None => Credentials::None,
        Some(UserAuthenticationType::Tls) => {
            let a = authentication.map(|a| (a.validity_days, a.renewal_days));
            let (validity_days, renewal_days) = a.unwrap_or_default();
            if let (Some(v), Some(r)) = (validity_days, renewal_days)
                && r >= v
            {
                return Err(Invalid::Authentication(format!(
                    "renewalDays ({r}) must be less than validityDays ({v})"
                )));
            }
            Credentials::Certificate {
                validity_days,
                renewal_days,
            }
        }
        Some(UserAuthenticationType::TlsExternal) => Credentials::External,
        Some(UserAuthenticationType::ScramSha512) => Credentials::Scram {
            from: authentication
                .and_then(|a| a.password.as_ref())
                .map(|p| p.value_from.secret_key_ref.clone()),
        },
    };
    let by_certificate = matches!(
        credentials,
        Credentials::Certificate { .. } | Credentials::External
    );
    if by_certificate && name.chars().count() > MAX_COMMON_NAME {
        return Err(Invalid::NameTooLong { name });
    }
    let (username, other_username) = if by_certificate {
        (format!("CN={name}"), name.clone())
    } else {
        (name.clone(), format!("CN={name}"))
    };
    let principal = principal(&username);
    let mut acls = Vec::new();
    for (index, rule) in user
        .spec
        .authorization
        .iter()
        .flat_map(|a| &a.acls)
        .enumerate()
    {
        acls.extend(bindings(&principal, rule).map_err(|problem| Invalid::Acl { index, problem })?);
    }
    acls.sort();
    acls.dedup();
    Ok(Desired {
        username,
        other_username,
        credentials,
        acls,
        quotas: quotas(user.spec.quotas.as_ref()),
    })
}

/// One binding per operation of `rule`.
fn bindings(principal: &str, rule: &AclRule) -> Result<Vec<AclBinding>, String> {
    let operations: Vec<AclRuleOperation> = match (&rule.operation, rule.operations.as_slice()) {
        (Some(_), [_, ..]) => {
            return Err("sets both operation and operations: use operations only".to_owned());
        }
        (Some(op), []) => vec![*op],
        (None, []) => return Err("has no operations".to_owned()),
        (None, ops) => ops.to_vec(),
    };
    let resource = &rule.resource;
    let (resource_type, resource_name) = match resource.type_ {
        AclResourceKind::Cluster => (AclResourceType::Cluster, CLUSTER_RESOURCE.to_owned()),
        kind => {
            let name = resource
                .name
                .as_deref()
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| {
                    format!("has a {kind:?} resource without a name (use \"*\" for every one)")
                })?;
            let resource_type = match kind {
                AclResourceKind::Topic => AclResourceType::Topic,
                AclResourceKind::Group => AclResourceType::Group,
                _ => AclResourceType::TransactionalId,
            };
            (resource_type, name.to_owned())
        }
    };
    let pattern_type = match (resource.type_, resource.pattern_type) {
        (AclResourceKind::Cluster, _) | (_, None | Some(AclPatternType::Literal)) => {
            PatternType::Literal
        }
        (_, Some(AclPatternType::Prefix)) => PatternType::Prefixed,
    };
    let permission = match rule.type_ {
        None | Some(AclRuleType::Allow) => AclPermission::Allow,
        Some(AclRuleType::Deny) => AclPermission::Deny,
    };
    let host = rule
        .host
        .as_deref()
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("*");
    Ok(operations
        .into_iter()
        .map(|op| AclBinding {
            resource_type,
            resource_name: resource_name.clone(),
            pattern_type,
            principal: principal.to_owned(),
            host: host.to_owned(),
            operation: operation(op),
            permission,
        })
        .collect())
}

fn operation(op: AclRuleOperation) -> AclOperation {
    match op {
        AclRuleOperation::Read => AclOperation::Read,
        AclRuleOperation::Write => AclOperation::Write,
        AclRuleOperation::Create => AclOperation::Create,
        AclRuleOperation::Delete => AclOperation::Delete,
        AclRuleOperation::Alter => AclOperation::Alter,
        AclRuleOperation::Describe => AclOperation::Describe,
        AclRuleOperation::ClusterAction => AclOperation::ClusterAction,
        AclRuleOperation::AlterConfigs => AclOperation::AlterConfigs,
        AclRuleOperation::DescribeConfigs => AclOperation::DescribeConfigs,
        AclRuleOperation::IdempotentWrite => AclOperation::IdempotentWrite,
        AclRuleOperation::All => AclOperation::All,
    }
}

/// The quotas set, by Kafka key.
fn quotas(quotas: Option<&UserQuotas>) -> BTreeMap<String, f64> {
    let Some(q) = quotas else {
        return BTreeMap::new();
    };
    #[allow(clippy::cast_precision_loss)]
    let values = [
        q.producer_byte_rate.map(|v| v as f64),
        q.consumer_byte_rate.map(|v| v as f64),
        q.request_percentage.map(|v| v as f64),
        q.controller_mutation_rate,
    ];
    QUOTA_KEYS
        .iter()
        .zip(values)
        .filter_map(|(k, v)| Some(((*k).to_owned(), v?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn user(name: &str, spec: Value) -> KafkaUser {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
            "metadata": {"name": name, "namespace": "ns", "labels": {"strimzi.io/cluster": "k"}},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn certificate_users_are_cn_and_scram_users_their_name() {
        let tls = desired(&user("alice", json!({"authentication": {"type": "tls"}}))).unwrap();
        assert_eq!(
            (tls.username.as_str(), tls.other_username.as_str()),
            ("CN=alice", "alice")
        );
        assert_eq!(tls.principal(), "User:CN=alice");
        let ext = desired(&user(
            "ext",
            json!({"authentication": {"type": "tls-external"}}),
        ))
        .unwrap();
        assert_eq!(
            (ext.username.as_str(), ext.credentials),
            ("CN=ext", Credentials::External)
        );
        let scram = desired(&user(
            "bob",
            json!({"authentication": {"type": "scram-sha-512",
            "password": {"valueFrom": {"secretKeyRef": {"name": "pw", "key": "p"}}}}}),
        ))
        .unwrap();
        assert_eq!(scram.username, "bob");
        assert_eq!(
            scram.credentials,
            Credentials::Scram {
                from: Some(SecretKeyRef {
                    name: "pw".into(),
                    key: "p".into()
                })
            }
        );
        let none = desired(&user("carol", json!({}))).unwrap();
        assert_eq!(
            (none.username.as_str(), none.credentials),
            ("carol", Credentials::None)
        );
    }

    #[test]
    fn acl_rules_become_one_binding_per_operation_with_strimzis_defaults() {
        let d = desired(&user("alice", json!({
            "authentication": {"type": "tls"},
            "authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read", "Describe"]},
                {"resource": {"type": "group", "name": "app-", "patternType": "prefix"},
                 "operation": "Read", "type": "deny", "host": "10.0.0.1"},
                {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]}
            ]}})))
        .unwrap();
        let summary: Vec<(
            AclResourceType,
            &str,
            PatternType,
            &str,
            AclOperation,
            AclPermission,
        )> = d
            .acls
            .iter()
            .map(|a| {
                assert_eq!(a.principal, "User:CN=alice");
                (
                    a.resource_type,
                    a.resource_name.as_str(),
                    a.pattern_type,
                    a.host.as_str(),
                    a.operation,
                    a.permission,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    AclResourceType::Topic,
                    "orders",
                    PatternType::Literal,
                    "*",
                    AclOperation::Read,
                    AclPermission::Allow
                ),
                (
                    AclResourceType::Topic,
                    "orders",
                    PatternType::Literal,
                    "*",
                    AclOperation::Describe,
                    AclPermission::Allow
                ),
                (
                    AclResourceType::Group,
                    "app-",
                    PatternType::Prefixed,
                    "10.0.0.1",
                    AclOperation::Read,
                    AclPermission::Deny
                ),
                (
                    AclResourceType::Cluster,
                    "kafka-cluster",
                    PatternType::Literal,
                    "*",
                    AclOperation::IdempotentWrite,
                    AclPermission::Allow
                ),
            ]
        );
    }

    #[test]
    fn bad_rules_and_names_are_refused_naming_what_to_fix() {
        for (spec, reason, text) in [
            (
                json!({"authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": "t"}}]}}),
                "InvalidAcl",
                "acls[0] has no operations",
            ),
            (
                json!({"authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": "t"}, "operations": ["Read"]},
                {"resource": {"type": "topic"}, "operations": ["Read"]}]}}),
                "InvalidAcl",
                "acls[1] has a Topic resource without a name",
            ),
            (
                json!({"authorization": {"type": "simple", "acls": [
                {"resource": {"type": "topic", "name": "t"}, "operation": "Read", "operations": ["Write"]}]}}),
                "InvalidAcl",
                "both operation and operations",
            ),
            (
                json!({"authentication": {"type": "tls", "validityDays": 10, "renewalDays": 10}}),
                "InvalidAuthentication",
                "renewalDays (10)",
            ),
        ] {
            let err = desired(&user("u", spec)).unwrap_err();
            assert_eq!(err.reason(), reason, "{err}");
            assert!(err.to_string().contains(text), "{err}");
        }
        let long = "a".repeat(65);
        let err = desired(&user(&long, json!({"authentication": {"type": "tls"}}))).unwrap_err();
        assert_eq!(err.reason(), "InvalidUserName");
        // A SCRAM user's name is no certificate's common name.
        assert!(
            desired(&user(
                &long,
                json!({"authentication": {"type": "scram-sha-512"}})
            ))
            .is_ok()
        );
    }

    #[test]
    fn quotas_use_kafkas_keys_and_leave_out_what_is_not_set() {
        let d = desired(&user(
            "u",
            json!({"quotas": {"producerByteRate": 1024,
            "requestPercentage": 55, "controllerMutationRate": 0.5}}),
        ))
        .unwrap();
        assert_eq!(
            d.quotas,
            BTreeMap::from([
                ("controller_mutation_rate".to_owned(), 0.5),
                ("producer_byte_rate".to_owned(), 1024.0),
                ("request_percentage".to_owned(), 55.0),
            ])
        );
    }
}
