//! One reconciliation of one `KafkaConnect`, reads and pure decisions taking turns: validate
//! and resolve (pure) → read the Secrets' material and the user's ConfigMaps → decide the
//! member cluster's objects ([`decide::objects`]) → publish them to the agents → read what the
//! agent says and pick the stale worker to roll ([`super::rollout`]) → roll it → decide the
//! status ([`decide::conclude`]) → write it, once.

use std::sync::Arc;
use std::time::Duration;

use kstretch_api::{KafkaConnect, KafkaConnectStatus};
use kstretch_runtime::backoff::Backoff;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};

use super::build;
use super::decide::{self, BUSY_REQUEUE, Standing};
use super::rollout::{self, Seen, Step};
use super::security;
use super::validate;
use crate::config_map;
use crate::error::Error;
use crate::jmx_exporter;
use crate::kafka::resolve::Members;
use crate::link::restart::{PodToRestart, Restarts, replaced};
use crate::link::{Agents, Owner, OwnerKind, Owners, Part};
use crate::logging;
use crate::metrics::OwnerMetrics;
use crate::status::{self, Refusal};

/// How long the agent has to answer a restart.
const RESTART_TIMEOUT: Duration = Duration::from_secs(30);

/// What every reconciliation shares.
#[derive(Clone)]
pub struct Context {
    pub client: Client,
    pub owners: Owners,
    pub agents: Agents,
    pub restarts: Restarts,
    pub members: Members,
    pub metrics: OwnerMetrics,
    /// Consecutive failures per `KafkaConnect`, for [`super::error_policy`].
    pub retries: Arc<Backoff<ObjectRef<KafkaConnect>>>,
}

impl Context {
    pub fn new(
        client: Client,
        owners: Owners,
        agents: Agents,
        restarts: Restarts,
        members: Members,
        metrics: OwnerMetrics,
    ) -> Self {
        Self {
            client,
            owners,
            agents,
            restarts,
            members,
            metrics,
            retries: Arc::new(Backoff::new(crate::owned::RETRY_CAP)),
        }
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("members", &self.members)
            .finish_non_exhaustive()
    }
}

pub fn owner_of(connect: &KafkaConnect) -> Owner {
    Owner::of(OwnerKind::KafkaConnect, connect)
}

pub use crate::owned::keep_or_retain;

/// One step of the deletion of a `KafkaConnect`: its workers leave the member cluster on
/// central's explicit word, and the resource goes once every agent confirmed.
pub async fn delete(connect: Arc<KafkaConnect>, ctx: Arc<Context>) -> Result<Action, Error> {
    match crate::owned::delete(ctx.as_ref(), connect.as_ref()).await? {
        crate::owned::Deletion::Waiting(clusters) => {
            tracing::info!(clusters = %clusters.join(","), "waiting for agents to confirm the deletion");
            Ok(Action::requeue(BUSY_REQUEUE))
        }
        _ => Ok(Action::await_change()),
    }
}

/// Reconciles one `KafkaConnect`; its status is written once, whichever way the pass ends.
pub async fn apply(connect: Arc<KafkaConnect>, ctx: Arc<Context>) -> Result<Action, Error> {
    let owner = owner_of(&connect);
    crate::owned::claim(ctx.as_ref(), connect.as_ref()).await?;
    let now = status::now();
    let mut st = connect.status.clone().unwrap_or_default();
    st.observed_generation = connect.metadata.generation;
    let action = if crate::status::is_paused(connect.as_ref()) {
        st.conditions = crate::owned::paused(&ctx.owners, &owner, &st.conditions, &now)?;
        Action::await_change()
    } else {
        match pass(&ctx, &connect, &owner, &mut st, &now).await? {
            Ok(action) => action,
            Err(refusal) => refuse(&ctx, &owner, &mut st, refusal)?,
        }
    };
    write_status(&ctx.client, &connect, st).await?;
    Ok(action)
}

