//! What central asks Kafka before a destructive step: which brokers still hold partition
//! replicas (scale-down, broker-role removal), which partitions a broker's restart would take
//! below `min.insync.replicas`, which nodes are registered (unregistration), and which
//! partitions sit in one Kubernetes cluster only (a warning). One admin
//! client per bootstrap address, kept between reconciliations, speaking mutual TLS with the
//! cluster CA of the `Kafka` the address belongs to.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kstretch_core::movement::Partition;
use kstretch_core::movement::spread::{self, Confined};
use kstretch_kadmin::{AdminClient, AdminConfig, ConfigResource, Error, Tls};

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

/// [`brokers_holding_replicas`] through the cached client for `bootstrap`; the error in words
/// (a failed client is dropped, so the next call connects afresh).
pub async fn holding_replicas_at(
    access: &KafkaAccess,
    bootstrap: Option<&str>,
    brokers: &BTreeSet<i32>,
) -> Result<BTreeMap<i32, Vec<String>>, String> {
    let Some(bootstrap) = bootstrap else {
        return Err("no bootstrap address for the admin client".to_owned());
    };
    let admin = access.client(bootstrap).await.map_err(|e| e.to_string())?;
    brokers_holding_replicas(&admin, brokers)
        .await
        .map_err(|e| {
            access.forget(bootstrap);
            e.to_string()
        })
}

/// Of `brokers`, those holding at least one partition replica, with a few of the partitions.
pub async fn brokers_holding_replicas(
    admin: &AdminClient,
    brokers: &BTreeSet<i32>,
) -> Result<BTreeMap<i32, Vec<String>>, Error> {
    let topics = admin.describe_topics(None).await?;
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for topic in &topics {
        for p in &topic.partitions {
            for id in p.replicas.iter().filter(|id| brokers.contains(id)) {
                out.entry(*id)
                    .or_default()
                    .push(format!("{}-{}", topic.name, p.index));
            }
        }
    }
    Ok(out)
}

/// Partitions whose replicas all sit in one Kubernetes cluster (a broker's rack) while the
/// brokers run in several: losing that cluster loses them.
pub async fn confined_partitions(admin: &AdminClient) -> Result<Vec<Confined>, Error> {
    let brokers = broker_racks(admin).await?;
    let mut partitions = Vec::new();
    for topic in admin.describe_topics(None).await? {
        for p in topic.partitions {
            partitions.push(Partition {
                topic: topic.name.clone(),
                partition: p.index,
                replicas: p.replicas,
                isr: p.isr.into_iter().collect(),
                leader: Some(p.leader).filter(|l| *l >= 0),
                size: 0,
                min_isr: 1,
            });
        }
    }
    Ok(spread::confined(&partitions, &brokers))
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

/// One partition as the roll check needs it: `(name, replication factor, ISR,
/// min.insync.replicas)`, for [`super::roll::partitions_blocking_restart`].
pub type PartitionIsr = (String, usize, Vec<i32>, usize);

/// Every partition of the cluster with its ISR and its topic's `min.insync.replicas`, in two
/// requests (metadata, then the configs of every topic).
pub async fn partitions(admin: &AdminClient) -> Result<Vec<PartitionIsr>, Error> {
    let topics = admin.describe_topics(None).await?;
    if topics.is_empty() {
        return Ok(Vec::new());
    }
    let resources: Vec<ConfigResource> = topics
        .iter()
        .map(|t| ConfigResource::Topic(t.name.clone()))
        .collect();
    let configs = admin.describe_configs(&resources).await?;
    let mut out = Vec::new();
    for (topic, config) in topics.iter().zip(configs) {
        let min_isr = config
            .get("min.insync.replicas")
            .and_then(|e| e.value.as_deref())
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1);
        for p in &topic.partitions {
            out.push((
                format!("{}-{}", topic.name, p.index),
                p.replicas.len(),
                p.isr.clone(),
                min_isr,
            ));
        }
    }
    Ok(out)
}
