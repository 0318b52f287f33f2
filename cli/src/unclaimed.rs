//! `kstretch remove-unclaimed`: removes, on purpose, the objects an agent keeps for an owner that
//! central neither reconciles nor declared deleted. The CLI deletes them in the member cluster
//! itself, with the caller's own credentials there, so Kubernetes' RBAC decides who may; and
//! only after central confirms that the cluster's agent reports that owner as unclaimed, so a
//! resource central reconciles is never removed this way.

use std::collections::BTreeSet;
use std::time::Duration;

use kstretch_api::owner::{MANAGED_BY_LABEL, MANAGED_BY_VALUE, MANAGED_KINDS, OwnerKey, owner_of};
use kstretch_proto::admin::v1::ListAgentsRequest;
use kstretch_proto::admin::v1::admin_service_client::AdminServiceClient;
use kube::api::{DeleteParams, DynamicObject, ListParams, Preconditions};
use kube::{Api, ResourceExt};

use crate::error::CliError;
use crate::kubeconfig::KubeArgs;

/// What to remove, and where.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The member cluster (its alias, as `kstretch agents` shows it).
    #[arg(long)]
    pub cluster: String,
    /// The owner's kind.
    #[arg(long, default_value = "Kafka", value_parser = ["Kafka", "KafkaConnect"])]
    pub kind: String,
    /// The owner's namespace.
    #[arg(long, short = 'n')]
    pub namespace: String,
    /// The owner's name.
    pub name: String,
    /// The member cluster's kubeconfig.
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Also delete PersistentVolumeClaims kept without deleteClaim (their data is lost).
    #[arg(long)]
    pub include_claims: bool,
    /// Delete; without it, only list what would be deleted.
    #[arg(long)]
    pub yes: bool,
}

pub async fn run(address: &str, timeout: Duration, args: &Args) -> Result<String, CliError> {
    let owner = OwnerKey {
        kind: args.kind.clone(),
        namespace: args.namespace.clone(),
        name: args.name.clone(),
    };
    let uids = reported_uids(address, timeout, &args.cluster, &owner).await?;
    let client = args.kube.client().await?;
    let mut out = String::new();
    let mut removed = 0;
    let selector = format!(
        "{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{}={}",
        kstretch_api::names::CLUSTER,
        owner.name
    );
    for kind in MANAGED_KINDS {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &owner.namespace, &kind.api_resource());
        let list = match api
            .list_metadata(&ListParams::default().labels(&selector))
            .await
        {
            Ok(list) => list,
            Err(kube::Error::Api(s)) if s.code == 404 && kind.optional => continue,
            Err(e) => return Err(CliError::Kube(e)),
        };
        for o in &list.items {
            let empty = Default::default();
            let labels = o.metadata.labels.as_ref().unwrap_or(&empty);
            let annotations = o.metadata.annotations.as_ref().unwrap_or(&empty);
            let Some((of, uid)) = owner_of(&owner.namespace, labels, annotations) else {
                continue;
            };
            if of != owner || !uids.contains(&uid.unwrap_or_default()) {
                continue;
            }
            let claim_kept = kind.kind == "PersistentVolumeClaim"
                && annotations
                    .get(kstretch_api::names::DELETE_CLAIM)
                    .is_none_or(|v| v != "true");
            if claim_kept && !args.include_claims {
                out.push_str(&format!(
                    "kept {}/{} (deleteClaim is not set; --include-claims deletes it)\n",
                    kind.kind,
                    o.name_any()
                ));
                continue;
            }
            if args.yes {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: o.uid(),
                        resource_version: None,
                    }),
                    ..DeleteParams::background()
                };
                match api.delete(&o.name_any(), &params).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(CliError::Kube(e)),
                }
                out.push_str(&format!("deleted {}/{}\n", kind.kind, o.name_any()));
            } else {
                out.push_str(&format!("would delete {}/{}\n", kind.kind, o.name_any()));
            }
            removed += 1;
        }
    }
    let verb = if args.yes {
        "deleted"
    } else {
        "would delete (add --yes)"
    };
    out.push_str(&format!(
        "{owner} in cluster {}: {verb} {removed} object(s)\n",
        args.cluster
    ));
    Ok(out)
}

/// The UIDs under which `cluster`'s agent reports `owner` as unclaimed; an error if it does not.
async fn reported_uids(
    address: &str,
    timeout: Duration,
    cluster: &str,
    owner: &OwnerKey,
) -> Result<BTreeSet<String>, CliError> {
    let channel = crate::central::connect(address, timeout).await?;
    let agents = AdminServiceClient::new(channel)
        .list_agents(ListAgentsRequest {})
        .await?
        .into_inner()
        .agents;
    let agent = agents
        .iter()
        .find(|a| a.cluster_alias == cluster)
        .ok_or_else(|| {
            CliError::Refused(format!("central knows no agent of cluster {cluster:?}"))
        })?;
    let uids: BTreeSet<String> = agent
        .unclaimed
        .iter()
        .filter(|u| u.kind == owner.kind && u.namespace == owner.namespace && u.name == owner.name)
        .map(|u| u.uid.clone())
        .collect();
    if uids.is_empty() {
        return Err(CliError::Refused(format!(
            "the agent of cluster {cluster} reports no unclaimed objects of {owner}; \
             if central reconciles it, delete the {} instead (`kstretch agents` lists what is unclaimed)",
            owner.kind
        )));
    }
    Ok(uids)
}
