//! Access control lists: DescribeAcls for one principal, CreateAcls and DeleteAcls of exact
//! bindings, with Kafka's resource, pattern, operation and permission codes typed.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{ApiKey, CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};
use kafka_protocol::protocol::StrBytes;

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

/// Kafka's code for "any" in filters (resource type, pattern, operation, permission).
const ANY: i8 = 1;

macro_rules! codes {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $name { $($variant),* }

        impl $name {
            /// Kafka's protocol code.
            pub fn code(self) -> i8 {
                match self { $(Self::$variant => $code),* }
            }

            /// The value of a protocol code, `None` for codes this client does not model.
            pub fn from_code(code: i8) -> Option<Self> {
                match code { $($code => Some(Self::$variant),)* _ => None }
            }
        }
    };
}

codes!(
    /// What an ACL is about.
    AclResourceType {
        Topic = 2,
        Group = 3,
        Cluster = 4,
        TransactionalId = 5,
        DelegationToken = 6,
        User = 7,
    }
);

codes!(
    /// How an ACL's resource name matches.
    PatternType {
        Literal = 3,
        Prefixed = 4,
    }
);

codes!(
    /// What an ACL allows or denies.
    AclOperation {
        All = 2,
        Read = 3,
        Write = 4,
        Create = 5,
        Delete = 6,
        Alter = 7,
        Describe = 8,
        ClusterAction = 9,
        DescribeConfigs = 10,
        AlterConfigs = 11,
        IdempotentWrite = 12,
        CreateTokens = 13,
        DescribeTokens = 14,
        TwoPhaseCommit = 15,
    }
);

codes!(
    /// Allow or deny.
    AclPermission {
        Deny = 2,
        Allow = 3,
    }
);

/// One ACL: `principal` from `host` may (or may not) do `operation` on the resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AclBinding {
    pub resource_type: AclResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:<name>`.
    pub principal: String,
    /// `*` for every host.
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

fn check(api: ApiKey, code: i16, message: Option<&StrBytes>) -> Result<(), Error> {
    match KafkaError::from_code(code, message) {
        None => Ok(()),
        Some(kafka) => Err(Error::from_kafka(api, kafka)),
    }
}

impl AdminClient {
    /// Every ACL of `principal`. ACLs whose codes this client does not model are left out
    /// (they are neither reported nor deleted).
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn describe_acls(&self, principal: &str) -> Result<Vec<AclBinding>, Error> {
        let request = DescribeAclsRequest::default()
            .with_resource_type_filter(ANY)
            .with_pattern_type_filter(ANY)
            .with_principal_filter(Some(text(principal)))
            .with_operation(ANY)
            .with_permission_type(ANY);
        let response = self.call(Target::Any, Retry::Always, 1, &request).await?;
        check(
            ApiKey::DescribeAcls,
            response.error_code,
            response.error_message.as_ref(),
        )?;
        let mut out = Vec::new();
        for resource in response.resources {
            let (Some(resource_type), Some(pattern_type)) = (
                AclResourceType::from_code(resource.resource_type),
                PatternType::from_code(resource.pattern_type),
            ) else {
                continue;
            };
            for acl in resource.acls {
                let (Some(operation), Some(permission)) = (
                    AclOperation::from_code(acl.operation),
                    AclPermission::from_code(acl.permission_type),
                ) else {
                    continue;
                };
                out.push(AclBinding {
                    resource_type,
                    resource_name: resource.resource_name.to_string(),
                    pattern_type,
                    principal: acl.principal.to_string(),
                    host: acl.host.to_string(),
                    operation,
                    permission,
                });
            }
        }
        out.sort();
        Ok(out)
    }

    /// Creates `acls` (creating one that exists is a no-op in Kafka).
    ///
    /// Retry: every transient failure (a repeated creation lands in the same state).
    pub async fn create_acls(&self, acls: &[AclBinding]) -> Result<(), Error> {
        if acls.is_empty() {
            return Ok(());
        }
        let creations = acls
            .iter()
            .map(|a| {
                AclCreation::default()
                    .with_resource_type(a.resource_type.code())
                    .with_resource_name(text(&a.resource_name))
                    .with_resource_pattern_type(a.pattern_type.code())
                    .with_principal(text(&a.principal))
                    .with_host(text(&a.host))
                    .with_operation(a.operation.code())
                    .with_permission_type(a.permission.code())
            })
            .collect();
        let request = CreateAclsRequest::default().with_creations(creations);
        let response = self.call(Target::Any, Retry::Always, 1, &request).await?;
        for result in &response.results {
            check(
                ApiKey::CreateAcls,
                result.error_code,
                result.error_message.as_ref(),
            )?;
        }
        Ok(())
    }

    /// Deletes exactly `acls` (each filter matches one binding).
    ///
    /// Retry: every transient failure (deleting what is gone matches nothing).
    pub async fn delete_acls(&self, acls: &[AclBinding]) -> Result<(), Error> {
        if acls.is_empty() {
            return Ok(());
        }
        let filters = acls
            .iter()
            .map(|a| {
                DeleteAclsFilter::default()
                    .with_resource_type_filter(a.resource_type.code())
                    .with_resource_name_filter(Some(text(&a.resource_name)))
                    .with_pattern_type_filter(a.pattern_type.code())
                    .with_principal_filter(Some(text(&a.principal)))
                    .with_host_filter(Some(text(&a.host)))
                    .with_operation(a.operation.code())
                    .with_permission_type(a.permission.code())
            })
            .collect();
        let request = DeleteAclsRequest::default().with_filters(filters);
        let response = self.call(Target::Any, Retry::Always, 1, &request).await?;
        for result in &response.filter_results {
            check(
                ApiKey::DeleteAcls,
                result.error_code,
                result.error_message.as_ref(),
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_none() {
        for op in [AclOperation::Read, AclOperation::IdempotentWrite] {
            assert_eq!(AclOperation::from_code(op.code()), Some(op));
        }
        assert_eq!(AclResourceType::Topic.code(), 2);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(AclPermission::Allow.code(), 3);
        assert_eq!(AclOperation::from_code(ANY), None);
        assert_eq!(PatternType::from_code(2), None, "MATCH is a filter only");
    }
}
