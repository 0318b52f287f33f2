//! Applying one snapshot in the agent's cluster: server-side apply of every accepted object
//! under the one field manager (forced, so central's word wins over stale owners), kind by kind
//! in dependency order, then deleting what the agent applied earlier and the snapshot no longer
//! lists. Runs only on an explicit snapshot from central, never at start-up or on disconnect.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::StreamExt;
use kstretch_api::owner::OwnerKey;
use kstretch_proto::agent::v1::{
    AppliedSummary, ApplyReport, ObjectResult, Outcome, Owner, Snapshot, UnclaimedOwner,
};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, ResourceExt};

use super::metrics::LinkMetrics;
use super::objects::{
    self, Checked, Claims, Existing, FIELD_MANAGER, Key, MANAGED_BY_LABEL, MANAGED_BY_VALUE,
    MANAGED_KINDS, ManagedKind, Prepared, Scope,
};

/// How many objects of one kind are applied at once.
const CONCURRENCY: usize = 8;

/// Applies snapshots; one at a time.
#[derive(Clone)]
pub struct Applier {
    client: Client,
    scope: Scope,
    metrics: LinkMetrics,
    last: Arc<Mutex<Option<AppliedSummary>>>,
    /// Since when each unclaimed owner (and stamped UID) has been kept; logged once on entry.
    unclaimed_since: Arc<Mutex<BTreeMap<(OwnerKey, String), SystemTime>>>,
}

/// What pruning did: one result per deletion, and what it found about owners.
#[derive(Debug, Default)]
struct Pruned {
    results: Vec<ObjectResult>,
    /// Owners with a failed list or delete: their deletion is not confirmed this time.
    incomplete: bool,
    failed_owners: BTreeSet<OwnerKey>,
    unclaimed: BTreeMap<(OwnerKey, String), u32>,
}

