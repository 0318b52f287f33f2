//! What Kafka holds for a user: its SCRAM credential, its ACLs and its quotas, brought to what
//! is desired (only the differences are written) or removed when the user goes.

use std::collections::BTreeMap;

use kstretch_kadmin::{AclBinding, AdminClient, Error};

use super::desired::{Desired, QUOTA_KEYS, principal};

/// Makes `principal`'s ACLs exactly `wanted`.
async fn sync_acls(
    admin: &AdminClient,
    principal: &str,
    wanted: &[AclBinding],
) -> Result<(), Error> {
    let current = admin.describe_acls(principal).await?;
    let missing: Vec<AclBinding> = wanted
        .iter()
        .filter(|a| !current.contains(a))
        .cloned()
        .collect();
    let extra: Vec<AclBinding> = current
        .into_iter()
        .filter(|a| !wanted.contains(a))
        .collect();
    admin.create_acls(&missing).await?;
    admin.delete_acls(&extra).await
}

/// Makes `username`'s quotas exactly `wanted`.
async fn sync_quotas(
    admin: &AdminClient,
    username: &str,
    wanted: &BTreeMap<String, f64>,
) -> Result<(), Error> {
    let current = admin.user_quotas(username).await?;
    let set: BTreeMap<String, f64> = wanted
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    let remove: Vec<String> = QUOTA_KEYS
        .iter()
        .filter(|k| current.contains_key(**k) && !wanted.contains_key(**k))
        .map(|k| (*k).to_owned())
        .collect();
    admin.alter_user_quotas(username, &set, &remove).await
}

/// Brings the user's ACLs (when the cluster runs an authorizer) and quotas to `desired`, and
/// leaves none under the user's other name.
pub async fn sync(admin: &AdminClient, desired: &Desired, authorizer: bool) -> Result<(), Error> {
    if authorizer {
        sync_acls(admin, &desired.principal(), &desired.acls).await?;
        sync_acls(admin, &principal(&desired.other_username), &[]).await?;
    }
    sync_quotas(admin, &desired.username, &desired.quotas).await?;
    sync_quotas(admin, &desired.other_username, &BTreeMap::new()).await
}

/// Makes Kafka's SCRAM credential of `name` match `password` (the password, and whether Kafka
/// was given it already): set unless Kafka has one that is this password; removed when `None`.
pub async fn sync_scram(
    admin: &AdminClient,
    name: &str,
    password: Option<(&str, bool)>,
) -> Result<(), Error> {
    let exists = admin.has_scram_sha512(name).await?;
    match password {
        Some((password, applied)) if !(exists && applied) => {
            admin.set_scram_sha512(name, password).await
        }
        Some(_) => Ok(()),
        None if exists => admin.delete_scram_sha512(name).await,
        None => Ok(()),
    }
}

/// Removes everything Kafka holds for the user `name` under both its names.
pub async fn revoke(admin: &AdminClient, name: &str, authorizer: bool) -> Result<(), Error> {
    let names = [name.to_owned(), format!("CN={name}")];
    for username in &names {
        if authorizer {
            sync_acls(admin, &principal(username), &[]).await?;
        }
        sync_quotas(admin, username, &BTreeMap::new()).await?;
    }
    sync_scram(admin, name, None).await
}
