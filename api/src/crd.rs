//! The CustomResourceDefinitions: kube's generated `v1` CRDs, finished with kstretch's policy
//! (unknown fields kept under `spec`, the deprecated `v1beta2` version served beside `v1`,
//! conversion `None`, chart labels) — see `docs/adr/0001-crd-versions-and-unknown-fields.md`.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray,
    JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::connect::KafkaConnect;
use crate::connector::KafkaConnector;
use crate::kafka::Kafka;
use crate::names::{APP_PART_OF, V1, V1BETA2};
use crate::node_pool::KafkaNodePool;
use crate::operation::KafkaOperation;
use crate::pod_set::StrimziPodSet;
use crate::topic::KafkaTopic;
use crate::user::KafkaUser;

/// Helm annotation that keeps the CRDs (and so every custom resource) when the chart is
/// uninstalled.
pub const HELM_RESOURCE_POLICY: &str = "helm.sh/resource-policy";

/// Every CRD kstretch installs, finished and ordered by name.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    let mut crds: Vec<CustomResourceDefinition> = [
        Kafka::crd(),
        KafkaNodePool::crd(),
        KafkaTopic::crd(),
        KafkaUser::crd(),
        KafkaConnect::crd(),
        KafkaConnector::crd(),
        StrimziPodSet::crd(),
    ]
    .into_iter()
    .map(finish)
    .chain([label(strip_defaults(KafkaOperation::crd()))])
    .collect();
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    crds
}

/// Applies kstretch's CRD policy to a kube-generated single-version (`v1`) CRD.
pub fn finish(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    label(add_v1beta2(keep_unknown_spec_fields(strip_defaults(crd))))
}

/// kstretch's labels and Helm's keep policy. kstretch's own kinds get only this (and no
/// defaults): they have no Strimzi manifests to keep whole and no older version to serve.
fn label(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(APP_PART_OF.to_owned(), "kstretch".to_owned());
    crd.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(HELM_RESOURCE_POLICY.to_owned(), "keep".to_owned());
    crd
}

/// Marks `spec` of every version's schema with `x-kubernetes-preserve-unknown-fields`, so no
/// field of a Strimzi manifest is pruned, even one no struct mentions.
pub fn keep_unknown_spec_fields(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(spec) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|root| root.properties.as_mut())
            .and_then(|properties| properties.get_mut("spec"))
        {
            spec.x_kubernetes_preserve_unknown_fields = Some(true);
        }
    }
    crd
}

/// Removes every `default` from the schemas. schemars emits one for fields with
/// `#[serde(default)]`, but the apiserver would then write those values into stored objects;
/// kstretch, like Strimzi, applies defaults in the operator and stores what the user wrote.
pub fn strip_defaults(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            visit_schemas_mut(root, &mut |node| node.default = None);
        }
    }
    crd
}

/// Calls `f` on `schema` and every schema nested in it.
pub fn visit_schemas_mut(schema: &mut JSONSchemaProps, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    f(schema);
    let maps = [
        schema.properties.as_mut(),
        schema.pattern_properties.as_mut(),
        schema.definitions.as_mut(),
    ];
    for map in maps.into_iter().flatten() {
        for child in map.values_mut() {
            visit_schemas_mut(child, f);
        }
    }
    let lists = [
        schema.all_of.as_mut(),
        schema.any_of.as_mut(),
        schema.one_of.as_mut(),
    ];
    for list in lists.into_iter().flatten() {
        for child in list {
            visit_schemas_mut(child, f);
        }
    }
    if let Some(not) = schema.not.as_mut() {
        visit_schemas_mut(not, f);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(child)) => visit_schemas_mut(child, f),
        Some(JSONSchemaPropsOrArray::Schemas(children)) => {
            for child in children {
                visit_schemas_mut(child, f);
            }
        }
        None => {}
    }
    for extra in [
        schema.additional_properties.as_mut(),
        schema.additional_items.as_mut(),
    ]
    .into_iter()
    .flatten()
    {
        if let JSONSchemaPropsOrBool::Schema(child) = extra {
            visit_schemas_mut(child, f);
        }
    }
}

/// Adds `v1beta2` beside `v1`: served, not stored, deprecated, with the same schema, printer
/// columns and subresources; conversion strategy `None` (the apiserver only rewrites
/// `apiVersion`). A CRD without `v1`, or that already has `v1beta2`, is returned unchanged
/// except for the conversion strategy.
pub fn add_v1beta2(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    crd.spec.conversion = Some(CustomResourceConversion {
        strategy: "None".to_owned(),
        webhook: None,
    });
    let has_beta = crd.spec.versions.iter().any(|v| v.name == V1BETA2);
    let Some(v1) = crd.spec.versions.iter().find(|v| v.name == V1).cloned() else {
        return crd;
    };
    if has_beta {
        return crd;
    }
    let mut beta = v1;
    beta.name = V1BETA2.to_owned();
    beta.served = true;
    beta.storage = false;
    beta.deprecated = Some(true);
    beta.deprecation_warning = Some(format!(
        "{group}/{V1BETA2} {kind} is deprecated; use {group}/{V1}",
        group = crd.spec.group,
        kind = crd.spec.names.kind
    ));
    crd.spec.versions.push(beta);
    crd
}

