//! How central reaches each Kafka cluster: one admin client per bootstrap address, kept
//! between reconciliations, speaking mutual TLS with the cluster CA of the `Kafka` the address
//! belongs to, and where each `Kafka` is reached. What a pass reads through it is
//! [`super::view`].

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstretch_kadmin::{AdminClient, AdminConfig, Error, Tls};

use crate::pki::{self, Ca, Refusal};

/// Admin clients by bootstrap servers, and where each `Kafka` is reached (shared by the `Kafka`
/// reconciler, which works it out, and the topic operator).
#[derive(Debug, Clone, Default)]
pub struct KafkaAccess {
    clients: Arc<Mutex<HashMap<String, AdminClient>>>,
    bootstraps: Arc<Mutex<HashMap<(String, String), String>>>,
    /// The TLS settings of each bootstrap address.
    tls: Arc<Mutex<HashMap<String, Tls>>>,
    /// Central's TLS settings per `Kafka`, with the CA certificate they were made for.
    identities: Arc<Mutex<HashMap<KafkaKey, (String, Tls)>>>,
}

/// A `Kafka` by namespace and name.
type KafkaKey = (String, String);

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl KafkaAccess {
    /// Records the bootstrap servers of the `Kafka` `namespace/name`.
    pub fn set_bootstrap(&self, namespace: &str, name: &str, bootstrap: &str) {
        self.bootstraps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                (namespace.to_owned(), name.to_owned()),
                bootstrap.to_owned(),
            );
    }

    /// The bootstrap servers of the `Kafka` `namespace/name`, once its reconciler worked them out.
    pub fn bootstrap(&self, namespace: &str, name: &str) -> Option<String> {
        self.bootstraps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Central's TLS settings for the `Kafka` `namespace/name` with cluster CA `ca`: trusting
    /// the CA, presenting a client certificate it issued (made once per CA).
    pub fn tls_for(&self, namespace: &str, name: &str, ca: &Ca) -> Result<Tls, Refusal> {
        let key = (namespace.to_owned(), name.to_owned());
        if let Some((trusted, tls)) = locked(&self.identities).get(&key)
            && *trusted == ca.trusted
        {
            return Ok(tls.clone());
        }
        let identity = pki::central_identity(ca)?;
        let tls =
            Tls::new(&ca.trusted, Some((&identity.cert, &identity.key))).map_err(|e| Refusal {
                reason: "InvalidClusterCa",
                message: format!("the cluster CA cannot be used for TLS: {e}"),
            })?;
        locked(&self.identities).insert(key, (ca.trusted.clone(), tls.clone()));
        Ok(tls)
    }

    /// Records that `bootstrap` is reached with `tls` (plaintext when `None`); a client made
    /// with other settings is dropped.
    pub fn secure(&self, bootstrap: &str, tls: Option<&Tls>) {
        let mut all = locked(&self.tls);
        let same = match (all.get(bootstrap), tls) {
            (Some(old), Some(new)) => old.same_as(new),
            (None, None) => true,
            _ => false,
        };
        if !same {
            match tls {
                Some(tls) => all.insert(bootstrap.to_owned(), tls.clone()),
                None => all.remove(bootstrap),
            };
            self.forget(bootstrap);
        }
    }

    /// The client for `bootstrap` (comma-separated `host:port`), connecting if needed.
    pub async fn client(&self, bootstrap: &str) -> Result<AdminClient, Error> {
        if let Some(client) = self.lock().get(bootstrap).cloned() {
            return Ok(client);
        }
        let tls = locked(&self.tls).get(bootstrap).cloned();
        let config = AdminConfig::new(
            bootstrap
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty()),
        )
        .with_client_id("kstretch-central")
        .with_connect_timeout(Duration::from_secs(5))
        .with_request_timeout(Duration::from_secs(15));
        let config = match tls {
            Some(tls) => config.with_tls(tls),
            None => config,
        };
        let client = AdminClient::connect(config).await?;
        self.lock().insert(bootstrap.to_owned(), client.clone());
        Ok(client)
    }

    /// Drops the client of `bootstrap` after a failure, so the next call reconnects from the
    /// bootstrap list (the cluster's brokers may all have moved).
    pub fn forget(&self, bootstrap: &str) {
        self.lock().remove(bootstrap);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, AdminClient>> {
        self.clients.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The unfenced brokers, each with its rack (its Kubernetes cluster).
pub async fn broker_racks(admin: &AdminClient) -> Result<BTreeMap<i32, String>, Error> {
    let cluster = admin.describe_cluster(false).await?;
    Ok(cluster
        .brokers
        .iter()
        .filter(|b| !b.fenced)
        .map(|b| (b.id, b.rack.clone().unwrap_or_default()))
        .collect())
}
