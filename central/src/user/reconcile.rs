//! One `KafkaUser` reconciliation, as a pipeline: its Kafka → what it asks for (pure) → its
//! credentials → Kafka's SCRAM credential, ACLs and quotas → its Secret → status. Deleting the
//! user revokes what Kafka holds for it before the finalizer goes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kstretch_api::condition::{self, Condition};
use kstretch_api::{Kafka, KafkaUser, KafkaUserStatus};
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::desired::{self, Credentials, Desired};
use super::{grants, secret};
use crate::controller::Context;
use crate::kafka::maintenance;
use crate::pki::{self, CaKind, CertError, Refusal};
use crate::status::{conditions, not_ready, now};
use crate::topic::clusters::{self, KafkaRef, TargetError};
use kstretch_api::names::USER_OPERATOR_FINALIZER as FINALIZER;

/// How often an unchanged user is looked at again: certificates near expiry are renewed, and
/// credentials or ACLs changed behind the operator's back are put back.
const RESYNC: Duration = Duration::from_secs(300);

pub use crate::controller::Error;
use crate::controller::key;

/// Reconciles `user`; its status is written once, a failure's too, before it is retried.
pub async fn apply(user: Arc<KafkaUser>, ctx: Arc<Context>) -> Result<Action, Error> {
    if user.metadata.deletion_timestamp.is_some() {
        let result = cleanup(&user, &ctx).await;
        if result.is_ok() {
            ctx.retries.succeeded(&key(user.as_ref()));
        }
        return result;
    }
    let (outcome, result) = match reconcile(&user, &ctx).await {
        Ok(outcome) => {
            ctx.retries.succeeded(&key(user.as_ref()));
            let action = outcome.action.clone();
            (outcome, Ok(action))
        }
        Err(e) => (
            Outcome::waiting(not_ready(e.reason(), e.to_string()), Action::await_change()),
            Err(e),
        ),
    };
    let done = outcome.done.as_ref().map(|(d, s)| (d, s.clone()));
    write_status(&ctx, &user, outcome.ready, done).await?;
    result
}

/// How a reconciliation ends: the `Ready` condition, and once the user is served, what it
/// was served as (its username and Secret).
struct Outcome {
    ready: Condition,
    done: Option<(Desired, Option<String>)>,
    action: Action,
}

impl Outcome {
    fn waiting(ready: Condition, action: Action) -> Outcome {
        Outcome {
            ready,
            done: None,
            action,
        }
    }
}

async fn reconcile(user: &KafkaUser, ctx: &Context) -> Result<Outcome, Error> {
    let api: Api<KafkaUser> =
        Api::namespaced(ctx.client.clone(), &user.namespace().unwrap_or_default());
    crate::finalizer::add(&api, user, FINALIZER).await?;

    let (kafka_ref, kafka) = match target(user, ctx) {
        Ok(found) => found,
        // The Kafka may be created later: look again now and then, not only on a change.
        Err(e) => {
            let refused = not_ready(e.reason(), e.to_string());
            return Ok(Outcome::waiting(refused, Action::requeue(RESYNC)));
        }
    };
    let desired = match desired::desired(user) {
        Ok(d) => d,
        Err(invalid) => return Ok(refuse(ctx, invalid.reason(), invalid.to_string())),
    };
    let authorizer = kafka.spec.kafka.authorization.is_some();
    if !authorizer && !desired.acls.is_empty() {
        let message = format!(
            "Kafka {kafka_ref} has no .spec.kafka.authorization, so the user's ACLs would not be enforced; set authorization (type simple) on the Kafka or remove .spec.authorization.acls"
        );
        return Ok(refuse(ctx, "AuthorizationNotEnabled", message));
    }

    let existing = secret::current(&ctx.client, user).await?;
    let credentials = match credentials(ctx, user, &kafka, &desired, existing.as_ref()).await? {
        Ok(c) => c,
        Err(r) => return Ok(refuse(ctx, r.reason, r.message)),
    };

    let admin = admin(ctx, &kafka_ref, &kafka).await?;
    let password = match &credentials {
        Made::Scram { password, applied } => Some((password.as_str(), *applied)),
        _ => None,
    };
    grants::sync_scram(&admin, &user.name_any(), password).await?;
    grants::sync(&admin, &desired, authorizer).await?;

    let secret_name = match credentials {
        Made::Nothing => {
            secret::delete_owned(&ctx.client, user, existing.as_ref()).await?;
            None
        }
        Made::Certificate(data) => {
            secret::apply(&ctx.client, user, &kafka_ref.name, data, BTreeMap::new()).await?;
            Some(user.name_any())
        }
        Made::Scram { password, .. } => {
            let data = secret::scram_data(&user.name_any(), &password)
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()))
                .collect();
            let applied = BTreeMap::from([(
                secret::APPLIED_PASSWORD.to_owned(),
                secret::password_digest(&password),
            )]);
            secret::apply(&ctx.client, user, &kafka_ref.name, data, applied).await?;
            Some(user.name_any())
        }
    };
    Ok(Outcome {
        ready: Condition::new(condition::READY, condition::TRUE),
        done: Some((desired, secret_name)),
        action: Action::requeue(RESYNC),
    })
}

