//! The admin client's one error type, its stable reasons, and Kafka error codes by protocol name.

use std::fmt;
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::StrBytes;

/// An error code a broker returned, with Kafka's message for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaError {
    /// The typed code; compare with e.g. `ResponseError::TopicAlreadyExists`.
    pub error: ResponseError,
    /// The broker's message, when it sent one.
    pub message: Option<String>,
}

impl KafkaError {
    /// `None` for code 0 (no error).
    pub fn from_code(code: i16, message: Option<&StrBytes>) -> Option<KafkaError> {
        ResponseError::try_from_code(code).map(|error| KafkaError {
            error,
            message: message.map(|m| m.to_string()).filter(|m| !m.is_empty()),
        })
    }

    /// The numeric protocol code.
    pub fn code(&self) -> i16 {
        self.error.code()
    }

    /// The protocol name, as Kafka spells it (`TOPIC_ALREADY_EXISTS`).
    pub fn name(&self) -> String {
        code_name(self.error)
    }

    /// Whether the protocol marks this code retriable.
    pub fn is_retriable(&self) -> bool {
        self.error.is_retriable()
    }
}

impl fmt::Display for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

/// Kafka's `Errors` enum name for a code. kafka-protocol names its variants in CamelCase
/// after the same Java names, so converting back is exact for every known code.
pub fn code_name(error: ResponseError) -> String {
    if let ResponseError::Unknown(code) = error {
        return format!("UNKNOWN_CODE_{code}");
    }
    let camel = format!("{error:?}");
    let mut name = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

/// Everything the admin client can fail with. `reason()` is stable for status conditions and
/// metrics; the Display text is for people.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot work (no bootstrap address, bad address, ...).
    #[error("invalid Kafka admin client configuration: {0}")]
    Config(String),
    /// No connection could be opened (refused, DNS failure, connect timeout). The request was
    /// not sent.
    #[error("cannot reach Kafka at {address}: {message}")]
    Unreachable { address: String, message: String },
    /// The broker did not answer in time. The request may or may not have been applied.
    #[error("{api:?} to {address} timed out after {after:?}")]
    Timeout {
        api: ApiKey,
        address: String,
        after: Duration,
    },
    /// The connection broke after the request was (possibly) sent. The request may or may not
    /// have been applied.
    #[error("connection to {address} lost during {api:?}: {message}")]
    Disconnected {
        api: ApiKey,
        address: String,
        message: String,
    },
    /// Neither the broker nor this client support a version of `api` that can do what was asked
    /// (for example DescribeCluster v2 for fenced brokers before Kafka 4.0).
    #[error("{api:?} is not supported: {detail}")]
    Unsupported { api: ApiKey, detail: String },
    /// A request had to go to a broker that is not in the cluster metadata.
    #[error("broker {0} is not in the cluster metadata (not registered, fenced or unknown)")]
    UnknownBroker(i32),
    /// BROKER_ID_NOT_REGISTERED: for UnregisterBroker this means "already done".
    #[error("{api:?}: broker not registered: {kafka}")]
    BrokerNotRegistered { api: ApiKey, kafka: KafkaError },
    /// TOPIC_ALREADY_EXISTS.
    #[error("{api:?}: topic already exists: {kafka}")]
    TopicAlreadyExists { api: ApiKey, kafka: KafkaError },
    /// UNKNOWN_TOPIC_ID or UNKNOWN_TOPIC_OR_PARTITION.
    #[error("{api:?}: unknown topic: {kafka}")]
    UnknownTopic { api: ApiKey, kafka: KafkaError },
    /// Any other error code Kafka returned.
    #[error("{api:?} failed: {kafka}")]
    Kafka { api: ApiKey, kafka: KafkaError },
    /// The broker sent something this client cannot read (or the client cannot encode the
    /// request): a bug or not a Kafka broker.
    #[error("Kafka protocol error with {address}: {message}")]
    Protocol { address: String, message: String },
}

