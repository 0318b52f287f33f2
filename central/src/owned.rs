//! The lifetime every resource that owns objects in member clusters (`Kafka`, `KafkaConnect`)
//! shares: it carries the `kstretch.io/member-objects` finalizer while central reconciles it,
//! and its deletion reaches the agents only as an explicit word, kept until every member
//! cluster's agent has confirmed it. The finalizer is what makes that word survive a restart of
//! central: a resource being deleted stays in the apiserver until it is released.
//!
//! A resource that disappears without its finalizer being released by central (its CRD removed,
//! the finalizer taken off by hand) or that central stops seeing (a narrower namespace scope) is
//! only forgotten: agents keep its objects, unclaimed, until it is seen again or removed on
//! purpose with `kstretch remove-unclaimed`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kstretch_api::names::MEMBER_OBJECTS_FINALIZER;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::kafka::Error;
use crate::link::{Agents, Owner, Owners, Part};

/// The error policies of the owning resources' controllers retry a transient failure after up
/// to 1 s, 2 s, 4 s... 10 s per resource; what agents report wakes every resource sooner anyway.
pub const RETRY_CAP: std::time::Duration = std::time::Duration::from_secs(10);

/// Where the deletion of a resource stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Deletion {
    /// Released on the user's word: its objects are gone from every member cluster.
    Released,
    /// Released without cleaning up: it was never ours to clean up, or its CRD is being
    /// removed (not the user's deletion: its objects stay, unclaimed).
    Abandoned,
    /// These member clusters' agents have not confirmed yet.
    Waiting(Vec<String>),
}

/// Keeps the owner's last contribution; an owner with none yet is retained as it is in every
/// member cluster (never "nothing desired"): for a resource that is invalid, paused or failed.
pub fn keep_or_retain(owners: &Owners, owner: &Owner) -> Result<(), Error> {
    if owners.get(owner).is_none() {
        owners.put(owner.clone(), Part::Retain)?;
    }
    Ok(())
}

/// Puts the finalizer on a resource central reconciles.
pub async fn claim<K>(api: &Api<K>, obj: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    crate::finalizer::add(api, obj, MEMBER_OBJECTS_FINALIZER).await
}

/// One step of the deletion of `obj` (which has a deletion timestamp): declares it to the
/// agents, and releases the finalizer once every member cluster confirmed. Safe to repeat.
pub async fn delete<K>(
    client: &Client,
    api: &Api<K>,
    obj: &K,
    owner: &Owner,
    owners: &Owners,
    agents: &Agents,
) -> Result<Deletion, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !obj
        .finalizers()
        .iter()
        .any(|f| f == MEMBER_OBJECTS_FINALIZER)
    {
        owners.forget(owner)?;
        return Ok(Deletion::Abandoned);
    }
    // Asked once: a deletion already declared was the user's.
    if !owners.deleted().contains(owner) && crd_being_removed::<K>(client).await? {
        tracing::warn!(namespace = %owner.namespace, name = %owner.name, kind = owner.kind.as_str(),
            "deleted with its CRD: its objects stay in the member clusters, unclaimed");
        owners.forget(owner)?;
        crate::finalizer::remove(api, obj, MEMBER_OBJECTS_FINALIZER).await?;
        return Ok(Deletion::Abandoned);
    }
    owners.delete(owner)?;
    let waiting = unconfirmed(owner, owners, agents);
    if !waiting.is_empty() {
        return Ok(Deletion::Waiting(waiting));
    }
    crate::finalizer::remove(api, obj, MEMBER_OBJECTS_FINALIZER).await?;
    owners.deletion_done(owner)?;
    tracing::info!(namespace = %owner.namespace, name = %owner.name, kind = owner.kind.as_str(),
        "deleted: every member cluster removed its objects");
    Ok(Deletion::Released)
}

/// The member clusters whose agent has not confirmed the deletion of `owner`.
fn unconfirmed(owner: &Owner, owners: &Owners, agents: &Agents) -> Vec<String> {
    let entry = owner.entry(false);
    owners
        .members()
        .into_iter()
        .filter(|alias| {
            let hash = owners.published_hash(alias);
            !agents
                .get(alias)
                .is_some_and(|r| r.confirms_deletion(&entry, hash.as_deref()))
        })
        .collect()
}

/// Whether the CRD of `K` is gone or being deleted: the apiserver then deletes every resource
/// of it, which is not a deletion the user asked for.
pub async fn crd_being_removed<K>(client: &Client) -> Result<bool, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let name = format!("{}.{}", K::plural(&()), K::group(&()));
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    Ok(crds
        .get_opt(&name)
        .await?
        .is_none_or(|crd| crd.metadata.deletion_timestamp.is_some()))
}
