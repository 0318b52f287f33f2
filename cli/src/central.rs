//! The connection to central's gRPC admin API.

use std::time::Duration;

use crate::error::CliError;

/// Connects to central with a deadline on connect and on every call.
pub async fn connect(
    address: &str,
    timeout: Duration,
) -> Result<tonic::transport::Channel, CliError> {
    let endpoint = tonic::transport::Endpoint::from_shared(address.to_owned())
        .map_err(|e| CliError::Address {
            address: address.to_owned(),
            reason: e.to_string(),
        })?
        .connect_timeout(timeout)
        .timeout(timeout);
    endpoint
        .connect()
        .await
        .map_err(|source| CliError::Connect {
            address: address.to_owned(),
            source,
        })
}