impl Error {
    /// A stable, CamelCase reason, for conditions, events and metrics labels.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Config(_) => "KafkaConfigInvalid",
            Error::Unreachable { .. } => "KafkaUnreachable",
            Error::Timeout { .. } => "KafkaTimeout",
            Error::Disconnected { .. } => "KafkaDisconnected",
            Error::Unsupported { .. } => "KafkaUnsupported",
            Error::UnknownBroker(_) => "KafkaBrokerUnknown",
            Error::BrokerNotRegistered { .. } => "KafkaBrokerNotRegistered",
            Error::TopicAlreadyExists { .. } => "KafkaTopicAlreadyExists",
            Error::UnknownTopic { .. } => "KafkaUnknownTopic",
            Error::Kafka { .. } => "KafkaError",
            Error::Protocol { .. } => "KafkaProtocolError",
        }
    }

    /// The Kafka error code behind this error, when Kafka returned one.
    pub fn kafka(&self) -> Option<&KafkaError> {
        match self {
            Error::BrokerNotRegistered { kafka, .. }
            | Error::TopicAlreadyExists { kafka, .. }
            | Error::UnknownTopic { kafka, .. }
            | Error::Kafka { kafka, .. } => Some(kafka),
            _ => None,
        }
    }

    /// Kafka's name for the error code (`NOT_CONTROLLER`), when Kafka returned one.
    pub fn kafka_code_name(&self) -> Option<String> {
        self.kafka().map(KafkaError::name)
    }

    /// Maps a Kafka error code to the variant callers match on.
    pub fn from_kafka(api: ApiKey, kafka: KafkaError) -> Error {
        match kafka.error {
            ResponseError::BrokerIdNotRegistered => Error::BrokerNotRegistered { api, kafka },
            ResponseError::TopicAlreadyExists => Error::TopicAlreadyExists { api, kafka },
            ResponseError::UnknownTopicId | ResponseError::UnknownTopicOrPartition => {
                Error::UnknownTopic { api, kafka }
            }
            ResponseError::UnsupportedVersion => Error::Unsupported {
                api,
                detail: kafka.to_string(),
            },
            _ => Error::Kafka { api, kafka },
        }
    }

    /// Transient failures worth another attempt (subject to the request's retry policy).
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Error::Unreachable { .. } | Error::Timeout { .. } | Error::Disconnected { .. } => true,
            Error::Kafka { kafka, .. } | Error::UnknownTopic { kafka, .. } => kafka.is_retriable(),
            _ => false,
        }
    }

    /// Kafka said the request was not applied, so even a non-idempotent request can be sent
    /// again: the broker or controller refused it before acting. NOT_LEADER_OR_FOLLOWER is
    /// what a controller that is not the quorum's leader answers a voter change a broker
    /// forwarded to it (that broker's view of the leader was stale): another broker may
    /// forward it to the leader.
    pub(crate) fn is_not_applied(&self) -> bool {
        matches!(
            self.kafka().map(|k| k.error),
            Some(
                ResponseError::NotController
                    | ResponseError::BrokerNotAvailable
                    | ResponseError::NotLeaderOrFollower
            )
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn code_names_are_kafkas() {
        let name = |code: i16| code_name(ResponseError::try_from_code(code).unwrap());
        assert_eq!(name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(name(102), "BROKER_ID_NOT_REGISTERED");
        assert_eq!(name(41), "NOT_CONTROLLER");
        assert_eq!(name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(name(56), "KAFKA_STORAGE_ERROR");
        assert_eq!(name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(name(9999), "UNKNOWN_CODE_9999");
    }

    #[test]
    fn no_error_for_code_zero_and_empty_messages_dropped() {
        assert_eq!(KafkaError::from_code(0, None), None);
        let empty = StrBytes::from_static_str("");
        let e = KafkaError::from_code(41, Some(&empty)).unwrap();
        assert_eq!(e.message, None);
        assert_eq!(e.to_string(), "NOT_CONTROLLER (41)");
        let msg = StrBytes::from_static_str("topic x exists");
        let e = KafkaError::from_code(36, Some(&msg)).unwrap();
        assert_eq!(e.to_string(), "TOPIC_ALREADY_EXISTS (36): topic x exists");
    }

    #[test]
    fn kafka_codes_map_to_typed_variants() {
        let map = |code: i16| {
            Error::from_kafka(
                ApiKey::CreateTopics,
                KafkaError::from_code(code, None).unwrap(),
            )
        };
        assert!(matches!(map(102), Error::BrokerNotRegistered { .. }));
        assert_eq!(map(102).reason(), "KafkaBrokerNotRegistered");
        assert!(matches!(map(36), Error::TopicAlreadyExists { .. }));
        assert!(matches!(map(100), Error::UnknownTopic { .. }));
        assert!(matches!(map(3), Error::UnknownTopic { .. }));
        assert_eq!(map(35).reason(), "KafkaUnsupported");
        let other = map(40);
        assert_eq!(other.reason(), "KafkaError");
        assert_eq!(other.kafka_code_name().as_deref(), Some("INVALID_CONFIG"));
        // Every Kafka-code variant keeps the code name.
        assert_eq!(
            map(36).kafka_code_name().as_deref(),
            Some("TOPIC_ALREADY_EXISTS")
        );
    }

    #[test]
    fn transient_and_not_applied_classification() {
        let map = |code: i16| {
            Error::from_kafka(
                ApiKey::CreateTopics,
                KafkaError::from_code(code, None).unwrap(),
            )
        };
        assert!(map(41).is_transient());
        assert!(map(41).is_not_applied());
        assert!(map(6).is_not_applied()); // NOT_LEADER_OR_FOLLOWER
        assert!(map(7).is_transient()); // REQUEST_TIMED_OUT
        assert!(!map(7).is_not_applied());
        assert!(map(5).is_transient()); // LEADER_NOT_AVAILABLE
        assert!(!map(36).is_transient());
        assert!(!map(102).is_transient());
        let unreachable = Error::Unreachable {
            address: "a:1".into(),
            message: "refused".into(),
        };
        assert!(unreachable.is_transient());
        assert_eq!(unreachable.reason(), "KafkaUnreachable");
        assert_eq!(unreachable.kafka(), None);
        assert!(!Error::Config("x".into()).is_transient());
        assert!(
            !Error::Protocol {
                address: "a:1".into(),
                message: "bad".into()
            }
            .is_transient()
        );
    }
}
