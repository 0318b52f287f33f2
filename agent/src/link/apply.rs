//! Applying one snapshot in the agent's cluster: server-side apply of every accepted object
//! under the one field manager (forced, so central's word wins over stale owners), kind by kind
//! in dependency order, then deleting what the agent applied earlier and the snapshot no longer
//! lists. Runs only on an explicit snapshot from central, never at start-up or on disconnect.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use futures::StreamExt;
use kstretch_proto::agent::v1::{
    AppliedSummary, ApplyReport, ObjectResult, Outcome, RetainedCluster, Snapshot,
};
use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::{Api, Client, ResourceExt};

use super::metrics::LinkMetrics;
use super::objects::{
    self, Checked, Existing, FIELD_MANAGER, Key, MANAGED_BY_LABEL, MANAGED_BY_VALUE, MANAGED_KINDS,
    ManagedKind, Prepared, Scope,
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

        results.extend(self.prune(&checked, &snapshot.retained).await);

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
        }
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

    /// Deletes every object labelled as the agent's, in scope, that the snapshot does not list.
    async fn prune(&self, checked: &[Checked], retained: &[RetainedCluster]) -> Vec<ObjectResult> {
        let mut out = Vec::new();
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
                        let (message, reason, code) = describe(&err);
                        let key = Key {
                            api_version: kind.api_version(),
                            kind: kind.kind.to_owned(),
                            namespace: namespace.clone().unwrap_or_default(),
                            name: String::new(),
                        };
                        tracing::warn!(kind = kind.kind, %message, "cannot list objects to prune");
                        out.push(result(
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
                    .map(|o| Existing {
                        key: Key {
                            api_version: kind.api_version(),
                            kind: kind.kind.to_owned(),
                            namespace: o.namespace().unwrap_or_default(),
                            name: o.name_any(),
                        },
                        uid: o.uid().unwrap_or_default(),
                        being_deleted: o.metadata.deletion_timestamp.is_some(),
                        kafka_cluster: o.labels().get(kstretch_api::names::CLUSTER).cloned(),
                        kept_when_unlisted: kind.kind == "PersistentVolumeClaim"
                            && o.annotations()
                                .get(kstretch_api::names::DELETE_CLAIM)
                                .is_none_or(|v| v != "true"),
                    })
                    .collect();
                for obsolete in objects::obsolete(&existing, checked, retained, &self.scope) {
                    out.push(self.delete_one(kind, obsolete).await);
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