/// The credentials worked out for the user's Secret.
enum Made {
    Nothing,
    Certificate(BTreeMap<String, Vec<u8>>),
    Scram { password: String, applied: bool },
}

/// The user's credentials: a certificate of the clients CA, or a SCRAM password (and whether
/// Kafka was given this one already), or nothing to keep.
async fn credentials(
    ctx: &Context,
    user: &KafkaUser,
    kafka: &Kafka,
    desired: &Desired,
    existing: Option<&Secret>,
) -> Result<Result<Made, Refusal>, Error> {
    match &desired.credentials {
        Credentials::None | Credentials::External => Ok(Ok(Made::Nothing)),
        Credentials::Certificate {
            validity_days,
            renewal_days,
        } => {
            // The clients CA is renewed by the `Kafka`'s reconciliation too, in its windows.
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            let windows = maintenance::at(&kafka.spec.maintenance_time_windows, now).windows;
            let ca = match pki::ca(&ctx.client, kafka, CaKind::Clients, windows.open()).await {
                Ok(ca) => ca,
                Err(CertError::Refused(r)) => return Ok(Err(r)),
                Err(CertError::Kube(e)) => return Err(e.into()),
            };
            let validity = validity_days.unwrap_or(ca.settings.validity_days);
            let renewal = renewal_days.unwrap_or(ca.settings.renewal_days);
            Ok(
                secret::certificate_data(user, existing, &ca, validity, renewal)
                    .map(Made::Certificate),
            )
        }
        Credentials::Scram { from } => {
            let password =
                secret::scram_password(&ctx.client, user, from.as_ref(), existing).await?;
            Ok(password.map(|password| {
                let digest = secret::password_digest(&password);
                let applied = existing.is_some_and(|s| {
                    s.annotations().get(secret::APPLIED_PASSWORD) == Some(&digest)
                });
                Made::Scram { password, applied }
            }))
        }
    }
}

async fn admin(
    ctx: &Context,
    kafka_ref: &KafkaRef,
    kafka: &Arc<Kafka>,
) -> Result<kstretch_kadmin::AdminClient, Error> {
    clusters::admin_of(&ctx.access, kafka_ref, kafka).await
}

/// The `Kafka` the user belongs to.
fn target(user: &KafkaUser, ctx: &Context) -> Result<(KafkaRef, Arc<Kafka>), TargetError> {
    clusters::found_kafka(user, &ctx.kafkas.state())
}

/// `Ready=False` for a user the user must fix; looked at again when it changes.
fn refuse(ctx: &Context, reason: &str, message: String) -> Outcome {
    ctx.metrics.failed(reason);
    Outcome::waiting(not_ready(reason, message), Action::await_change())
}

