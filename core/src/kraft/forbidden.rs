//! Which `Kafka.spec.kafka.config` options the user may set: Strimzi's forbidden prefixes and
//! their exceptions (`KafkaClusterSpec.FORBIDDEN_PREFIXES` / `FORBIDDEN_PREFIX_EXCEPTIONS` and
//! `ALLOWED_PER_LISTENER_CONFIGS` of Strimzi 1.2.0), so existing manifests behave the same.

use super::model::Listener;

/// Options kstretch owns (listeners, security, storage paths, KRaft identity) or that need
/// Strimzi-only plugins. Matched as prefixes of the lower-cased key.
pub const FORBIDDEN_PREFIXES: &[&str] = &[
    "listeners",
    "advertised.",
    "broker.",
    "listener.",
    "host.name",
    "port",
    "inter.broker.listener.name",
    "sasl.",
    "ssl.",
    "security.",
    "password.",
    "log.dir",
    "zookeeper.connect",
    "zookeeper.set.acl",
    "zookeeper.ssl",
    "zookeeper.clientCnxnSocket",
    "authorizer.",
    "super.user",
    "cruise.control.metrics.topic",
    "cruise.control.metrics.reporter.bootstrap.servers",
    "node.id",
    "process.roles",
    "controller.",
    "metadata.log.dir",
    "zookeeper.metadata.migration.enable",
    "client.quota.callback.static.kafka.admin.",
    "client.quota.callback.static.produce",
    "client.quota.callback.static.fetch",
    "client.quota.callback.static.storage.per.volume.limit.min.available.",
    "client.quota.callback.static.excluded.principal.name.list",
    "prometheus.metrics.reporter.",
    "cordoned.log.dirs",
];

/// Keys allowed although a forbidden prefix matches them. Matched exactly (case-sensitive, as
/// Strimzi does).
pub const FORBIDDEN_PREFIX_EXCEPTIONS: &[&str] = &[
    "zookeeper.connection.timeout.ms",
    "sasl.server.max.receive.size",
    "ssl.cipher.suites",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.secure.random.implementation",
    "cruise.control.metrics.topic.num.partitions",
    "cruise.control.metrics.topic.replication.factor",
    "cruise.control.metrics.topic.retention.ms",
    "cruise.control.metrics.topic.auto.create.retries",
    "cruise.control.metrics.topic.auto.create.timeout.ms",
    "cruise.control.metrics.topic.min.insync.replicas",
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "controller.socket.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
];

/// Per-listener options a user may set for each of their listeners, as
/// `listener.name.<name>-<port>.<option>`.
pub const ALLOWED_PER_LISTENER_CONFIGS: &[&str] = &[
    "connections.max.reauth.ms",
    "max.connections",
    "max.connection.creation.rate",
];

/// Whether the user may set `key` given the cluster's listeners.
pub fn is_allowed(key: &str, listeners: &[Listener]) -> bool {
    let lower = key.to_lowercase();
    if !FORBIDDEN_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    if FORBIDDEN_PREFIX_EXCEPTIONS.contains(&key) {
        return true;
    }
    // Strimzi lists `listener.name.<name>-<port>.<option>` with the resource's (lower-case)
    // listener name as exceptions, so only those exact keys pass.
    listeners.iter().any(|l| {
        ALLOWED_PER_LISTENER_CONFIGS
            .iter()
            .any(|option| key == format!("listener.name.{}-{}.{option}", l.name, l.port))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kraft::model::ListenerKind;

    fn plain() -> Vec<Listener> {
        vec![Listener {
            name: "plain".into(),
            port: 9092,
            kind: ListenerKind::Internal,
            tls: false,
            authentication: Default::default(),
            custom_certificate: false,
            advertised: std::collections::BTreeMap::new(),
        }]
    }

    #[test]
    fn owned_options_are_forbidden() {
        for key in [
            "listeners",
            "advertised.listeners",
            "broker.id",
            "listener.security.protocol.map",
            "port",
            "inter.broker.listener.name",
            "sasl.enabled.mechanisms",
            "ssl.keystore.location",
            "security.inter.broker.protocol",
            "log.dirs",
            "log.dir",
            "node.id",
            "process.roles",
            "controller.quorum.voters",
            "controller.listener.names",
            "metadata.log.dir",
            "authorizer.class.name",
            "super.users",
            "NODE.ID",
            "Controller.Quorum.Voters",
            "cordoned.log.dirs",
        ] {
            assert!(!is_allowed(key, &plain()), "{key} should be forbidden");
        }
    }

    #[test]
    fn exceptions_and_ordinary_options_are_allowed() {
        for key in [
            "num.partitions",
            "min.insync.replicas",
            "log.retention.hours",
            "log.segment.bytes",
            "ssl.cipher.suites",
            "ssl.protocol",
            "ssl.enabled.protocols",
            "broker.session.timeout.ms",
            "controller.quorum.election.timeout.ms",
            "controller.quorum.fetch.timeout.ms",
            "controller.quorum.election.backoff.max.ms",
            "listener.name.plain-9092.max.connections",
            "listener.name.plain-9092.connections.max.reauth.ms",
        ] {
            assert!(is_allowed(key, &plain()), "{key} should be allowed");
        }
    }

    #[test]
    fn per_listener_options_only_for_existing_listeners() {
        assert!(!is_allowed(
            "listener.name.tls-9093.max.connections",
            &plain()
        ));
        assert!(!is_allowed(
            "listener.name.plain-9092.ssl.keystore.location",
            &plain()
        ));
        // Exceptions are exact, as in Strimzi.
        assert!(!is_allowed("SSL.protocol", &plain()));
    }
}
