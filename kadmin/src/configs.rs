//! Topic and broker configuration: DescribeConfigs and IncrementalAlterConfigs, routed to the
//! broker whose own configuration is asked for.

use std::fmt;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{ApiKey, DescribeConfigsRequest, IncrementalAlterConfigsRequest};

use crate::client::{AdminClient, Retry, Target};
use crate::error::{Error, KafkaError};

/// Whose configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConfigResource {
    Topic(String),
    /// One broker's configuration (sent to that broker).
    Broker(i32),
    /// The cluster-wide dynamic broker default (resource name "").
    BrokerDefault,
}

impl ConfigResource {
    fn resource_type(&self) -> i8 {
        match self {
            ConfigResource::Topic(_) => 2,
            ConfigResource::Broker(_) | ConfigResource::BrokerDefault => 4,
        }
    }

    fn resource_name(&self) -> String {
        match self {
            ConfigResource::Topic(name) => name.clone(),
            ConfigResource::Broker(id) => id.to_string(),
            ConfigResource::BrokerDefault => String::new(),
        }
    }

    /// A broker's own configuration is only known to that broker.
    fn target(&self) -> Target {
        match self {
            ConfigResource::Broker(id) => Target::Broker(*id),
            _ => Target::Any,
        }
    }
}

impl fmt::Display for ConfigResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigResource::Topic(name) => write!(f, "topic {name}"),
            ConfigResource::Broker(id) => write!(f, "broker {id}"),
            ConfigResource::BrokerDefault => f.write_str("broker default"),
        }
    }
}

/// Where a config value comes from (Kafka's `ConfigSource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    DynamicTopic,
    DynamicBroker,
    DynamicDefaultBroker,
    StaticBroker,
    Default,
    DynamicBrokerLogger,
    ClientMetrics,
    Group,
    Unknown(i8),
}

impl ConfigSource {
    pub fn from_code(code: i8) -> ConfigSource {
        match code {
            1 => ConfigSource::DynamicTopic,
            2 => ConfigSource::DynamicBroker,
            3 => ConfigSource::DynamicDefaultBroker,
            4 => ConfigSource::StaticBroker,
            5 => ConfigSource::Default,
            6 => ConfigSource::DynamicBrokerLogger,
            7 => ConfigSource::ClientMetrics,
            8 => ConfigSource::Group,
            other => ConfigSource::Unknown(other),
        }
    }

    /// Kafka's name for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            ConfigSource::DynamicTopic => "DYNAMIC_TOPIC_CONFIG",
            ConfigSource::DynamicBroker => "DYNAMIC_BROKER_CONFIG",
            ConfigSource::DynamicDefaultBroker => "DYNAMIC_DEFAULT_BROKER_CONFIG",
            ConfigSource::StaticBroker => "STATIC_BROKER_CONFIG",
            ConfigSource::Default => "DEFAULT_CONFIG",
            ConfigSource::DynamicBrokerLogger => "DYNAMIC_BROKER_LOGGER_CONFIG",
            ConfigSource::ClientMetrics => "CLIENT_METRICS_CONFIG",
            ConfigSource::Group => "GROUP_CONFIG",
            ConfigSource::Unknown(_) => "UNKNOWN",
        }
    }
}

/// One configuration entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    /// `None` for sensitive values and unset ones.
    pub value: Option<String>,
    pub source: ConfigSource,
    /// The value is Kafka's built-in default (`source == Default`).
    pub is_default: bool,
    pub read_only: bool,
    pub sensitive: bool,
}

/// The configuration of one resource.
#[derive(Debug, Clone)]
pub struct ResourceConfigs {
    pub resource: ConfigResource,
    /// Sorted by name. [`Error::UnknownTopic`] for a topic that does not exist.
    pub result: Result<Vec<ConfigEntry>, Error>,
}

impl ResourceConfigs {
    /// The entry named `name`, when described.
    pub fn get(&self, name: &str) -> Option<&ConfigEntry> {
        self.result.as_ref().ok()?.iter().find(|e| e.name == name)
    }
}

/// One change of an incremental alteration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigOp {
    Set {
        name: String,
        value: String,
    },
    /// Back to the inherited value.
    Delete {
        name: String,
    },
}