impl std::fmt::Debug for Applier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Applier")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl Applier {
    pub fn new(client: Client, scope: Scope, metrics: LinkMetrics) -> Self {
        Self {
            client,
            scope,
            metrics,
            last: Arc::new(Mutex::new(None)),
            unclaimed_since: Arc::default(),
        }
    }

    /// What the last snapshot did, for `Hello` after a reconnect.
    pub fn last_applied(&self) -> Option<AppliedSummary> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Applies `snapshot` and reports one result per object plus one per deletion.
    #[tracing::instrument(skip_all, fields(generation = snapshot.generation, hash = %snapshot.hash))]
    pub async fn apply(&self, snapshot: &Snapshot) -> ApplyReport {
        let checked = objects::check(snapshot, &self.scope);
        let mut results: Vec<ObjectResult> = checked
            .iter()
            .map(|c| match &c.result {
                Ok(_) => result(&c.key, Outcome::Unspecified, "", "", 0),
                Err(rejection) => result(
                    &c.key,
                    Outcome::Rejected,
                    &rejection.to_string(),
                    rejection.reason(),
                    0,
                ),
            })
            .collect();

        // Kind by kind, in dependency order; objects of one kind concurrently.
        for kind in MANAGED_KINDS {
            // Owned futures: a closure over borrowed objects is not `Send` for every lifetime.
            let batch: Vec<_> = checked
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.result.as_ref().ok().map(|p| (i, p)))
                .filter(|(_, p)| p.kind == kind)
                .map(|(i, prepared)| {
                    let (this, prepared) = (self.clone(), prepared.clone());
                    async move { (i, this.apply_one(&prepared).await) }
                })
                .collect();
            let outcomes: Vec<(usize, ObjectResult)> = futures::stream::iter(batch)
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for (i, outcome) in outcomes {
                results[i] = outcome;
            }
        }

        let claims = Claims::of(snapshot, &checked);
        let mut pruned = self.prune(&checked, &claims).await;
        let confirmed_deleted = confirmed(snapshot, &pruned);
        let unclaimed = self.track_unclaimed(&pruned.unclaimed);
        results.append(&mut pruned.results);

        let count = |o: Outcome| results.iter().filter(|r| r.outcome() == o).count();
        let (applied, rejected, deleted) = (
            count(Outcome::Applied),
            count(Outcome::Rejected) + count(Outcome::DeleteFailed),
            count(Outcome::Deleted),
        );
        self.metrics.applied(
            applied as u64,
            rejected as u64,
            deleted as u64,
            snapshot.generation,
        );
        tracing::info!(applied, rejected, deleted, "snapshot applied");
        let finished_at = SystemTime::now();
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(AppliedSummary {
            generation: snapshot.generation,
            hash: snapshot.hash.clone(),
            applied: u32::try_from(applied).unwrap_or(u32::MAX),
            rejected: u32::try_from(rejected).unwrap_or(u32::MAX),
            deleted: u32::try_from(deleted).unwrap_or(u32::MAX),
            finished_at: Some(finished_at.into()),
        });
        ApplyReport {
            generation: snapshot.generation,
            hash: snapshot.hash.clone(),
            results,
            finished_at: Some(finished_at.into()),
            confirmed_deleted,
            unclaimed,
        }
    }

    /// Records since when each owner is unclaimed, logs those that are new once, and exports
    /// the counts.
    fn track_unclaimed(&self, now: &BTreeMap<(OwnerKey, String), u32>) -> Vec<UnclaimedOwner> {
        let mut since = self
            .unclaimed_since
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        since.retain(|k, _| now.contains_key(k));
        let mut metric: BTreeMap<(String, String, String), u32> = BTreeMap::new();
        let out = now
            .iter()
            .map(|((owner, uid), objects)| {
                let at = *since
                    .entry((owner.clone(), uid.clone()))
                    .or_insert_with(|| {
                        tracing::warn!(owner = %owner, uid = %uid, objects,
                        "kept: central neither reconciles this owner nor declared it deleted; \
                         `kstretch remove-unclaimed` removes its objects on purpose");
                        SystemTime::now()
                    });
                *metric
                    .entry((
                        owner.kind.clone(),
                        owner.namespace.clone(),
                        owner.name.clone(),
                    ))
                    .or_default() += objects;
                UnclaimedOwner {
                    owner: Some(Owner {
                        kind: owner.kind.clone(),
                        namespace: owner.namespace.clone(),
                        name: owner.name.clone(),
                        uid: uid.clone(),
                        retain: false,
                    }),
                    objects: *objects,
                    since: Some(at.into()),
                }
            })
            .collect();
        self.metrics.set_unclaimed(&metric);
        out
    }

    fn api(&self, kind: &ManagedKind, namespace: Option<&str>) -> Api<DynamicObject> {
        let resource = kind.api_resource();
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &resource),
            None => Api::all_with(self.client.clone(), &resource),
        }
    }

    async fn apply_one(&self, prepared: &Prepared) -> ObjectResult {
        let api = self.api(prepared.kind, Some(&prepared.key.namespace));
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api
            .patch(&prepared.key.name, &params, &Patch::Apply(&prepared.body))
            .await
        {
            Ok(_) => result(&prepared.key, Outcome::Applied, "", "", 0),
            Err(err) => {
                let (message, reason, code) = describe(&err);
                tracing::warn!(object = %prepared.key, %reason, %message, "apply rejected");
                result(&prepared.key, Outcome::Rejected, &message, &reason, code)
            }
        }
    }

    /// Deletes the labelled objects in scope that the snapshot makes obsolete (see
    /// [`objects::sort`]) and counts those kept for nobody.
    async fn prune(&self, checked: &[Checked], claims: &Claims) -> Pruned {
        let mut out = Pruned::default();
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}");
        let namespaces: Vec<Option<String>> = match &self.scope {
            Scope::All => vec![None],
            Scope::Namespaces(set) => set.iter().cloned().map(Some).collect(),
        };
        for kind in MANAGED_KINDS {
            for namespace in &namespaces {
                let api = self.api(kind, namespace.as_deref());
                let listed = match api
                    .list_metadata(&ListParams::default().labels(&selector))
                    .await
                {
                    Ok(list) => list,
                    // An optional kind whose CRD this cluster does not have (ServiceExport
                    // without Multi-Cluster Services): nothing of it can exist to delete.
                    Err(kube::Error::Api(status)) if status.code == 404 && kind.optional => {
                        continue;
                    }
                    Err(err) => {
                        // Without the list nothing of this kind is deleted this time.
                        out.incomplete = true;
                        let (message, reason, code) = describe(&err);
                        let key = Key {
                            api_version: kind.api_version(),
                            kind: kind.kind.to_owned(),
                            namespace: namespace.clone().unwrap_or_default(),
                            name: String::new(),
                        };
                        tracing::warn!(kind = kind.kind, %message, "cannot list objects to prune");
                        out.results.push(result(
                            &key,
                            Outcome::DeleteFailed,
                            &format!("cannot list {}: {message}", kind.plural),
                            &reason,
                            code,
                        ));
                        continue;
                    }
                };
                let existing: Vec<Existing> = listed
                    .items
                    .iter()
                    .map(|o| {
                        let key = Key {
                            api_version: kind.api_version(),
                            kind: kind.kind.to_owned(),
                            namespace: o.namespace().unwrap_or_default(),
                            name: o.name_any(),
                        };
                        Existing::from_metadata(key, &o.metadata)
                    })
                    .collect();
                let verdict = objects::sort(&existing, checked, claims, &self.scope);
                for obsolete in verdict.delete {
                    let outcome = self.delete_one(kind, obsolete).await;
                    if outcome.outcome() == Outcome::DeleteFailed
                        && let Some((owner, _)) = &obsolete.owner
                    {
                        out.failed_owners.insert(owner.clone());
                    }
                    out.results.push(outcome);
                }
                for (owner, n) in verdict.unclaimed {
                    *out.unclaimed.entry(owner).or_default() += n;
                }
            }
        }
        out
    }

    async fn delete_one(&self, kind: &ManagedKind, existing: &Existing) -> ObjectResult {
        let api = self.api(kind, Some(&existing.key.namespace));
        // The precondition makes sure a re-created object of the same name is not deleted.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(existing.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&existing.key.name, &params).await {
            Ok(_) => {
                tracing::info!(object = %existing.key, "deleted: no longer desired");
                result(&existing.key, Outcome::Deleted, "", "", 0)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                result(&existing.key, Outcome::Deleted, "", "", 0)
            }
            Err(err) => {
                let (message, reason, code) = describe(&err);
                tracing::warn!(object = %existing.key, %message, "delete failed");
                result(
                    &existing.key,
                    Outcome::DeleteFailed,
                    &message,
                    &reason,
                    code,
                )
            }
        }
    }
}

/// The snapshot's declared deletions that this apply completed: nothing of them is left in the
/// agent's namespaces but claims kept without deleteClaim.
fn confirmed(snapshot: &Snapshot, pruned: &Pruned) -> Vec<Owner> {
    if pruned.incomplete {
        return Vec::new();
    }
    snapshot
        .deleted
        .iter()
        .filter(|d| !pruned.failed_owners.contains(&objects::key_of(d)))
        .cloned()
        .collect()
}

/// The apiserver's message, reason and HTTP code, or the client error.
fn describe(err: &kube::Error) -> (String, String, u32) {
    match err {
        kube::Error::Api(status) => (
            status.message.clone(),
            status.reason.clone(),
            u32::from(status.code),
        ),
        other => (other.to_string(), "ClientError".to_owned(), 0),
    }
}

fn result(key: &Key, outcome: Outcome, message: &str, reason: &str, code: u32) -> ObjectResult {
    ObjectResult {
        r#ref: Some(key.to_ref()),
        outcome: outcome.into(),
        message: message.to_owned(),
        reason: reason.to_owned(),
        code,
    }
}
