//! Central's side of `ConnectCall`: a call to the REST API of Kafka Connect workers that run
//! in a member cluster, made there by that cluster's agent (sent and awaited through
//! [`super::calls`]). The connector operator's REST client uses it ([`crate::connector::rest`]).

use kstretch_proto::agent::v1::{CONNECT_CALLS, ConnectAnswer, ConnectCall};

use super::agents::AgentRecord;
use super::calls::Calls;

/// Connect calls in flight, shared by the streams and the connector operator.
pub type ConnectCalls = Calls<ConnectCall, ConnectAnswer>;

/// Whether the agent of `record` makes Connect calls (an older agent answers them with a
/// protocol error, never with Connect's answer).
pub fn makes_calls(record: &AgentRecord) -> bool {
    record.capabilities.iter().any(|c| c == CONNECT_CALLS)
}