/// The `openAPIV3Schema` of the named version.
pub fn version_schema<'a>(
    crd: &'a CustomResourceDefinition,
    version: &str,
) -> Option<&'a JSONSchemaProps> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.name == version)?
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::{CATEGORY, CORE_GROUP, KAFKA_GROUP};

    fn crd_named<'a>(
        crds: &'a [CustomResourceDefinition],
        name: &str,
    ) -> &'a CustomResourceDefinition {
        crds.iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no CRD {name}"))
    }

    /// The Strimzi kinds, which get the Strimzi policy.
    fn strimzi_crds() -> Vec<CustomResourceDefinition> {
        all_crds()
            .into_iter()
            .filter(|c| c.spec.group != crate::operation::GROUP)
            .collect()
    }

    #[test]
    fn kstretchs_own_kind_is_v1alpha1_only_structural_and_prunes_unknown_fields() {
        let crds = all_crds();
        let crd = crd_named(&crds, "kafkaoperations.kstretch.io");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["kop".to_owned()][..])
        );
        let versions: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(versions, vec!["v1alpha1"]);
        assert!(
            crd.spec.versions[0]
                .subresources
                .as_ref()
                .is_some_and(|s| s.status.is_some())
        );
        let root = version_schema(crd, "v1alpha1").expect("schema");
        let schema = serde_json::to_value(root).expect("to JSON");
        assert!(crate::schema_check::structural_problems(&schema).is_empty());
        let spec = root
            .properties
            .as_ref()
            .and_then(|p| p.get("spec"))
            .expect("spec");
        assert_eq!(spec.x_kubernetes_preserve_unknown_fields, None);
    }

    #[test]
    fn seven_namespaced_kinds_in_category_strimzi() {
        let crds = strimzi_crds();
        let names: Vec<_> = crds
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        assert_eq!(
            names,
            vec![
                "kafkaconnectors.kafka.strimzi.io",
                "kafkaconnects.kafka.strimzi.io",
                "kafkanodepools.kafka.strimzi.io",
                "kafkas.kafka.strimzi.io",
                "kafkatopics.kafka.strimzi.io",
                "kafkausers.kafka.strimzi.io",
                "strimzipodsets.core.strimzi.io",
            ]
        );
        for crd in &crds {
            assert_eq!(crd.spec.scope, "Namespaced");
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&[CATEGORY.to_owned()][..])
            );
            let group = &crd.spec.group;
            assert!(group == KAFKA_GROUP || group == CORE_GROUP);
        }
    }

    #[test]
    fn short_names_match_strimzi() {
        let crds = all_crds();
        for (name, short) in [
            ("kafkas.kafka.strimzi.io", "k"),
            ("kafkanodepools.kafka.strimzi.io", "knp"),
            ("kafkatopics.kafka.strimzi.io", "kt"),
            ("kafkaconnectors.kafka.strimzi.io", "kctr"),
            ("kafkaconnects.kafka.strimzi.io", "kc"),
            ("strimzipodsets.core.strimzi.io", "sps"),
        ] {
            assert_eq!(
                crd_named(&crds, name).spec.names.short_names.as_deref(),
                Some(&[short.to_owned()][..]),
                "{name}"
            );
        }
    }

    #[test]
    fn v1_is_stored_and_v1beta2_is_served_deprecated_and_identical() {
        for crd in strimzi_crds() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            assert_eq!(
                crd.spec.conversion.as_ref().map(|c| c.strategy.as_str()),
                Some("None"),
                "{name}"
            );
            let versions: Vec<_> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(versions, vec![V1, V1BETA2], "{name}");
            let v1 = &crd.spec.versions[0];
            let beta = &crd.spec.versions[1];
            assert!(v1.served && v1.storage && v1.deprecated.is_none(), "{name}");
            assert!(beta.served && !beta.storage, "{name}");
            assert_eq!(beta.deprecated, Some(true), "{name}");
            let warning = beta.deprecation_warning.clone().unwrap_or_default();
            assert!(
                warning.contains(&format!(
                    "{}/v1beta2 {}",
                    crd.spec.group, crd.spec.names.kind
                )),
                "{warning}"
            );
            assert_eq!(v1.schema, beta.schema, "{name}");
            assert_eq!(
                v1.additional_printer_columns, beta.additional_printer_columns,
                "{name}"
            );
            assert_eq!(v1.subresources, beta.subresources, "{name}");
            assert!(
                v1.subresources.as_ref().is_some_and(|s| s.status.is_some()),
                "{name} has the status subresource"
            );
        }
    }

    #[test]
    fn schemas_are_structural_and_keep_unknown_fields_where_opaque() {
        let mut problems = Vec::new();
        for crd in strimzi_crds() {
            for version in [V1, V1BETA2] {
                let schema = version_schema(&crd, version).expect("schema");
                let schema = serde_json::to_value(schema).expect("to JSON");
                for problem in crate::schema_check::structural_problems(&schema) {
                    problems.push(format!("{:?} {version}: {problem}", crd.metadata.name));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn schemas_carry_no_defaults() {
        for crd in all_crds() {
            let yaml = serde_json::to_string(&crd).expect("serializes");
            assert!(!yaml.contains("\"default\""), "{:?}", crd.metadata.name);
        }
    }

    #[test]
    fn add_v1beta2_is_idempotent() {
        let once = add_v1beta2(Kafka::crd());
        let twice = add_v1beta2(once.clone());
        assert_eq!(once, twice);
    }

    #[test]
    fn spec_keeps_unknown_fields() {
        for crd in strimzi_crds() {
            for version in [V1, V1BETA2] {
                let root = version_schema(&crd, version).expect("schema");
                let spec = root
                    .properties
                    .as_ref()
                    .and_then(|p| p.get("spec"))
                    .expect("spec");
                assert_eq!(spec.x_kubernetes_preserve_unknown_fields, Some(true));
            }
        }
    }

    #[test]
    fn scale_subresources_match_strimzi() {
        let crds = all_crds();
        let scale = |name: &str| {
            crd_named(&crds, name).spec.versions[0]
                .subresources
                .as_ref()
                .and_then(|s| s.scale.clone())
        };
        let pool = scale("kafkanodepools.kafka.strimzi.io").expect("pool scale");
        assert_eq!(pool.spec_replicas_path, ".spec.replicas");
        assert_eq!(pool.status_replicas_path, ".status.replicas");
        assert_eq!(
            pool.label_selector_path.as_deref(),
            Some(".status.labelSelector")
        );
        let connect = scale("kafkaconnects.kafka.strimzi.io").expect("connect scale");
        assert_eq!(connect.spec_replicas_path, ".spec.replicas");
        assert_eq!(
            connect.label_selector_path.as_deref(),
            Some(".status.labelSelector")
        );
        let connector = scale("kafkaconnectors.kafka.strimzi.io").expect("connector scale");
        assert_eq!(connector.spec_replicas_path, ".spec.tasksMax");
        assert_eq!(connector.status_replicas_path, ".status.tasksMax");
        assert_eq!(connector.label_selector_path, None);
        assert!(scale("kafkas.kafka.strimzi.io").is_none());
        assert!(scale("kafkatopics.kafka.strimzi.io").is_none());
        assert!(scale("strimzipodsets.core.strimzi.io").is_none());
    }

    #[test]
    fn printer_columns_match_strimzi() {
        let crds = all_crds();
        let columns = |name: &str| -> Vec<(String, String, String)> {
            crd_named(&crds, name).spec.versions[0]
                .additional_printer_columns
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.name, c.type_, c.json_path))
                .collect()
        };
        let col = |n: &str, t: &str, p: &str| (n.to_owned(), t.to_owned(), p.to_owned());
        let ready = ".status.conditions[?(@.type==\"Ready\")].status";
        assert_eq!(
            columns("strimzipodsets.core.strimzi.io"),
            vec![
                col("Pods", "integer", ".status.pods"),
                col("Ready Pods", "integer", ".status.readyPods"),
                col("Current Pods", "integer", ".status.currentPods"),
                col("Age", "date", ".metadata.creationTimestamp"),
            ]
        );
        assert_eq!(
            columns("kafkanodepools.kafka.strimzi.io"),
            vec![
                col("Desired replicas", "integer", ".spec.replicas"),
                col("Roles", "string", ".status.roles"),
                col("NodeIds", "string", ".status.nodeIds"),
            ]
        );
        assert_eq!(
            columns("kafkas.kafka.strimzi.io"),
            vec![
                col("Ready", "string", ready),
                col(
                    "Warnings",
                    "string",
                    ".status.conditions[?(@.type==\"Warning\")].status"
                ),
                col("Kafka version", "string", ".status.kafkaVersion"),
                col("Metadata version", "string", ".status.kafkaMetadataVersion"),
            ]
        );
        assert_eq!(
            columns("kafkatopics.kafka.strimzi.io"),
            vec![
                col("Cluster", "string", ".metadata.labels.strimzi\\.io/cluster"),
                col("Partitions", "integer", ".spec.partitions"),
                col("Replication factor", "integer", ".spec.replicas"),
                col("Ready", "string", ready),
            ]
        );
        assert_eq!(
            columns("kafkaconnectors.kafka.strimzi.io"),
            vec![
                col("Cluster", "string", ".metadata.labels.strimzi\\.io/cluster"),
                col("Connector class", "string", ".spec.class"),
                col("Max Tasks", "integer", ".spec.tasksMax"),
                col("Ready", "string", ready),
            ]
        );
        assert_eq!(
            columns("kafkaconnects.kafka.strimzi.io"),
            vec![
                col("Desired replicas", "integer", ".spec.replicas"),
                col("Ready", "string", ready),
            ]
        );
    }
}
