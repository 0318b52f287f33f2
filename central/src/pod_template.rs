//! The pod of a node or worker of an owning resource (`Kafka` pools, `KafkaConnect`): what
//! kstretch sets, with the scheduling fields of the resource's `template.pod` taken as Strimzi
//! takes them.

use serde_json::{Map, Value, json};

/// The fields of `template.pod` that reach the pod's spec.
const TAKEN: [&str; 11] = [
    "affinity",
    "tolerations",
    "nodeSelector",
    "priorityClassName",
    "schedulerName",
    "securityContext",
    "terminationGracePeriodSeconds",
    "imagePullSecrets",
    "topologySpreadConstraints",
    "hostAliases",
    "enableServiceLinks",
];

/// What one pod is made of.
#[derive(Debug)]
pub struct PodParts<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// The headless Service that gives the pod its DNS name.
    pub subdomain: &'a str,
    pub container: Value,
    pub volumes: Vec<Value>,
    pub labels: Map<String, Value>,
    pub annotations: Map<String, Value>,
    /// The resource's `template.pod`.
    pub template: Option<&'a Map<String, Value>>,
}

/// The pod (pure).
pub fn pod(parts: PodParts<'_>) -> Value {
    let mut spec = json!({
        "hostname": parts.name,
        "subdomain": parts.subdomain,
        "containers": [parts.container],
        "volumes": parts.volumes,
        "terminationGracePeriodSeconds": 30,
    });
    if let Some(template) = parts.template {
        for key in TAKEN {
            if let Some(value) = template.get(key) {
                spec[key] = value.clone();
            }
        }
    }
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": parts.name, "namespace": parts.namespace,
                     "labels": parts.labels, "annotations": parts.annotations},
        "spec": spec,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_gives_its_scheduling_fields_and_nothing_else() {
        let template = json!({"affinity": {"a": 1}, "terminationGracePeriodSeconds": 5,
                              "metadata": {"labels": {"x": "y"}}, "hostNetwork": true});
        let pod = pod(PodParts {
            name: "p-0",
            namespace: "ns",
            subdomain: "p-brokers",
            container: json!({"name": "kafka"}),
            volumes: vec![],
            labels: Map::new(),
            annotations: Map::new(),
            template: template.as_object(),
        });
        assert_eq!(pod["spec"]["affinity"], json!({"a": 1}));
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 5);
        assert_eq!(pod["spec"]["subdomain"], "p-brokers");
        assert!(pod["spec"].get("hostNetwork").is_none());
        assert!(pod["spec"].get("metadata").is_none());
    }
}
