//! One connection to one broker: dialing, request framing, correlation IDs, response decoding
//! and API version negotiation (ApiVersions).

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{
    Decodable, Encodable, HeaderVersion, Message, StrBytes, VersionRange,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Error, KafkaError};
use crate::tls::Tls;

/// Largest response frame accepted. Admin responses are small; a huge size prefix means the
/// peer is not speaking Kafka (an HTTP or TLS endpoint), and reading it would exhaust memory.
pub(crate) const MAX_FRAME: usize = 64 * 1024 * 1024;

/// A request this client sends. kafka-protocol's own `Request` trait needs its `broker`
/// feature (server-side codecs), so the client-side pairing is declared here.
pub(crate) trait AdminRequest: Encodable + HeaderVersion + Message + Send + Sync {
    const KEY: ApiKey;
    type Response: Decodable + HeaderVersion + Send;
    /// The whole-response error code and message, where the response has one.
    fn top_error(_response: &Self::Response) -> (i16, Option<&StrBytes>) {
        (0, None)
    }
}

macro_rules! admin_requests {
    ($($req:ident => $resp:ident, $key:ident $(, |$r:ident| $err:expr)?;)*) => {$(
        impl AdminRequest for $req {
            const KEY: ApiKey = ApiKey::$key;
            type Response = $resp;
            $(fn top_error($r: &$resp) -> (i16, Option<&StrBytes>) { $err })?
        }
    )*};
}

admin_requests! {
    ApiVersionsRequest => ApiVersionsResponse, ApiVersions;
    MetadataRequest => MetadataResponse, Metadata, |r| (r.error_code, None);
    DescribeClusterRequest => DescribeClusterResponse, DescribeCluster,
        |r| (r.error_code, r.error_message.as_ref());
    UnregisterBrokerRequest => UnregisterBrokerResponse, UnregisterBroker,
        |r| (r.error_code, r.error_message.as_ref());
    DescribeConfigsRequest => DescribeConfigsResponse, DescribeConfigs;
    IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse, IncrementalAlterConfigs;
    DescribeQuorumRequest => DescribeQuorumResponse, DescribeQuorum,
        |r| (r.error_code, r.error_message.as_ref());
    CreateTopicsRequest => CreateTopicsResponse, CreateTopics;
    DeleteTopicsRequest => DeleteTopicsResponse, DeleteTopics;
    CreatePartitionsRequest => CreatePartitionsResponse, CreatePartitions;
    AlterPartitionReassignmentsRequest => AlterPartitionReassignmentsResponse,
        AlterPartitionReassignments, |r| (r.error_code, r.error_message.as_ref());
    ListPartitionReassignmentsRequest => ListPartitionReassignmentsResponse,
        ListPartitionReassignments, |r| (r.error_code, r.error_message.as_ref());
    DescribeAclsRequest => DescribeAclsResponse, DescribeAcls;
    CreateAclsRequest => CreateAclsResponse, CreateAcls;
    DeleteAclsRequest => DeleteAclsResponse, DeleteAcls;
    DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentials;
    AlterUserScramCredentialsRequest => AlterUserScramCredentialsResponse,
        AlterUserScramCredentials;
    DescribeClientQuotasRequest => DescribeClientQuotasResponse, DescribeClientQuotas;
    ElectLeadersRequest => ElectLeadersResponse, ElectLeaders, |r| (r.error_code, None);
    DescribeLogDirsRequest => DescribeLogDirsResponse, DescribeLogDirs, |r| (r.error_code, None);
    AlterClientQuotasRequest => AlterClientQuotasResponse, AlterClientQuotas;
    UpdateFeaturesRequest => UpdateFeaturesResponse, UpdateFeatures,
        |r| (r.error_code, r.error_message.as_ref());
    AddRaftVoterRequest => AddRaftVoterResponse, AddRaftVoter,
        |r| (r.error_code, r.error_message.as_ref());
    RemoveRaftVoterRequest => RemoveRaftVoterResponse, RemoveRaftVoter,
        |r| (r.error_code, r.error_message.as_ref());
    ListGroupsRequest => ListGroupsResponse, ListGroups, |r| (r.error_code, None);
    FindCoordinatorRequest => FindCoordinatorResponse, FindCoordinator;
    DescribeGroupsRequest => DescribeGroupsResponse, DescribeGroups;
    OffsetFetchRequest => OffsetFetchResponse, OffsetFetch;
    ListOffsetsRequest => ListOffsetsResponse, ListOffsets;
}

