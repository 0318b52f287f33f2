//! Child objects built as `k8s-openapi` types and turned into the JSON the link carries to the
//! agents only here, at that boundary.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServicePort};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;

/// `object` (a `k8s-openapi` type or one of the API crate's resources) as the link carries it:
/// its JSON with its `apiVersion` and `kind`.
pub fn to_json<K>(object: &K) -> Value
where
    K: kube::Resource<DynamicType = ()> + serde::Serialize,
{
    let mut value = serde_json::to_value(object).unwrap_or(Value::Null);
    if let Some(o) = value.as_object_mut() {
        o.insert("apiVersion".to_owned(), Value::from(K::api_version(&())));
        o.insert("kind".to_owned(), Value::from(K::kind(&())));
    }
    value
}

/// A part of an object (a container, a volume) as JSON, for what is still assembled as JSON.
pub fn value<T: serde::Serialize>(part: &T) -> Value {
    serde_json::to_value(part).unwrap_or(Value::Null)
}

/// The text entries of a JSON object (labels, annotations, a selector); nothing else.
pub fn strings(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect()
}

/// An `Opaque` Secret with `metadata` and the files `data`.
pub fn secret<'a>(
    metadata: ObjectMeta,
    data: impl IntoIterator<Item = (String, &'a [u8])>,
) -> Value {
    to_json(&Secret {
        metadata,
        type_: Some("Opaque".to_owned()),
        data: Some(
            data.into_iter()
                .map(|(key, bytes)| (key, ByteString(bytes.to_vec())))
                .collect(),
        ),
        ..Default::default()
    })
}

/// The metadata of an object named `name` in `namespace` with `labels`.
pub fn meta(name: &str, namespace: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels),
        ..Default::default()
    }
}

/// A TCP port `name` of a Service that sends `port` to the same port of its pods.
pub fn tcp_port(name: String, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name),
        port,
        target_port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".to_owned()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use k8s_openapi::api::core::v1::Service;

    use super::*;

    #[test]
    fn an_object_carries_its_api_version_and_kind_and_no_empty_fields() {
        let service = Service {
            metadata: meta("s", "ns", BTreeMap::from([("a".into(), "b".into())])),
            ..Default::default()
        };
        assert_eq!(
            to_json(&service),
            serde_json::json!({"apiVersion": "v1", "kind": "Service",
                               "metadata": {"name": "s", "namespace": "ns", "labels": {"a": "b"}}})
        );
        assert_eq!(
            serde_json::to_value(tcp_port("tcp-x".into(), 9092)).unwrap(),
            serde_json::json!({"name": "tcp-x", "port": 9092, "targetPort": 9092, "protocol": "TCP"})
        );
    }
}
