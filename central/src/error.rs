//! Why the reconciliation of a resource that owns objects in member clusters (`Kafka`,
//! `KafkaConnect`) failed, each cause with a stable reason for conditions and metrics. Only
//! transient causes are errors (retried with backoff); a resource the user must fix is reported
//! in its status and waits for a change instead.

use crate::link::DesiredError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("the desired state could not be published: {0}")]
    Desired(#[from] DesiredError),
    #[error("cannot serialize the status: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Error {
    /// Stable reason for conditions and the reconcile error metrics of `Kafka` and `KafkaConnect`.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube(_) => kstretch_api::condition::KUBERNETES_ERROR,
            Error::Desired(_) => "DesiredStateError",
            Error::Serialize(_) => "SerializationError",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_stable() {
        let e = Error::Desired(DesiredError::InvalidAlias("x y".into()));
        assert_eq!(e.reason(), "DesiredStateError");
        assert!(e.to_string().contains("x y"));
        let e = Error::Serialize(serde_json::from_str::<i32>("x").unwrap_err());
        assert_eq!(e.reason(), "SerializationError");
    }
}