/// The byte stream under a connection: plaintext TCP or TLS over it, chosen in [`dial`].
pub(crate) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Opens the byte stream to `address` ("host:port").
pub(crate) async fn dial(
    address: &str,
    timeout: Duration,
    tls: Option<&Tls>,
) -> Result<Box<dyn Stream>, Error> {
    let unreachable = |message: String| Error::Unreachable {
        address: address.to_owned(),
        message,
    };
    let tcp = tokio::time::timeout(timeout, TcpStream::connect(address))
        .await
        .map_err(|_| unreachable(format!("connect timed out after {timeout:?}")))?
        .map_err(|e| unreachable(e.to_string()))?;
    // Requests are single small frames; do not let Nagle delay them.
    tcp.set_nodelay(true)
        .map_err(|e| unreachable(e.to_string()))?;
    match tls {
        None => Ok(Box::new(tcp)),
        Some(tls) => {
            let stream = tokio::time::timeout(timeout, tls.connect(address, tcp))
                .await
                .map_err(|_| unreachable(format!("TLS handshake timed out after {timeout:?}")))??;
            Ok(Box::new(stream))
        }
    }
}

/// A failed exchange. `sent` is false only when nothing of the request reached the socket, so
/// sending it again cannot apply it twice.
#[derive(Debug)]
pub(crate) struct Failure {
    pub error: Error,
    pub sent: bool,
}

impl Failure {
    fn unsent(error: Error) -> Failure {
        Failure { error, sent: false }
    }
    fn sent(error: Error) -> Failure {
        Failure { error, sent: true }
    }
}

/// An open, version-negotiated connection. Not shared: the client serializes exchanges on it.
pub(crate) struct Connection {
    address: String,
    stream: Box<dyn Stream>,
    client_id: StrBytes,
    next_correlation_id: i32,
    /// What the broker supports, by API key.
    versions: HashMap<i16, VersionRange>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.address)
            .field("apis", &self.versions.len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Wraps an open stream and negotiates versions. Errors here never sent a request the caller
    /// asked for, so they are all reported as not sent.
    pub(crate) async fn handshake(
        address: &str,
        stream: Box<dyn Stream>,
        client_id: &str,
    ) -> Result<Connection, Error> {
        let mut conn = Connection {
            address: address.to_owned(),
            stream,
            client_id: StrBytes::from_string(client_id.to_owned()),
            next_correlation_id: 0,
            versions: HashMap::new(),
        };
        conn.negotiate().await.map_err(|f| f.error)?;
        Ok(conn)
    }

    async fn negotiate(&mut self) -> Result<(), Failure> {
        let request = api_versions_request();
        let mut version = ApiVersionsRequest::VERSIONS.max;
        // At most two rounds: a broker older than our newest ApiVersions answers
        // UNSUPPORTED_VERSION in the v0 format with its own range, and we ask again.
        for _ in 0..2 {
            let payload = self.exchange(&request, version).await?;
            let response = decode_api_versions(payload, version).map_err(|message| {
                Failure::sent(Error::Protocol {
                    address: self.address.clone(),
                    message,
                })
            })?;
            if response.error_code == 35 {
                let theirs = response
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| k.max_version)
                    .unwrap_or(0);
                if theirs >= version {
                    break;
                }
                version = theirs.max(0);
                continue;
            }
            if let Some(kafka) = KafkaError::from_code(response.error_code, None) {
                return Err(Failure::sent(Error::from_kafka(ApiKey::ApiVersions, kafka)));
            }
            self.versions = response
                .api_keys
                .iter()
                .map(|k| {
                    let range = VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    };
                    (k.api_key, range)
                })
                .collect();
            return Ok(());
        }
        Err(Failure::sent(Error::Unsupported {
            api: ApiKey::ApiVersions,
            detail: format!("{} refused every ApiVersions version", self.address),
        }))
    }

    /// The version to use for `R`: the highest both sides support, and at least `min_required`
    /// (the first version that has a field the caller needs).
    pub(crate) fn version_for<R: AdminRequest>(&self, min_required: i16) -> Result<i16, Error> {
        select_version(
            R::KEY,
            R::VERSIONS,
            self.versions.get(&(R::KEY as i16)).copied(),
            min_required,
        )
    }

    /// Sends `request` at `version` and decodes the response.
    pub(crate) async fn request<R: AdminRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<R::Response, Failure> {
        let payload = self.exchange(request, version).await?;
        decode_body::<R>(payload, version).map_err(|message| {
            Failure::sent(Error::Protocol {
                address: self.address.clone(),
                message,
            })
        })
    }

    /// Writes one request frame and reads the matching response frame; returns the response
    /// body (after the header).
    async fn exchange<R: AdminRequest>(
        &mut self,
        request: &R,
        version: i16,
    ) -> Result<Bytes, Failure> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let frame = encode_request(request, version, correlation_id, &self.client_id).map_err(
            |message| {
                Failure::unsent(Error::Protocol {
                    address: self.address.clone(),
                    message,
                })
            },
        )?;
        let lost = |address: &str, e: std::io::Error| Error::Disconnected {
            api: R::KEY,
            address: address.to_owned(),
            message: e.to_string(),
        };
        // Any failure from here on may have left (part of) the request with the broker.
        self.stream
            .write_all(&frame)
            .await
            .map_err(|e| Failure::sent(lost(&self.address, e)))?;
        self.stream
            .flush()
            .await
            .map_err(|e| Failure::sent(lost(&self.address, e)))?;
        let size = self
            .stream
            .read_i32()
            .await
            .map_err(|e| Failure::sent(lost(&self.address, e)))?;
        let size = check_frame_size(size).map_err(|message| {
            Failure::sent(Error::Protocol {
                address: self.address.clone(),
                message,
            })
        })?;
        let mut buf = BytesMut::zeroed(size);
        self.stream
            .read_exact(&mut buf)
            .await
            .map_err(|e| Failure::sent(lost(&self.address, e)))?;
        let header_version = R::Response::header_version(version);
        split_response::<R>(buf.freeze(), header_version, correlation_id).map_err(|message| {
            Failure::sent(Error::Protocol {
                address: self.address.clone(),
                message,
            })
        })
    }
}

