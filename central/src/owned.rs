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

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kstretch_api::condition::Condition;
use kstretch_api::names::MEMBER_OBJECTS_FINALIZER;
use kstretch_runtime::backoff::Backoff;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::Error;
use crate::link::{Agents, Owner, OwnerKind, Owners, Part};
use crate::metrics::OwnerMetrics;

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

/// The conditions of a paused owning resource (see [`crate::status::is_paused`]) after its last
/// desired state was kept (or its objects retained): Ready is `Unknown`, saying why.
pub fn paused(
    owners: &Owners,
    owner: &Owner,
    conditions: &[Condition],
    now: &str,
) -> Result<Vec<Condition>, Error> {
    keep_or_retain(owners, owner)?;
    Ok(crate::status::paused(conditions, now))
}

/// What [`run`] needs of an owning controller's context.
pub trait OwnerContext<K: Resource<DynamicType = ()>>: Send + Sync + 'static {
    /// The kind of owner its resources are.
    const KIND: OwnerKind;
    fn client(&self) -> &Client;
    fn owners(&self) -> &Owners;
    fn agents(&self) -> &Agents;
    /// Consecutive failures per resource, for the error policy.
    fn retries(&self) -> &Backoff<ObjectRef<K>>;
    fn metrics(&self) -> &OwnerMetrics;
}

/// Implements [`OwnerContext`] for a context struct with the fields `client`, `owners`,
/// `agents`, `retries` and `metrics`, for resources of kind `$kind`.
macro_rules! owner_context {
    ($context:ty, $resource:ty, $kind:expr) => {
        impl $crate::owned::OwnerContext<$resource> for $context {
            const KIND: $crate::link::OwnerKind = $kind;

            fn client(&self) -> &kube::Client {
                &self.client
            }

            fn owners(&self) -> &$crate::link::Owners {
                &self.owners
            }

            fn agents(&self) -> &$crate::link::Agents {
                &self.agents
            }

            fn retries(
                &self,
            ) -> &kstretch_runtime::backoff::Backoff<kube::runtime::reflector::ObjectRef<$resource>>
            {
                &self.retries
            }

            fn metrics(&self) -> &$crate::metrics::OwnerMetrics {
                &self.metrics
            }
        }
    };
}
pub(crate) use owner_context;

/// The API of `obj`'s kind in its namespace.
fn api_of<K, C>(ctx: &C, obj: &K) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    C: OwnerContext<K>,
{
    Api::namespaced(ctx.client().clone(), &obj.namespace().unwrap_or_default())
}

