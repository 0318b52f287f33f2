//! What went wrong, in words for the person at the terminal.

/// What went wrong, in words for the person at the terminal.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("invalid central address {address:?}: {reason}")]
    Address { address: String, reason: String },
    #[error("cannot connect to central at {address}: {source} (is it running? see --central)")]
    Connect {
        address: String,
        source: tonic::transport::Error,
    },
    #[error("central answered with an error: {} ({:?})", .0.message(), .0.code())]
    Call(#[from] tonic::Status),
    #[error("refused: {0}")]
    Refused(String),
    #[error("cannot use the kubeconfig: {0}")]
    Kubeconfig(String),
    #[error("the member cluster's apiserver answered with an error: {0}")]
    Kube(kube::Error),
}

/// A Kubernetes error in words for the person at the terminal: RBAC's 403 is a refusal that
/// says what the command `needs`.
pub fn refused_by_kubernetes(e: kube::Error, needs: &str) -> CliError {
    match &e {
        kube::Error::Api(s) if s.code == 403 => {
            CliError::Refused(format!("Kubernetes refused: {} ({needs})", s.message))
        }
        _ => CliError::Kube(e),
    }
}
