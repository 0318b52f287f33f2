//! Whether a `Kafka` is ready as central reports it, and whether it is *deployed*: the test
//! of tests whose pods are kwok's, which run no Kafka.

use kstretch_api::Kafka;

/// The `Ready=False` reason central gives when every pod is ready and current but Kafka does
/// not list every broker as live (kwok's pods never do).
pub const BROKERS_UNAVAILABLE: &str = "BrokersUnavailable";

/// The `Ready` condition central reports, if any.
pub fn ready_condition(k: &Kafka) -> Option<&kstretch_api::Condition> {
    k.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
}

/// `Ready=True`: the pods run and Kafka lists every broker as live.
pub fn kafka_ready(k: &Kafka) -> bool {
    ready_condition(k).is_some_and(|c| c.status == "True")
}

/// Everything kstretch deploys is in place, ready and current: `Ready=True`, or `Ready=False`
/// only because no broker answers, which is all a Kafka on kwok's pods can reach.
pub fn kafka_deployed(k: &Kafka) -> bool {
    ready_condition(k).is_some_and(|c| {
        c.status == "True"
            || (c.status == "False" && c.reason.as_deref() == Some(BROKERS_UNAVAILABLE))
    })
}
