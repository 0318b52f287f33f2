//! The objects central sends to member clusters: their kinds, and which resource owns each.
//! Read by the agent to decide what a snapshot makes obsolete, and by the CLI to remove
//! unclaimed objects on purpose.

use std::collections::BTreeMap;

use kube::core::ApiResource;

use crate::names;

/// Label on everything the agent applies; only objects carrying it are ever deleted by it.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "kstretch-agent";

/// A kind the agent applies (and prunes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManagedKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    /// Its CRD may be missing from a member cluster; listing it then finds nothing to prune.
    pub optional: bool,
}

/// Every kind central may send, in the order they are applied: what pods mount and reach
/// first, the podsets that create pods last.
pub const MANAGED_KINDS: &[ManagedKind] = &[
    ManagedKind {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        optional: false,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        optional: false,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        optional: false,
    },
    ManagedKind {
        group: "networking.k8s.io",
        version: "v1",
        kind: "Ingress",
        plural: "ingresses",
        optional: false,
    },
    ManagedKind {
        group: "route.openshift.io",
        version: "v1",
        kind: "Route",
        plural: "routes",
        optional: true,
    },
    ManagedKind {
        group: "gateway.networking.k8s.io",
        version: "v1",
        kind: "TLSRoute",
        plural: "tlsroutes",
        optional: true,
    },
    ManagedKind {
        group: "multicluster.x-k8s.io",
        version: "v1alpha1",
        kind: "ServiceExport",
        plural: "serviceexports",
        optional: true,
    },
    ManagedKind {
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
        optional: false,
    },
    ManagedKind {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        optional: false,
    },
    ManagedKind {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        optional: false,
    },
    ManagedKind {
        group: "core.strimzi.io",
        version: "v1",
        kind: "StrimziPodSet",
        plural: "strimzipodsets",
        optional: false,
    },
];

impl ManagedKind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        ApiResource {
            group: self.group.to_owned(),
            version: self.version.to_owned(),
            api_version: self.api_version(),
            kind: self.kind.to_owned(),
            plural: self.plural.to_owned(),
        }
    }

    pub fn lookup(api_version: &str, kind: &str) -> Option<&'static ManagedKind> {
        MANAGED_KINDS
            .iter()
            .find(|k| k.kind == kind && k.api_version() == api_version)
    }
}

/// A resource that owns objects in member clusters (`Kafka` or `KafkaConnect`), without its UID:
/// a re-created resource of the same name claims the objects of the one before it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerKey {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for OwnerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The owner of an object in `namespace` and the UID it was stamped with: the annotations
/// central stamps, else (objects of an older central) the `strimzi.io/cluster` and
/// `strimzi.io/kind` labels. `None` for an object that names no owner.
pub fn owner_of(
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> Option<(OwnerKey, Option<String>)> {
    let name = labels.get(names::CLUSTER).filter(|n| !n.is_empty())?;
    let kind = annotations
        .get(names::OWNER_KIND)
        .or_else(|| labels.get(names::KIND))
        .filter(|k| !k.is_empty())
        .map_or("Kafka", String::as_str);
    let uid = annotations
        .get(names::OWNER_UID)
        .filter(|u| !u.is_empty())
        .cloned();
    Some((
        OwnerKey {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.clone(),
        },
        uid,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn stamped_annotations_win_and_labels_serve_older_objects() {
        let labels = map(&[(names::CLUSTER, "c"), (names::KIND, "Kafka")]);
        let stamped = map(&[
            (names::OWNER_KIND, "KafkaConnect"),
            (names::OWNER_UID, "u1"),
        ]);
        let (owner, uid) = owner_of("ns", &labels, &stamped).unwrap();
        assert_eq!(owner.to_string(), "KafkaConnect ns/c");
        assert_eq!(uid.as_deref(), Some("u1"));

        let (owner, uid) = owner_of("ns", &labels, &BTreeMap::new()).unwrap();
        assert_eq!(owner.kind, "Kafka");
        assert_eq!(uid, None);

        let (owner, _) = owner_of("ns", &map(&[(names::CLUSTER, "c")]), &BTreeMap::new()).unwrap();
        assert_eq!(
            owner.kind, "Kafka",
            "a PVC of an older central has no kind label"
        );
        assert!(owner_of("ns", &map(&[(names::KIND, "Kafka")]), &BTreeMap::new()).is_none());
    }
}