/// Picks the highest version both sides support that is at least `min_required`.
pub(crate) fn select_version(
    api: ApiKey,
    ours: VersionRange,
    theirs: Option<VersionRange>,
    min_required: i16,
) -> Result<i16, Error> {
    let Some(theirs) = theirs else {
        return Err(Error::Unsupported {
            api,
            detail: "the broker does not offer this API".to_owned(),
        });
    };
    let high = ours.max.min(theirs.max);
    let low = ours.min.max(theirs.min).max(min_required);
    if high < low {
        return Err(Error::Unsupported {
            api,
            detail: format!(
                "need version {min_required} or later; broker supports {theirs}, client {ours}"
            ),
        });
    }
    Ok(high)
}

/// The complete frame: size prefix, request header, body.
pub(crate) fn encode_request<R: AdminRequest>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
) -> Result<Bytes, String> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let mut buf = BytesMut::new();
    buf.put_i32(0); // size, patched below
    header
        .encode(&mut buf, R::header_version(version))
        .map_err(|e| format!("encoding the {:?} v{version} header: {e}", R::KEY))?;
    request
        .encode(&mut buf, version)
        .map_err(|e| format!("encoding {:?} v{version}: {e}", R::KEY))?;
    let size = i32::try_from(buf.len() - 4).map_err(|_| "request too large".to_owned())?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

pub(crate) fn check_frame_size(size: i32) -> Result<usize, String> {
    match usize::try_from(size) {
        Ok(size) if size <= MAX_FRAME => Ok(size),
        _ => Err(format!(
            "response frame size {size} is out of range (not a Kafka listener, or TLS expected?)"
        )),
    }
}

/// Checks the response header and returns the body.
pub(crate) fn split_response<R: AdminRequest>(
    mut frame: Bytes,
    header_version: i16,
    correlation_id: i32,
) -> Result<Bytes, String> {
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| format!("decoding the {:?} response header: {e}", R::KEY))?;
    if header.correlation_id != correlation_id {
        return Err(format!(
            "{:?} response has correlation id {}, expected {correlation_id}",
            R::KEY,
            header.correlation_id
        ));
    }
    Ok(frame)
}

pub(crate) fn decode_body<R: AdminRequest>(
    mut body: Bytes,
    version: i16,
) -> Result<R::Response, String> {
    R::Response::decode(&mut body, version)
        .map_err(|e| format!("decoding {:?} v{version} response: {e}", R::KEY))
}

