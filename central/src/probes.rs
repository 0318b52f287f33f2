//! Containers' health checks: kstretch's own checks, timed as a user's `livenessProbe` and
//! `readinessProbe` (Strimzi's `Probe`) say, and the start-up checks of Kafka nodes and Connect
//! workers. Pure.

use k8s_openapi::api::core::v1::Probe;
use kstretch_api::common;

/// Why a `Kafka` or `KafkaConnect` is not ready when a probe's timing cannot be used.
pub const REASON: &str = "InvalidProbe";

const STARTUP_PERIOD_SECONDS: i32 = 10;

/// The start-up allowance of a Kafka node, in seconds: a broker opens its listeners only once
/// it has recovered its logs and caught up with the metadata, which may take hours after an
/// unclean stop. Until then liveness is not checked, so a recovering node is not killed and
/// made to start over (Strimzi's liveness check only asks whether the JVM runs, to the same
/// end).
pub const KAFKA_NODE_START: i32 = 24 * 60 * 60;

/// The start-up allowance of a Connect worker, in seconds: it answers its health check once it
/// has joined its group and read its configuration, status and offsets topics, which takes
/// minutes on a busy machine or with a large offsets topic; one killed by liveness meanwhile
/// starts over from the beginning. A worker that cannot reach Kafka at all stops by itself.
pub const CONNECT_WORKER_START: i32 = 60 * 60;

/// The timing a resource asks of its containers' checks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asked<'a> {
    pub liveness: Option<&'a common::Probe>,
    pub readiness: Option<&'a common::Probe>,
}

/// `check` with each timing field the user set in place of kstretch's.
pub fn timed(mut check: Probe, user: Option<&common::Probe>) -> Probe {
    let Some(user) = user else {
        return check;
    };
    let fields = [
        (&mut check.initial_delay_seconds, user.initial_delay_seconds),
        (&mut check.timeout_seconds, user.timeout_seconds),
        (&mut check.period_seconds, user.period_seconds),
        (&mut check.success_threshold, user.success_threshold),
        (&mut check.failure_threshold, user.failure_threshold),
    ];
    for (ours, theirs) in fields {
        if theirs.is_some() {
            *ours = theirs;
        }
    }
    check
}

/// A start-up check: `check`'s action, patient for `seconds`.
pub fn startup(check: &Probe, seconds: i32) -> Probe {
    Probe {
        exec: check.exec.clone(),
        http_get: check.http_get.clone(),
        tcp_socket: check.tcp_socket.clone(),
        period_seconds: Some(STARTUP_PERIOD_SECONDS),
        failure_threshold: Some(seconds / STARTUP_PERIOD_SECONDS),
        ..Default::default()
    }
}

/// What is wrong with the liveness probe at `path`, if anything: Kubernetes refuses a liveness
/// check that needs more than one success.
pub fn invalid(path: &str, liveness: Option<&common::Probe>) -> Option<String> {
    let threshold = liveness?.success_threshold?;
    (threshold != 1).then(|| {
        format!(
            "{path}.livenessProbe.successThreshold is {threshold}: Kubernetes takes only 1 for a liveness check; remove it or set 1"
        )
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::TCPSocketAction;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    use super::*;

    fn ours() -> Probe {
        Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(9091),
                host: None,
            }),
            initial_delay_seconds: Some(60),
            period_seconds: Some(10),
            ..Default::default()
        }
    }

    #[test]
    fn a_users_timing_replaces_only_what_it_sets() {
        assert_eq!(timed(ours(), None), ours());
        let user = common::Probe {
            initial_delay_seconds: Some(5),
            failure_threshold: Some(6),
            ..Default::default()
        };
        let probe = timed(ours(), Some(&user));
        assert_eq!(probe.initial_delay_seconds, Some(5));
        assert_eq!(probe.failure_threshold, Some(6));
        assert_eq!(probe.period_seconds, Some(10), "kstretch's where unset");
        assert_eq!(
            probe.tcp_socket,
            ours().tcp_socket,
            "the check is kstretch's"
        );
    }

    #[test]
    fn a_node_starting_has_a_day_before_liveness_counts() {
        let probe = startup(&ours(), KAFKA_NODE_START);
        assert_eq!(probe.tcp_socket, ours().tcp_socket);
        let patience = probe.period_seconds.unwrap() * probe.failure_threshold.unwrap();
        assert_eq!(patience, 24 * 60 * 60);
        assert_eq!(probe.initial_delay_seconds, None);
    }

    #[test]
    fn a_liveness_check_needing_two_successes_is_refused_naming_the_field() {
        assert_eq!(invalid(".spec", None), None);
        let one = common::Probe {
            success_threshold: Some(1),
            ..Default::default()
        };
        assert_eq!(invalid(".spec", Some(&one)), None);
        let two = common::Probe {
            success_threshold: Some(2),
            ..Default::default()
        };
        let message = invalid(".spec.kafka", Some(&two)).unwrap();
        assert!(
            message.starts_with(".spec.kafka.livenessProbe.successThreshold is 2"),
            "{message}"
        );
    }
}