impl ConfigOp {
    pub fn set(name: impl Into<String>, value: impl Into<String>) -> ConfigOp {
        ConfigOp::Set {
            name: name.into(),
            value: value.into(),
        }
    }

    pub fn delete(name: impl Into<String>) -> ConfigOp {
        ConfigOp::Delete { name: name.into() }
    }

    fn to_request(&self) -> AlterableConfig {
        match self {
            ConfigOp::Set { name, value } => AlterableConfig::default()
                .with_name(name.clone().into())
                .with_config_operation(0)
                .with_value(Some(value.clone().into())),
            ConfigOp::Delete { name } => AlterableConfig::default()
                .with_name(name.clone().into())
                .with_config_operation(1)
                // The message default is Some(""); DELETE carries no value.
                .with_value(None),
        }
    }
}

/// The changes for one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    pub resource: ConfigResource,
    pub ops: Vec<ConfigOp>,
}

/// The outcome for one resource of [`AdminClient::incremental_alter_configs`].
#[derive(Debug, Clone)]
pub struct AlterConfigsResult {
    pub resource: ConfigResource,
    pub result: Result<(), Error>,
}

/// Splits items into one batch per target, keeping each item's position.
fn by_target<T>(
    items: &[T],
    resource: impl Fn(&T) -> &ConfigResource,
) -> Vec<(Target, Vec<usize>)> {
    let mut batches: Vec<(Target, Vec<usize>)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let target = resource(item).target();
        match batches.iter_mut().find(|(t, _)| *t == target) {
            Some((_, positions)) => positions.push(i),
            None => batches.push((target, vec![i])),
        }
    }
    batches
}

fn lookup_key(resource_type: i8, name: &str) -> (i8, String) {
    (resource_type, name.to_owned())
}

impl AdminClient {
    /// Describes the configuration of each resource; results in the order given. A broker's own
    /// configuration is asked from that broker; topics and the broker default from any broker.
    ///
    /// Retry: a read, retried on every transient failure.
    pub async fn describe_configs(
        &self,
        resources: &[ConfigResource],
    ) -> Result<Vec<ResourceConfigs>, Error> {
        let mut results: Vec<Option<ResourceConfigs>> = vec![None; resources.len()];
        for (target, positions) in by_target(resources, |r| r) {
            let request = DescribeConfigsRequest::default().with_resources(
                positions
                    .iter()
                    .map(|&i| {
                        DescribeConfigsResource::default()
                            .with_resource_type(resources[i].resource_type())
                            .with_resource_name(resources[i].resource_name().into())
                            .with_configuration_keys(None)
                    })
                    .collect(),
            );
            let response = self.call(target, Retry::Always, 1, &request).await?;
            let mut answers: std::collections::BTreeMap<(i8, String), _> = response
                .results
                .into_iter()
                .map(|r| (lookup_key(r.resource_type, &r.resource_name), r))
                .collect();
            for i in positions {
                let resource = &resources[i];
                let key = lookup_key(resource.resource_type(), &resource.resource_name());
                let result = match answers.remove(&key) {
                    None => Err(crate::topics::missing(
                        ApiKey::DescribeConfigs,
                        &resource.to_string(),
                    )),
                    Some(r) => {
                        match KafkaError::from_code(r.error_code, r.error_message.as_ref()) {
                            Some(kafka) => Err(Error::from_kafka(ApiKey::DescribeConfigs, kafka)),
                            None => {
                                let mut entries: Vec<ConfigEntry> = r
                                    .configs
                                    .into_iter()
                                    .map(|c| {
                                        let source = ConfigSource::from_code(c.config_source);
                                        ConfigEntry {
                                            name: c.name.to_string(),
                                            value: c.value.map(|v| v.to_string()),
                                            is_default: source == ConfigSource::Default,
                                            source,
                                            read_only: c.read_only,
                                            sensitive: c.is_sensitive,
                                        }
                                    })
                                    .collect();
                                entries.sort_by(|a, b| a.name.cmp(&b.name));
                                Ok(entries)
                            }
                        }
                    }
                };
                results[i] = Some(ResourceConfigs {
                    resource: resource.clone(),
                    result,
                });
            }
        }
        Ok(results.into_iter().flatten().collect())
    }