/// ApiVersions naming this client, as Kafka's clients name themselves.
pub(crate) fn api_versions_request() -> ApiVersionsRequest {
    ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("kstretch-kadmin"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")))
}

/// ApiVersions answers UNSUPPORTED_VERSION in the v0 layout whatever version was asked, so
/// look at the error code first.
fn decode_api_versions(body: Bytes, version: i16) -> Result<ApiVersionsResponse, String> {
    let mut peek = body.clone();
    let code = if peek.remaining() >= 2 {
        peek.get_i16()
    } else {
        0
    };
    let version = if code == 35 { 0 } else { version };
    decode_body::<ApiVersionsRequest>(body, version)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::net::TcpListener;

    fn range(min: i16, max: i16) -> VersionRange {
        VersionRange { min, max }
    }

    #[test]
    fn picks_the_highest_common_version() {
        let v = select_version(ApiKey::Metadata, range(0, 13), Some(range(1, 12)), 0);
        assert_eq!(v.unwrap(), 12);
        let v = select_version(ApiKey::Metadata, range(0, 9), Some(range(1, 12)), 0);
        assert_eq!(v.unwrap(), 9);
    }

    #[test]
    fn unsupported_when_no_common_version() {
        let e =
            select_version(ApiKey::DescribeCluster, range(0, 2), Some(range(0, 1)), 2).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Unsupported {
                    api: ApiKey::DescribeCluster,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(e.reason(), "KafkaUnsupported");
        let e = select_version(ApiKey::Metadata, range(0, 3), Some(range(4, 12)), 0).unwrap_err();
        assert!(e.to_string().contains("broker supports 4..12"), "{e}");
        let e = select_version(ApiKey::UnregisterBroker, range(0, 0), None, 0).unwrap_err();
        assert!(e.to_string().contains("does not offer"), "{e}");
    }

    #[test]
    fn frames_a_request_with_size_and_header() {
        let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(7));
        let frame =
            encode_request(&request, 0, 42, &StrBytes::from_static_str("kstretch")).unwrap();
        let mut b = frame.clone();
        assert_eq!(b.get_i32() as usize, frame.len() - 4);
        assert_eq!(b.get_i16(), ApiKey::UnregisterBroker as i16);
        assert_eq!(b.get_i16(), 0);
        assert_eq!(b.get_i32(), 42);
        // Header v2 (flexible): nullable client id as int16 length + bytes, then tagged fields.
        assert_eq!(b.get_i16(), 8);
        assert_eq!(&b.copy_to_bytes(8)[..], b"kstretch");
        assert_eq!(b.get_u8(), 0); // header tagged fields
        assert_eq!(b.get_i32(), 7); // broker id
        assert_eq!(b.get_u8(), 0); // body tagged fields
        assert!(!b.has_remaining());
    }

    #[test]
    fn rejects_absurd_frame_sizes() {
        assert_eq!(check_frame_size(12).unwrap(), 12);
        assert!(check_frame_size(-1).is_err());
        // "HTTP" read as a size prefix.
        let http = i32::from_be_bytes(*b"HTTP");
        assert!(
            check_frame_size(http)
                .unwrap_err()
                .contains("not a Kafka listener")
        );
    }

    /// A response captured from Kafka 4.1.2: UnregisterBroker v0 for broker 4242, correlation
    /// id 1 (header v1, flexible).
    const RECORDED_UNREGISTER: &[u8] = &[
        0, 0, 0, 1, // correlation id
        0, // header tagged fields
        0, 0, 0, 0, // throttle
        0, 102, // BROKER_ID_NOT_REGISTERED
        43,  // compact string length + 1
        66, 114, 111, 107, 101, 114, 32, 73, 68, 32, 52, 50, 52, 50, 32, 105, 115, 32, 110, 111,
        116, 32, 99, 117, 114, 114, 101, 110, 116, 108, 121, 32, 114, 101, 103, 105, 115, 116, 101,
        114, 101, 100, // "Broker ID 4242 is not currently registered"
        0,   // tagged fields
    ];

    #[test]
    fn decodes_a_recorded_response() {
        let body = split_response::<UnregisterBrokerRequest>(
            Bytes::from_static(RECORDED_UNREGISTER),
            UnregisterBrokerResponse::header_version(0),
            1,
        )
        .unwrap();
        let response = decode_body::<UnregisterBrokerRequest>(body, 0).unwrap();
        let (code, message) = UnregisterBrokerRequest::top_error(&response);
        assert_eq!(code, 102);
        assert_eq!(
            message.map(|m| m.as_str()),
            Some("Broker ID 4242 is not currently registered")
        );
    }

    #[test]
    fn correlation_mismatch_and_garbage_are_protocol_errors() {
        let e = split_response::<UnregisterBrokerRequest>(
            Bytes::from_static(RECORDED_UNREGISTER),
            1,
            2,
        )
        .unwrap_err();
        assert!(e.contains("correlation id 1, expected 2"), "{e}");
        let e = decode_body::<UnregisterBrokerRequest>(Bytes::from_static(&[0, 0]), 0).unwrap_err();
        assert!(e.contains("decoding UnregisterBroker"), "{e}");
    }

    /// ApiVersions v0-2 response body: error code, array of (key, min, max), throttle (v1+).
    fn api_versions_body(code: i16, keys: &[(i16, i16, i16)], with_throttle: bool) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_i16(code);
        b.put_i32(keys.len() as i32);
        for (k, min, max) in keys {
            b.put_i16(*k);
            b.put_i16(*min);
            b.put_i16(*max);
        }
        if with_throttle {
            b.put_i32(0);
        }
        b.to_vec()
    }

    /// Reads one request frame; returns (api key, version, correlation id).
    async fn read_request(s: &mut TcpStream) -> (i16, i16, i32) {
        let size = s.read_i32().await.unwrap();
        let mut buf = vec![0; size as usize];
        s.read_exact(&mut buf).await.unwrap();
        let mut b = &buf[..];
        (b.get_i16(), b.get_i16(), b.get_i32())
    }

    async fn write_response(s: &mut TcpStream, correlation_id: i32, body: &[u8]) {
        let mut b = BytesMut::new();
        b.put_i32(4 + body.len() as i32);
        b.put_i32(correlation_id); // response header v0
        b.put_slice(body);
        s.write_all(&b).await.unwrap();
    }

    #[tokio::test]
    async fn falls_back_to_the_brokers_api_versions_version() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let (key, version, id) = read_request(&mut s).await;
            assert_eq!((key, version), (18, ApiVersionsRequest::VERSIONS.max));
            // An old broker: UNSUPPORTED_VERSION in the v0 layout, offering ApiVersions 0..2.
            write_response(&mut s, id, &api_versions_body(35, &[(18, 0, 2)], false)).await;
            let (key, version, id) = read_request(&mut s).await;
            assert_eq!((key, version), (18, 2));
            let keys = [(18, 0, 2), (3, 1, 9), (60, 0, 1)];
            write_response(&mut s, id, &api_versions_body(0, &keys, true)).await;
        });
        let stream = dial(&address, Duration::from_secs(5), None).await.unwrap();
        let conn = Connection::handshake(&address, stream, "t").await.unwrap();
        server.await.unwrap();
        assert_eq!(conn.version_for::<MetadataRequest>(0).unwrap(), 9);
        assert_eq!(conn.version_for::<DescribeClusterRequest>(0).unwrap(), 1);
        let e = conn.version_for::<DescribeClusterRequest>(2).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
        let e = conn.version_for::<UnregisterBrokerRequest>(0).unwrap_err();
        assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    }

    #[tokio::test]
    async fn a_non_kafka_peer_is_a_protocol_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = read_request(&mut s).await;
            s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                .await
                .unwrap();
        });
        let stream = dial(&address, Duration::from_secs(5), None).await.unwrap();
        let e = Connection::handshake(&address, stream, "t")
            .await
            .unwrap_err();
        server.await.unwrap();
        assert!(matches!(e, Error::Protocol { .. }), "{e}");
    }

    #[tokio::test]
    async fn a_closed_connection_is_disconnected() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = read_request(&mut s).await;
            drop(s);
        });
        let stream = dial(&address, Duration::from_secs(5), None).await.unwrap();
        let e = Connection::handshake(&address, stream, "t")
            .await
            .unwrap_err();
        server.await.unwrap();
        assert!(matches!(e, Error::Disconnected { .. }), "{e}");
        assert_eq!(e.reason(), "KafkaDisconnected");
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable() {
        // Bind then drop to get a port nobody listens on.
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        drop(listener);
        let e = dial(&address, Duration::from_secs(5), None)
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    }
}
