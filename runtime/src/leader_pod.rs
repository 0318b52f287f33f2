//! The leader's pod label: of several replicas behind one Service, only the lease holder's pod
//! carries `kstretch.io/leader: "true"`, and the Service selects it.
//!
//! This lets every healthy replica be ready (so a PodDisruptionBudget can let a node drain evict
//! the leader; a standby that is never ready would block that forever) while traffic (the agent
//! link, the admin API) still reaches only the replica that serves it.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// The label the leader's pod carries (value `"true"`); no other replica's pod has it.
pub const LABEL: &str = "kstretch.io/leader";

/// This replica's own pod, whose [`LABEL`] follows the replica's role.
#[derive(Clone, Debug)]
pub struct LeaderPod {
    api: Api<Pod>,
    name: String,
}

impl LeaderPod {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Puts [`LABEL`] on the pod (`leads`) or removes it. A merge patch touches nothing else,
    /// and removing a label the pod does not have is a no-op.
    pub async fn mark(&self, leads: bool) -> Result<(), kube::Error> {
        let value = if leads { json!("true") } else { json!(null) };
        self.api
            .patch(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {LABEL: value}}})),
            )
            .await
            .map(|_| ())
    }
}