/// Runs an owning controller (`controller`, with whatever it also watches) until `shutdown`:
/// every resource is reconciled by `apply`, or by `delete` once it is being deleted, and again
/// whenever an agent connects, disconnects or reports (`agent_changes`); beside it runs
/// [`release_and_forget_unseen`].
pub async fn run<K, C, A, AF, D, DF>(
    controller: Controller<K>,
    ctx: Arc<C>,
    agent_changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
    apply: A,
    delete: D,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    C: OwnerContext<K>,
    A: Fn(Arc<K>, Arc<C>) -> AF + Send + Sync + Clone + 'static,
    AF: Future<Output = Result<Action, Error>> + Send + 'static,
    D: Fn(Arc<K>, Arc<C>) -> DF + Send + Sync + Clone + 'static,
    DF: Future<Output = Result<Action, Error>> + Send + 'static,
{
    let releaser = release_and_forget_unseen(
        controller.store(),
        ctx.owners().clone(),
        C::KIND,
        |k: &K| Owner::of(C::KIND, k),
        shutdown.clone(),
    );
    let agent_ticks = futures::stream::unfold(agent_changes, |mut changes| async move {
        changes.changed().await.ok().map(|()| ((), changes))
    });
    let observer = ctx.clone();
    let run = controller
        .reconcile_all_on(agent_ticks)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(
            move |resource: Arc<K>, ctx: Arc<C>| {
                let span = tracing::info_span!("reconcile", kind = C::KIND.as_str(), namespace = %resource.namespace().unwrap_or_default(), name = %resource.name_any());
                let (apply, delete) = (apply.clone(), delete.clone());
                async move {
                    ctx.metrics().reconcile();
                    let started = std::time::Instant::now();
                    let metrics = ctx.metrics().clone();
                    let result = if resource.meta().deletion_timestamp.is_some() {
                        delete(resource, ctx).await
                    } else {
                        apply(resource, ctx).await
                    };
                    metrics.took(started.elapsed());
                    result
                }
                .instrument(span)
            },
            error_policy,
            ctx,
        )
        .for_each(move |result| {
            observer.retries().observe(&result);
            futures::future::ready(())
        });
    tokio::join!(run, releaser);
}

fn error_policy<K, C>(resource: Arc<K>, error: &Error, ctx: Arc<C>) -> Action
where
    K: Resource<DynamicType = ()>,
    C: OwnerContext<K>,
{
    tracing::warn!(kind = C::KIND.as_str(), name = %resource.name_any(), reason = error.reason(), %error, "reconcile failed; retrying");
    ctx.metrics().error(error.reason());
    // An owner that failed before contributing is retained, so start-up can proceed.
    let _ = keep_or_retain(ctx.owners(), &Owner::of(C::KIND, resource.as_ref()));
    Action::requeue(ctx.retries().failed(ObjectRef::from_obj(resource.as_ref())))
}

/// Releases `kind`'s hold on the desired state once every resource of the first complete list
/// of `store` contributed (or was retained, or is gone), then keeps forgetting the owners of
/// `kind` that central no longer sees. Forgetting deletes nothing: a deletion reaches the
/// agents only through the finalizer's explicit word ([`delete`]).
async fn release_and_forget_unseen<K>(
    store: Store<K>,
    owners: Owners,
    kind: OwnerKind,
    owner_of: impl Fn(&K) -> Owner,
    shutdown: CancellationToken,
) where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    tokio::select! {
        _ = shutdown.cancelled() => return,
        ready = kstretch_runtime::watch::ready(&store) => if !ready { return },
    }
    let initial: Vec<Owner> = store.state().iter().map(|k| owner_of(k)).collect();
    tracing::info!(
        kind = kind.as_str(),
        count = initial.len(),
        "waiting for each of the first list to be reconciled once before agents get snapshots"
    );
    let mut released = false;
    loop {
        let present: BTreeSet<Owner> = store.state().iter().map(|k| owner_of(k)).collect();
        // Other kinds' owners are forgotten by their own controllers.
        for gone in owners
            .owners()
            .into_iter()
            .filter(|o| o.kind == kind && !present.contains(o))
        {
            tracing::info!(kind = kind.as_str(), namespace = %gone.namespace, name = %gone.name,
                "no longer seen: its objects are kept in the member clusters, unclaimed");
            if let Err(e) = owners.forget(&gone) {
                tracing::warn!(error = %e, "cannot publish the desired state without an owner no longer seen");
            }
        }
        if !released
            && initial
                .iter()
                .all(|o| owners.has_seen(o) || !present.contains(o))
        {
            match owners.release(kind) {
                Ok(()) => {
                    tracing::info!(
                        kind = kind.as_str(),
                        "every resource of the first list contributed (the desired state opens once every kind has)"
                    );
                    released = true;
                }
                Err(e) => tracing::warn!(error = %e, "cannot publish the desired state yet"),
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
        }
    }
}

/// Puts the finalizer on a resource central reconciles.
pub async fn claim<K, C>(ctx: &C, obj: &K) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    C: OwnerContext<K>,
{
    crate::finalizer::add(&api_of(ctx, obj), obj, MEMBER_OBJECTS_FINALIZER).await
}

/// One step of the deletion of `obj` (which has a deletion timestamp): declares it to the
/// agents, and releases the finalizer once every member cluster confirmed. Safe to repeat.
pub async fn delete<K, C>(ctx: &C, obj: &K) -> Result<Deletion, Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    C: OwnerContext<K>,
{
    let (client, api, owners) = (ctx.client(), api_of(ctx, obj), ctx.owners());
    let owner = &Owner::of(C::KIND, obj);
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
        crate::finalizer::remove(&api, obj, MEMBER_OBJECTS_FINALIZER).await?;
        return Ok(Deletion::Abandoned);
    }
    owners.delete(owner)?;
    let waiting = unconfirmed(owner, owners, ctx.agents());
    if !waiting.is_empty() {
        return Ok(Deletion::Waiting(waiting));
    }
    crate::finalizer::remove(&api, obj, MEMBER_OBJECTS_FINALIZER).await?;
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
