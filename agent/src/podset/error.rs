//! Errors of one reconciliation, each with a stable reason (condition reason, metric label), and
//! the retry delays of the error policy.

use super::plan::{PodFailure, reason};

/// Why a reconciliation did not complete.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pod or podset cache has not completed its first list: acting now could delete or
    /// create on the basis of a partial view.
    #[error("the pod and podset caches have not synced yet")]
    NotSynced,
    /// The podset itself cannot be reconciled (no namespace or UID; never from the apiserver).
    #[error("invalid podset: {0}")]
    InvalidPodSet(String),
    /// Some pods failed; the others were reconciled and the status was written.
    #[error("{} pod(s) failed, first: {}", .0.len(), .0.first().map(|f| f.message.as_str()).unwrap_or(""))]
    Pods(Vec<PodFailure>),
    /// The status could not be written.
    #[error("cannot write the podset status: {0}")]
    Status(#[source] kube::Error),
    /// The podset's manual-rolling-update annotation, handed to its pods, could not be removed.
    #[error("cannot remove the podset's strimzi.io/manual-rolling-update annotation: {0}")]
    ManualRoll(#[source] kube::Error),
}

impl Error {
    /// A stable CamelCase word for conditions and metric labels.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::NotSynced => "CachesNotSynced",
            Error::InvalidPodSet(_) => "InvalidPodSet",
            Error::Pods(failures) => failures
                .first()
                .map(|f| f.reason)
                .unwrap_or(reason::KUBERNETES_API_ERROR),
            Error::Status(_) => "StatusUpdateFailed",
            Error::ManualRoll(_) => "ManualRollNotHandedOver",
        }
    }
}

/// How a failed request is classified for one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOutcome {
    /// The request did what it should, or there is nothing left to do (already there, already
    /// gone, or the precondition shows a newer object that the next pass will see).
    Settled,
    /// The apiserver refused the request itself; retrying the same request will not help until
    /// something changes (the podset, a quota, an admission policy).
    Rejected,
    /// Worth retrying: timeouts, throttling, server errors, connection problems.
    Transient,
}

/// Classifies a create request's error. 409 means the pod exists already (the cache lags).
pub fn classify_create(err: &kube::Error) -> RequestOutcome {
    match status_code(err) {
        Some(409) => RequestOutcome::Settled,
        Some(code) => classify_code(code),
        None => RequestOutcome::Transient,
    }
}

/// Classifies a delete or patch error: 404 is gone already; 409 is a failed precondition (the
/// pod changed or was replaced), which the event of that change will reconcile.
pub fn classify_change(err: &kube::Error) -> RequestOutcome {
    match status_code(err) {
        Some(404 | 409) => RequestOutcome::Settled,
        Some(code) => classify_code(code),
        None => RequestOutcome::Transient,
    }
}

fn classify_code(code: u16) -> RequestOutcome {
    match code {
        408 | 429 => RequestOutcome::Transient,
        400..=499 => RequestOutcome::Rejected,
        _ => RequestOutcome::Transient,
    }
}

/// The HTTP status of an apiserver error response, if the error is one.
pub fn status_code(err: &kube::Error) -> Option<u16> {
    match err {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The apiserver's own message for an error response, else the error's text.
pub fn apiserver_message(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

/// A per-pod failure from a failed request.
pub fn pod_failure(pod: &str, outcome: RequestOutcome, err: &kube::Error) -> PodFailure {
    let reason = match outcome {
        RequestOutcome::Rejected => reason::POD_REJECTED,
        RequestOutcome::Settled | RequestOutcome::Transient => reason::KUBERNETES_API_ERROR,
    };
    PodFailure {
        pod: pod.to_owned(),
        reason,
        message: apiserver_message(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure(message, "Invalid").with_code(code),
        ))
    }

    #[test]
    fn create_errors_are_classified() {
        assert_eq!(
            classify_create(&api_error(409, "exists")),
            RequestOutcome::Settled
        );
        for code in [400, 403, 404, 422] {
            assert_eq!(
                classify_create(&api_error(code, "no")),
                RequestOutcome::Rejected,
                "{code}"
            );
        }
        for code in [408, 429, 500, 503] {
            assert_eq!(
                classify_create(&api_error(code, "later")),
                RequestOutcome::Transient,
                "{code}"
            );
        }
    }

    #[test]
    fn delete_and_patch_errors_are_classified() {
        for code in [404, 409] {
            assert_eq!(
                classify_change(&api_error(code, "x")),
                RequestOutcome::Settled
            );
        }
        assert_eq!(
            classify_change(&api_error(403, "forbidden")),
            RequestOutcome::Rejected
        );
        assert_eq!(
            classify_change(&api_error(500, "boom")),
            RequestOutcome::Transient
        );
    }

    #[test]
    fn failures_carry_the_apiserver_message() {
        let err = api_error(
            422,
            "Pod \"p\" is invalid: spec.containers[0].name: Invalid value",
        );
        let f = pod_failure("p", classify_create(&err), &err);
        assert_eq!(f.reason, reason::POD_REJECTED);
        assert_eq!(
            f.message,
            "Pod \"p\" is invalid: spec.containers[0].name: Invalid value"
        );
        let e = Error::Pods(vec![f]);
        assert_eq!(e.reason(), reason::POD_REJECTED);
        assert!(e.to_string().starts_with("1 pod(s) failed, first: Pod"));
    }

    #[test]
    fn reasons_are_stable() {
        assert_eq!(Error::NotSynced.reason(), "CachesNotSynced");
        assert_eq!(Error::InvalidPodSet("x".into()).reason(), "InvalidPodSet");
        assert_eq!(Error::Pods(vec![]).reason(), reason::KUBERNETES_API_ERROR);
    }
}