/// Validates, publishes, and rolls a stale worker; `Err` is a refusal.
async fn pass(
    ctx: &Context,
    connect: &KafkaConnect,
    owner: &Owner,
    st: &mut KafkaConnectStatus,
    now: &str,
) -> Result<Result<Action, Refusal>, Error> {
    let resolved = match validate::resolve(connect, &ctx.members) {
        Ok(r) => r,
        Err(invalid) => {
            return Ok(Err(Refusal::of_all(&invalid, validate::Invalid::reason)));
        }
    };
    let read = match read(ctx, connect, &resolved).await? {
        Ok(read) => read,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let publish = match decide::objects(connect, &resolved, &read) {
        Ok(publish) => publish,
        Err(refusal) => return Ok(Err(refusal)),
    };
    ctx.owners
        .put(owner.clone(), Part::Objects(publish.objects))?;

    // What the agent says of the snapshot just published, and the worker to roll from it.
    let alias = &publish.built.alias;
    let record = ctx.agents.get(alias);
    let published = ctx.owners.published_hash(alias);
    let applied = record.as_ref().is_some_and(|r| {
        published.is_some() && published == r.last_apply.as_ref().map(|a| a.hash.clone())
    });
    let namespace = connect.namespace().unwrap_or_default();
    let component = build::component_name(&connect.name_any());
    let pod_set = record.as_ref().and_then(|r| {
        r.podsets
            .iter()
            .find(|s| s.namespace == namespace && s.name == component)
    });
    let seen = Seen {
        connected: record.as_ref().is_some_and(|r| r.connected),
        applied,
        pod_set,
    };
    let warnings = decide::warnings(connect, &resolved, record.as_ref());
    let standing = match rollout::next(alias, &publish.built.revisions, seen) {
        Step::Done => Standing::Ready,
        Step::Wait(why) if seen.connected => Standing::Deploying(why),
        Step::Wait(why) => Standing::Unreachable(why),
        Step::Restart { pod, uid, why } => {
            Standing::Rolling(restart(ctx, alias, &namespace, &pod, uid, why).await)
        }
    };
    let (status, requeue) = decide::conclude(
        connect,
        &resolved,
        std::mem::take(st),
        standing,
        &warnings,
        now,
    );
    *st = status;
    Ok(Ok(Action::requeue(requeue)))
}

/// What the workers are built from besides the resource: the material of the Secrets their
/// security names, the user's ConfigMaps (metrics rules, logging) and the agents' images; or
/// why a Secret or ConfigMap cannot be used.
async fn read(
    ctx: &Context,
    connect: &KafkaConnect,
    resolved: &validate::Resolved,
) -> Result<Result<decide::Read, Refusal>, Error> {
    let material = match security::material(&ctx.client, connect, &resolved.security).await? {
        Ok(material) => material,
        Err(message) => return Ok(Err(Refusal::new("SecretNotFound", message))),
    };
    let namespace = connect.namespace().unwrap_or_default();
    let client = &ctx.client;
    let rules = config_map::read_named(client, &namespace, resolved.metrics.as_ref(), |s, d| {
        jmx_exporter::rules(s, d, jmx_exporter::CONNECT)
    });
    let rules = match rules.await? {
        Ok(rules) => rules,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let logging_spec = connect.spec.logging.as_ref();
    let external = config_map::read_named(
        client,
        &namespace,
        logging::external_source(logging_spec),
        |s, d| logging::external_text(".spec", s, d),
    );
    let external = match external.await? {
        Ok(text) => text,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let log4j2 = logging::properties(
        &logging::CONNECT_DEFAULTS,
        logging_spec,
        external.as_deref(),
    );
    Ok(Ok(decide::Read {
        material,
        rules,
        log4j2,
        images: ctx.agents.images(),
    }))
}

fn refuse(
    ctx: &Context,
    owner: &Owner,
    st: &mut KafkaConnectStatus,
    Refusal { reason, message }: Refusal,
) -> Result<Action, Error> {
    tracing::warn!(%reason, %message, "KafkaConnect cannot be reconciled as it is");
    ctx.metrics.invalid(reason);
    keep_or_retain(&ctx.owners, owner)?;
    st.conditions = status::conditions(
        &st.conditions,
        status::not_ready(reason, message),
        crate::status::NO_WARNINGS,
        &status::now(),
    );
    Ok(Action::await_change())
}

async fn restart(
    ctx: &Context,
    alias: &str,
    namespace: &str,
    pod: &str,
    uid: String,
    why: &str,
) -> String {
    let request = PodToRestart {
        namespace: namespace.to_owned(),
        name: pod.to_owned(),
        uid,
        reason: why.to_owned(),
        claims: Vec::new(),
    };
    match ctx.restarts.restart(alias, request, RESTART_TIMEOUT).await {
        Ok(result) if replaced(&result) => {
            ctx.metrics.restarted();
            tracing::info!(%pod, cluster = %alias, "rolled Connect worker");
            format!("rolling worker {pod} in cluster {alias}")
        }
        Ok(result) => format!(
            "the agent of {alias} did not restart {pod}: {}",
            result.message
        ),
        Err(e) => format!("cannot restart {pod}: {e}"),
    }
}

/// Server-side applies `.status` unless it is what the resource already has.
async fn write_status(
    client: &Client,
    connect: &KafkaConnect,
    st: KafkaConnectStatus,
) -> Result<(), Error> {
    crate::status::apply(client, connect, st, |c| c.status.as_ref()).await?;
    Ok(())
}

/// The reconciliation's ends that need neither Connect nor agents, against
/// [`crate::testing::Apiserver`]: what it writes there, the [`Action`] it ends with, and what it
/// leaves for the agents.
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use kstretch_api::names;
    use serde_json::{Value, json};

    use super::*;
    use crate::kafka::resolve::tests::members;
    use crate::link::DesiredStates;
    use crate::testing::{Apiserver, nothing_published, ready_at, requests, status_path};

    /// The apiserver, the reconciler's context over it, and the member clusters' desired states.
    struct World {
        apiserver: Apiserver,
        desired: DesiredStates,
        ctx: Arc<Context>,
    }

    fn world(connect: &KafkaConnect) -> World {
        let apiserver = Apiserver::default();
        apiserver.hold(connect);
        let desired = DesiredStates::new();
        let owners = Owners::new(desired.clone(), members().all, [OwnerKind::KafkaConnect]);
        owners.release(OwnerKind::KafkaConnect).unwrap();
        let ctx = Context::new(
            apiserver.client(),
            owners,
            Agents::new(),
            Restarts::default(),
            members(),
            OwnerMetrics::default(),
        );
        World {
            apiserver,
            desired,
            ctx: Arc::new(ctx),
        }
    }

    impl World {
        async fn reconcile(&self, connect: &KafkaConnect) -> Action {
            let pass = apply(Arc::new(connect.clone()), self.ctx.clone());
            tokio::time::timeout(Duration::from_secs(2), pass)
                .await
                .expect("the reconciliation ended")
                .unwrap()
        }
    }

    /// `my-connect` in namespace `ns`, claimed by central, run in beta, with `spec` merged over
    /// a valid one.
    fn connect(spec: Value, annotations: Value) -> KafkaConnect {
        let mut all = json!({"replicas": 2, "bootstrapServers": "my-cluster-kafka-bootstrap:9092",
                             "groupId": "g", "configStorageTopic": "g-configs",
                             "statusStorageTopic": "g-status", "offsetStorageTopic": "g-offsets"});
        for (k, v) in spec.as_object().unwrap() {
            all[k] = v.clone();
        }
        let mut annotations = annotations;
        annotations["strimzi.io/stretch-cluster-alias"] = json!("beta");
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaConnect",
            "metadata": {"name": "my-connect", "namespace": "ns", "uid": "connect-uid",
                         "generation": 1, "annotations": annotations,
                         "finalizers": [names::MEMBER_OBJECTS_FINALIZER]},
            "spec": all
        }))
        .unwrap()
    }

    fn published_in(desired: &DesiredStates, alias: &str) -> usize {
        desired
            .all()
            .iter()
            .filter(|s| s.cluster_alias == alias)
            .map(|s| s.objects.len())
            .sum()
    }

    #[tokio::test]
    async fn a_valid_connect_is_published_to_its_cluster_and_waits_for_its_agent() {
        let c = connect(json!({}), json!({}));
        let world = world(&c);

        let action = world.reconcile(&c).await;

        assert_eq!(action, Action::requeue(BUSY_REQUEUE));
        assert!(published_in(&world.desired, "beta") > 0);
        assert_eq!(published_in(&world.desired, "alpha"), 0);
        let writes = world.apiserver.writes();
        let path = status_path::<KafkaConnect>("ns", "my-connect");
        assert_eq!(requests(&writes), [("PATCH".to_owned(), path.clone())]);
        let ready = ready_at(&writes, &path);
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "ClusterUnreachable");
        let st = &writes[0].body["status"];
        assert_eq!(st["replicas"], 2);
        assert_eq!(st["url"], "http://my-connect-connect-api.ns.svc:8083");
    }

    #[tokio::test]
    async fn an_invalid_connect_is_refused_naming_the_problem_and_nothing_is_published() {
        let c = connect(json!({"replicas": -1}), json!({}));
        let world = world(&c);

        let action = world.reconcile(&c).await;

        assert_eq!(action, Action::await_change());
        assert!(nothing_published(&world.desired));
        let writes = world.apiserver.writes();
        let ready = ready_at(&writes, &status_path::<KafkaConnect>("ns", "my-connect"));
        assert_eq!(ready["status"], "False");
        assert!(
            ready["message"].as_str().unwrap().contains("replicas"),
            "{ready}"
        );
    }

    #[tokio::test]
    async fn a_missing_trusted_certificate_secret_is_refused_and_nothing_is_published() {
        let c = connect(
            json!({"tls": {"trustedCertificates": [
                {"secretName": "my-cluster-cluster-ca-cert", "certificate": "ca.crt"}]}}),
            json!({}),
        );
        let world = world(&c);

        let action = world.reconcile(&c).await;

        assert_eq!(action, Action::await_change());
        assert!(nothing_published(&world.desired));
        let writes = world.apiserver.writes();
        let ready = ready_at(&writes, &status_path::<KafkaConnect>("ns", "my-connect"));
        assert_eq!(ready["reason"], "SecretNotFound");
        assert!(
            ready["message"]
                .as_str()
                .unwrap()
                .contains("Secret my-cluster-cluster-ca-cert does not exist"),
            "{ready}"
        );
    }

    #[tokio::test]
    async fn a_paused_connect_only_says_so_and_waits_for_a_change() {
        let c = connect(json!({}), json!({(names::PAUSE_RECONCILIATION): "true"}));
        let world = world(&c);

        let action = world.reconcile(&c).await;

        assert_eq!(action, Action::await_change());
        let writes = world.apiserver.writes();
        let path = status_path::<KafkaConnect>("ns", "my-connect");
        assert_eq!(requests(&writes), [("PATCH".to_owned(), path.clone())]);
        assert_eq!(ready_at(&writes, &path)["reason"], "ReconciliationPaused");
        assert_eq!(world.ctx.owners.get(&owner_of(&c)), Some(Part::Retain));
    }
}
