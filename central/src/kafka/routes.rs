//! The routing objects of the routed external listeners, with Strimzi's shapes and names: for
//! `ingress` an Ingress (TLS passed through, ingress-nginx's annotations), for `route` an
//! OpenShift Route (passthrough), for `tlsroute` a Gateway API TLSRoute on the listener's
//! `parentRefs`; one bootstrap object in every member cluster that runs brokers and one per
//! broker, each in front of the Service of the same role. Pure.

use std::collections::BTreeMap;

use serde_json::{Value, json};

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
    let port = i64::from(l.port);
    let spec = match &l.exposure {
        Exposure::Ingress { class } => {
            let mut spec = json!({
                "rules": [{"host": target.host, "http": {"paths": [{
                    "path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": target.service, "port": {"number": port}}},
                }]}}],
                "tls": [{"hosts": [target.host]}],
            });
            if let Some(class) = class {
                spec["ingressClassName"] = json!(class);
            }
            spec
        }
        Exposure::TlsRoute { parent_refs } => json!({
            "parentRefs": parent_refs,
            "hostnames": [target.host],
            "rules": [{"backendRefs": [{"name": target.service, "port": port}]}],
        }),
        _ => {
            let mut spec = json!({
                "to": {"kind": "Service", "name": target.service},
                "port": {"targetPort": port},
                "tls": {"termination": "passthrough"},
            });
            if let Some(host) = &target.host {
                spec["host"] = json!(host);
            }
            spec
        }
    };
    let mut metadata = objects::meta(&target.name, namespace, all_labels);
    metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec})
}
