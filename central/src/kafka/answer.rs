//! The last step before a `Kafka` is `Ready`: Kafka itself, asked through the admin API, lists
//! every broker central runs as registered and heartbeating, under this `Kafka`'s cluster ID.
//! Pods that are ready are not enough: a readiness probe can pass while a broker cannot reach
//! the controllers, or a bootstrap address can lead to another cluster.

use std::collections::BTreeSet;

use kstretch_kadmin::ClusterDescription;

use super::view::KafkaView;

/// `Ready=False` reason when the brokers do not answer as they should.
pub const BROKERS_UNAVAILABLE: &str = "BrokersUnavailable";

/// `Ok` when Kafka, as `view` read it, answers with cluster ID `cluster_id` and every broker
/// of `expected` live; otherwise what is missing, as a condition message (pure).
pub fn brokers_answer(
    view: &KafkaView,
    cluster_id: &str,
    expected: &BTreeSet<i32>,
) -> Result<(), String> {
    if expected.is_empty() {
        return Ok(());
    }
    let Some(bootstrap) = view.bootstrap.as_deref() else {
        return Err("the brokers' addresses are not known yet".to_owned());
    };
    match &view.cluster {
        Ok(registered) => judge(&registered.description, bootstrap, cluster_id, expected),
        Err(e) => Err(format!(
            "no broker answered at {bootstrap}: {e}; the pods are ready, so check the brokers' logs"
        )),
    }
}

/// What a DescribeCluster answer says about `expected` (pure).
pub fn judge(
    described: &ClusterDescription,
    bootstrap: &str,
    cluster_id: &str,
    expected: &BTreeSet<i32>,
) -> Result<(), String> {
    if described.cluster_id != cluster_id {
        return Err(format!(
            "the brokers at {bootstrap} belong to Kafka cluster ID {}, not to this Kafka's {cluster_id}: the bootstrap address leads to another cluster (check {})",
            described.cluster_id,
            super::resolve::ADMIN_BOOTSTRAP_ANNOTATION
        ));
    }
    let live: BTreeSet<i32> = described
        .brokers
        .iter()
        .filter(|b| !b.fenced)
        .map(|b| b.id)
        .collect();
    let missing: Vec<i32> = expected.difference(&live).copied().collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "Kafka at {bootstrap} does not list brokers {missing:?} as live (it lists {:?}): they have not registered with the controllers or stopped heartbeating; check their logs",
            live.iter().collect::<Vec<_>>()
        ))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_kadmin::Broker;

    use super::*;

    fn described(cluster_id: &str, brokers: &[(i32, bool)]) -> ClusterDescription {
        ClusterDescription {
            cluster_id: cluster_id.to_owned(),
            controller_id: Some(0),
            brokers: brokers
                .iter()
                .map(|(id, fenced)| Broker {
                    id: *id,
                    host: "h".into(),
                    port: 9091,
                    rack: None,
                    fenced: *fenced,
                })
                .collect(),
        }
    }

    #[test]
    fn every_expected_broker_live_is_an_answer() {
        let d = described("abc", &[(0, false), (1, false), (2, false)]);
        assert_eq!(judge(&d, "b:9091", "abc", &BTreeSet::from([0, 2])), Ok(()));
    }

    #[test]
    fn a_missing_or_fenced_broker_is_named() {
        let d = described("abc", &[(0, false), (1, true)]);
        let err = judge(&d, "b:9091", "abc", &BTreeSet::from([0, 1, 2])).unwrap_err();
        assert!(err.contains("brokers [1, 2]"), "{err}");
        assert!(err.contains("it lists [0]"), "{err}");
    }

    #[test]
    fn another_clusters_brokers_are_not_an_answer() {
        let d = described("other", &[(0, false)]);
        let err = judge(&d, "b:9091", "abc", &BTreeSet::from([0])).unwrap_err();
        assert!(
            err.contains("cluster ID other, not to this Kafka's abc"),
            "{err}"
        );
        assert!(err.contains("kstretch.io/admin-bootstrap-servers"), "{err}");
    }
}