async fn write_status(
    ctx: &Context,
    user: &KafkaUser,
    ready: Condition,
    done: Option<(&Desired, Option<String>)>,
) -> Result<(), kube::Error> {
    let old = user.status.clone().unwrap_or_default();
    let (username, secret) = match done {
        Some((desired, secret)) => (Some(desired.username.clone()), secret),
        None => (old.username.clone(), old.secret.clone()),
    };
    let status = KafkaUserStatus {
        conditions: conditions(&old.conditions, ready, crate::status::NO_WARNINGS, &now()),
        observed_generation: user.metadata.generation,
        username,
        secret,
    };
    match crate::status::apply(&ctx.client, user, status, |u| u.status.as_ref()).await {
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other,
    }
}

/// Revokes what Kafka holds for a deleted user, then lets it go. A user deleted with its CRD
/// keeps its credentials in Kafka (absent is not deleted), as does one whose Kafka is gone.
async fn cleanup(user: &KafkaUser, ctx: &Context) -> Result<Action, Error> {
    if !user.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let api: Api<KafkaUser> =
        Api::namespaced(ctx.client.clone(), &user.namespace().unwrap_or_default());
    let crd_going = crate::owned::crd_being_removed::<KafkaUser>(&ctx.client).await?;
    if !crd_going && let Ok((kafka_ref, kafka)) = target(user, ctx) {
        let admin = admin(ctx, &kafka_ref, &kafka).await?;
        let authorizer = kafka.spec.kafka.authorization.is_some();
        grants::revoke(&admin, &user.name_any(), authorizer).await?;
        tracing::info!("revoked the user's credentials, ACLs and quotas");
    }
    crate::finalizer::remove(&api, user, FINALIZER).await?;
    Ok(Action::await_change())
}

/// The reconciliation's refusals, which need no Kafka, against [`crate::testing::Apiserver`].
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::{Value, json};

    use super::*;
    use crate::testing::{Apiserver, controller_context, ready_at, status_path};

    fn kafka(spec: Value) -> Kafka {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "Kafka",
            "metadata": {"name": "my-cluster", "namespace": "ns"},
            "spec": spec
        }))
        .unwrap()
    }

    fn user(spec: Value) -> KafkaUser {
        serde_json::from_value(json!({
            "apiVersion": "kafka.strimzi.io/v1", "kind": "KafkaUser",
            "metadata": {"name": "alice", "namespace": "ns", "uid": "user-uid",
                         "labels": {"strimzi.io/cluster": "my-cluster"},
                         "finalizers": [FINALIZER]},
            "spec": spec
        }))
        .unwrap()
    }

    /// One reconciliation of `user` with `kafkas` in central's store; the action and the
    /// `Ready` condition written.
    async fn reconciled(user: &KafkaUser, kafkas: &[Kafka]) -> (Action, Value) {
        let apiserver = Apiserver::default();
        apiserver.hold(user);
        let ctx = controller_context(&apiserver, kafkas);
        let pass = apply(Arc::new(user.clone()), Arc::new(ctx));
        let action = tokio::time::timeout(Duration::from_secs(2), pass)
            .await
            .expect("the reconciliation ended")
            .unwrap();
        let writes = apiserver.writes();
        let ready = ready_at(&writes, &status_path::<KafkaUser>("ns", "alice")).clone();
        (action, ready)
    }

    #[tokio::test]
    async fn a_user_of_a_kafka_that_does_not_exist_says_so_and_is_looked_at_again() {
        let (action, ready) = reconciled(&user(json!({})), &[]).await;
        assert_eq!(action, Action::requeue(RESYNC));
        assert_eq!(ready["status"], "False");
        assert_eq!(ready["reason"], "KafkaNotFound");
    }

    #[tokio::test]
    async fn acls_without_an_authorizer_on_the_kafka_are_refused_naming_the_fix() {
        let acls = json!({"authorization": {"type": "simple", "acls": [
            {"resource": {"type": "topic", "name": "orders"}, "operations": ["Read"]}]}});
        let plain = kafka(json!({"kafka": {"listeners": []}}));
        let (action, ready) = reconciled(&user(acls), &[plain]).await;
        assert_eq!(action, Action::await_change());
        assert_eq!(ready["reason"], "AuthorizationNotEnabled");
        assert!(
            ready["message"]
                .as_str()
                .unwrap()
                .contains("set authorization (type simple) on the Kafka"),
            "{ready}"
        );
    }
}
