//! The routing objects of the routed external listeners, with Strimzi's shapes and names: for
//! `ingress` an Ingress (TLS passed through, ingress-nginx's annotations), for `route` an
//! OpenShift Route (passthrough), for `tlsroute` a Gateway API TLSRoute on the listener's
//! `parentRefs`; one bootstrap object in every member cluster that runs brokers and one per
//! broker, each in front of the Service of the same role. Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::Value;

use super::external::{
    Broker, Exposure, ExternalListener, ServiceSettings, per_cluster_and_broker, routing_kind,
};
use crate::objects;

/// Each member cluster's routing objects of `listeners`, by alias. `labels` are the Kafka's own.
pub fn routes(
    kafka: &str,
    namespace: &str,
    listeners: &[ExternalListener],
    brokers: &[Broker],
    labels: &BTreeMap<String, String>,
) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for l in listeners.iter().filter(|l| l.exposure.routed()) {
        let object = |name: String, service: String, host: Option<String>, settings| {
            routing_object(
                l,
                namespace,
                labels,
                settings,
                Target {
                    name,
                    service,
                    host,
                },
            )
        };
        per_cluster_and_broker(
            brokers,
            &mut out,
            || {
                object(
                    l.bootstrap_route_name(kafka),
                    l.bootstrap_name(kafka),
                    l.bootstrap.host.clone(),
                    l.bootstrap.clone(),
                )
            },
            |b| {
                let name = l.broker_service_name(kafka, &b.pool, b.id);
                object(
                    name.clone(),
                    name,
                    l.broker_host(kafka, b),
                    l.broker_service(b.id),
                )
            },
        );
    }
    out
}

/// One routing object: its name, the Service it leads to and the host it answers.
struct Target {
    name: String,
    service: String,
    host: Option<String>,
}

/// The annotations that make ingress-nginx pass TLS through to the broker, as Strimzi sets them.
fn passthrough() -> BTreeMap<String, String> {
    [
        ("ingress.kubernetes.io/ssl-passthrough", "true"),
        ("nginx.ingress.kubernetes.io/ssl-passthrough", "true"),
        ("nginx.ingress.kubernetes.io/backend-protocol", "HTTPS"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn routing_object(
    l: &ExternalListener,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    settings: ServiceSettings,
    target: Target,
) -> Value {
    let (api_version, kind, _) = routing_kind(&l.exposure);
    let mut all_labels = labels.clone();
    all_labels.extend(settings.labels);
    let mut annotations = match l.exposure {
        Exposure::Ingress { .. } => passthrough(),
        _ => BTreeMap::new(),
    };
    annotations.extend(settings.annotations);
    let mut metadata = objects::meta(&target.name, namespace, all_labels);
    metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    let port = i32::from(l.port);
    match &l.exposure {
        Exposure::Ingress { class } => {
            objects::to_json(&ingress(metadata, class.as_deref(), target, port))
        }
        Exposure::TlsRoute { parent_refs } => objects::value(&Routing {
            api_version,
            kind,
            metadata,
            spec: TlsRouteSpec {
                parent_refs: parent_refs.clone(),
                hostnames: vec![target.host],
                rules: vec![TlsRouteRule {
                    backend_refs: vec![BackendRef {
                        name: target.service,
                        port,
                    }],
                }],
            },
        }),
        _ => objects::value(&Routing {
            api_version,
            kind,
            metadata,
            spec: RouteSpec {
                to: RouteTo {
                    kind: "Service",
                    name: target.service,
                },
                port: RoutePort { target_port: port },
                tls: RouteTls {
                    termination: "passthrough",
                },
                host: target.host,
            },
        }),
    }
}

/// An Ingress that passes TLS through to `target`'s Service (ingress-nginx's annotations are
/// in `metadata`).
fn ingress(metadata: ObjectMeta, class: Option<&str>, target: Target, port: i32) -> Ingress {
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: target.service,
            port: Some(ServiceBackendPort {
                number: Some(port),
                ..Default::default()
            }),
        }),
        ..Default::default()
    };
    Ingress {
        metadata,
        spec: Some(IngressSpec {
            ingress_class_name: class.map(str::to_owned),
            rules: Some(vec![IngressRule {
                host: target.host.clone(),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".to_owned()),
                        path_type: "Prefix".to_owned(),
                        backend,
                    }],
                }),
            }]),
            tls: Some(vec![IngressTLS {
                hosts: Some(target.host.into_iter().collect()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// A routing object of a kind `k8s-openapi` does not define (a Route, a TLSRoute).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Routing<S> {
    api_version: &'static str,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: S,
}

/// An OpenShift Route's spec: TLS passed through to a Service.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RouteSpec {
    to: RouteTo,
    port: RoutePort,
    tls: RouteTls,
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
}

#[derive(Serialize)]
struct RouteTo {
    kind: &'static str,
    name: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RoutePort {
    target_port: i32,
}

#[derive(Serialize)]
struct RouteTls {
    termination: &'static str,
}

/// A Gateway API TLSRoute's spec: on the listener's gateways, to one Service.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TlsRouteSpec {
    parent_refs: Vec<Value>,
    hostnames: Vec<Option<String>>,
    rules: Vec<TlsRouteRule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TlsRouteRule {
    backend_refs: Vec<BackendRef>,
}

#[derive(Serialize)]
struct BackendRef {
    name: String,
    port: i32,
}