    /// Applies SET / DELETE operations per resource; with `validate_only` Kafka only checks.
    /// Results per resource, in the order given.
    ///
    /// Retry: every transient failure, including a timeout after sending: SET and DELETE land
    /// in the same state when repeated (APPEND / SUBTRACT, which would not, are not offered).
    pub async fn incremental_alter_configs(
        &self,
        changes: &[ConfigChange],
        validate_only: bool,
    ) -> Result<Vec<AlterConfigsResult>, Error> {
        let mut results: Vec<Option<AlterConfigsResult>> = vec![None; changes.len()];
        for (target, positions) in by_target(changes, |c| &c.resource) {
            let request = IncrementalAlterConfigsRequest::default()
                .with_resources(
                    positions
                        .iter()
                        .map(|&i| {
                            let change = &changes[i];
                            AlterConfigsResource::default()
                                .with_resource_type(change.resource.resource_type())
                                .with_resource_name(change.resource.resource_name().into())
                                .with_configs(change.ops.iter().map(ConfigOp::to_request).collect())
                        })
                        .collect(),
                )
                .with_validate_only(validate_only);
            let response = self.call(target, Retry::Always, 0, &request).await?;
            let mut answers: std::collections::BTreeMap<(i8, String), _> = response
                .responses
                .into_iter()
                .map(|r| (lookup_key(r.resource_type, &r.resource_name), r))
                .collect();
            for i in positions {
                let resource = &changes[i].resource;
                let key = lookup_key(resource.resource_type(), &resource.resource_name());
                let result = match answers.remove(&key) {
                    None => Err(crate::topics::missing(
                        ApiKey::IncrementalAlterConfigs,
                        &resource.to_string(),
                    )),
                    Some(r) => {
                        match KafkaError::from_code(r.error_code, r.error_message.as_ref()) {
                            Some(kafka) => {
                                Err(Error::from_kafka(ApiKey::IncrementalAlterConfigs, kafka))
                            }
                            None => Ok(()),
                        }
                    }
                };
                results[i] = Some(AlterConfigsResult {
                    resource: resource.clone(),
                    result,
                });
            }
        }
        Ok(results.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn resources_map_to_kafka_types_names_and_targets() {
        let topic = ConfigResource::Topic("t".into());
        assert_eq!(
            (topic.resource_type(), topic.resource_name()),
            (2, "t".into())
        );
        assert_eq!(topic.target(), Target::Any);
        let broker = ConfigResource::Broker(2);
        assert_eq!(
            (broker.resource_type(), broker.resource_name()),
            (4, "2".into())
        );
        assert_eq!(broker.target(), Target::Broker(2));
        let default = ConfigResource::BrokerDefault;
        assert_eq!(
            (default.resource_type(), default.resource_name()),
            (4, String::new())
        );
        assert_eq!(default.target(), Target::Any);
    }

    #[test]
    fn batches_per_target_keep_positions() {
        let resources = [
            ConfigResource::Topic("a".into()),
            ConfigResource::Broker(1),
            ConfigResource::BrokerDefault,
            ConfigResource::Broker(1),
            ConfigResource::Broker(2),
        ];
        let batches = by_target(&resources, |r| r);
        assert_eq!(
            batches,
            [
                (Target::Any, vec![0, 2]),
                (Target::Broker(1), vec![1, 3]),
                (Target::Broker(2), vec![4]),
            ]
        );
    }

    #[test]
    fn ops_and_sources_use_kafkas_codes() {
        let set = ConfigOp::set("retention.ms", "1000").to_request();
        assert_eq!(set.config_operation, 0);
        assert_eq!(set.value.as_deref(), Some("1000"));
        let delete = ConfigOp::delete("retention.ms").to_request();
        assert_eq!((delete.config_operation, delete.value), (1, None));
        assert_eq!(ConfigSource::from_code(1).as_str(), "DYNAMIC_TOPIC_CONFIG");
        assert_eq!(ConfigSource::from_code(5), ConfigSource::Default);
        assert_eq!(ConfigSource::from_code(-1), ConfigSource::Unknown(-1));
    }
}
