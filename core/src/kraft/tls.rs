//! TLS of the nodes: where a node finds its certificate, key and the cluster CA, the
//! per-listener SSL options that point Kafka at them, and every host name a node's certificate
//! must carry so that whoever reaches it by any of its addresses can verify it.

use std::collections::{BTreeMap, BTreeSet};

use super::addressing::{bootstrap_service_name, headless_service_name, node_endpoint, pod_name};
use super::error::ConfigError;
use super::model::{
    Addressing, AdvertisedHost, CONTROLPLANE_LISTENER, CONTROLPLANE_PORT, KafkaCluster,
    NODE_ADDRESS_DIR, NODE_ADDRESS_PROVIDER, Node, REPLICATION_LISTENER, REPLICATION_PORT,
};

/// Where the node's Secret (certificate, key, cluster CA certificates) is mounted.
pub const CERTS_DIR: &str = "/opt/kafka/cluster-certs";
/// Key of the node's certificate chain (PEM) in its Secret.
pub const CERT_FILE: &str = "tls.crt";
/// Key of the node's private key (PKCS#8 PEM) in its Secret.
pub const KEY_FILE: &str = "tls.key";
/// Key of the cluster CA certificates the node trusts (PEM, one or more) in its Secret.
pub const CA_FILE: &str = "ca.crt";
/// Key of the clients CA certificates in the node's Secret, present when a listener
/// authenticates clients by certificate.
pub const CLIENTS_CA_FILE: &str = "clients-ca.crt";

/// Keys of listener `config_name`'s own certificate chain and key in the node's Secret
/// (`configuration.brokerCertChainAndKey`).
pub fn listener_cert_files(config_name: &str) -> (String, String) {
    let base = config_name.to_lowercase();
    (format!("{base}.crt"), format!("{base}.key"))
}

/// Alias of the `DirectoryConfigProvider` that reads the mounted Secret. Kafka reads a PEM
/// key from a file only when the key is encrypted with a password, which would then have to
/// stand in the ConfigMap; read as a value, an unencrypted key needs none.
pub const CONFIG_PROVIDER: &str = "kstretchcerts";
const DIRECTORY_PROVIDER_CLASS: &str =
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider";

fn from_certs_dir(file: &str) -> String {
    format!("${{{CONFIG_PROVIDER}:{CERTS_DIR}:{file}}}")
}

/// The options that make the node load its certificate and the CA, set once, and the user's
/// own `config.providers` kept.
pub(crate) fn provider_options(user: Option<&str>) -> BTreeMap<String, String> {
    let providers = match user.map(str::trim).filter(|p| !p.is_empty()) {
        Some(user) => format!("{user},{CONFIG_PROVIDER}"),
        None => CONFIG_PROVIDER.to_owned(),
    };
    BTreeMap::from([
        ("config.providers".to_owned(), providers),
        (
            format!("config.providers.{CONFIG_PROVIDER}.class"),
            DIRECTORY_PROVIDER_CLASS.to_owned(),
        ),
        (
            format!("config.providers.{CONFIG_PROVIDER}.param.allowed.paths"),
            CERTS_DIR.to_owned(),
        ),
    ])
}

/// The options that let a broker read the node addresses its start script wrote (see
/// [`AdvertisedHost::NodeAddress`]), added to the `config.providers` it has.
pub(crate) fn node_address_provider(providers: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "config.providers".to_owned(),
            format!("{providers},{NODE_ADDRESS_PROVIDER}"),
        ),
        (
            format!("config.providers.{NODE_ADDRESS_PROVIDER}.class"),
            DIRECTORY_PROVIDER_CLASS.to_owned(),
        ),
        (
            format!("config.providers.{NODE_ADDRESS_PROVIDER}.param.allowed.paths"),
            NODE_ADDRESS_DIR.to_owned(),
        ),
    ])
}

/// How a listener authenticates the clients that connect to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientAuth {
    /// Server certificate only (a user's `tls: true` listener).
    None,
    /// Mutual TLS: a client certificate signed by the cluster CA (the operator's listeners).
    Required,
    /// Mutual TLS: a client certificate signed by the clients CA (`authentication: tls`).
    Clients,
}

/// The SSL options of listener `name` (Kafka listener name), which Kafka applies to the
/// server side and, for the controller and replication listeners, to the node's own client
/// side (broker to controller, replica fetchers). Host names are verified (Kafka's default).
pub(crate) fn listener_options(
    name: &str,
    auth: ClientAuth,
    custom_certificate: bool,
) -> BTreeMap<String, String> {
    let prefix = format!("listener.name.{}.", name.to_lowercase());
    let trusted = match auth {
        ClientAuth::Clients => CLIENTS_CA_FILE,
        ClientAuth::None | ClientAuth::Required => CA_FILE,
    };
    let (cert, key) = if custom_certificate {
        listener_cert_files(name)
    } else {
        (CERT_FILE.to_owned(), KEY_FILE.to_owned())
    };
    let mut options = BTreeMap::from([
        ("ssl.keystore.type", "PEM".to_owned()),
        ("ssl.keystore.certificate.chain", from_certs_dir(&cert)),
        ("ssl.keystore.key", from_certs_dir(&key)),
        ("ssl.truststore.type", "PEM".to_owned()),
        ("ssl.truststore.certificates", from_certs_dir(trusted)),
    ]);
    if auth != ClientAuth::None {
        options.insert("ssl.client.auth", "required".to_owned());
    }
    options
        .into_iter()
        .map(|(k, v)| (format!("{prefix}{k}"), v))
        .collect()
}

/// Every name and address `node` is reached by: its pod's DNS names under the headless
/// service, the bootstrap and headless Service names (short, namespaced, `.svc`, and
/// `.svc.cluster.local`), and the host of every listener it advertises in this addressing
/// mode (Multi-Cluster Services names, a per-node Service's IP or host name). A certificate
/// with these names verifies however a client or another node reaches the node.
pub fn node_hostnames(
    cluster: &KafkaCluster,
    node: &Node,
) -> Result<BTreeSet<String>, ConfigError> {
    let ns = &cluster.namespace;
    let headless = headless_service_name(&cluster.name);
    let pod = pod_name(&cluster.name, &node.pool, node.id);
    let mut names = BTreeSet::new();
    for service in [bootstrap_service_name(&cluster.name), headless.clone()] {
        names.insert(service.clone());
        names.insert(format!("{service}.{ns}"));
        names.insert(format!("{service}.{ns}.svc"));
        names.insert(format!("{service}.{ns}.svc.cluster.local"));
        if let Addressing::MultiClusterServices { domain } = &cluster.addressing {
            names.insert(format!("{service}.{ns}.svc.{domain}"));
        }
    }
    names.insert(format!("{pod}.{headless}.{ns}.svc"));
    names.insert(format!("{pod}.{headless}.{ns}.svc.cluster.local"));

    let mut listeners = Vec::new();
    if node.is_controller() {
        listeners.push((CONTROLPLANE_LISTENER.to_owned(), CONTROLPLANE_PORT));
    }
    if node.is_broker() {
        listeners.push((REPLICATION_LISTENER.to_owned(), REPLICATION_PORT));
        for l in &cluster.listeners {
            if !l.advertised_per_broker() {
                listeners.push((l.config_name(), l.port));
                continue;
            }
            let Some(advertised) = l.advertised.get(&node.id) else {
                continue;
            };
            names.extend(advertised.names.iter().cloned());
            match &advertised.host {
                AdvertisedHost::Fixed(host) => {
                    names.insert(host.clone());
                }
                // The broker's node is known only once its pod runs: a TLS listener's
                // certificate names the address of every node of its cluster it may
                // run on.
                AdvertisedHost::NodeAddress { candidates } if l.tls => {
                    names.extend(candidates.iter().cloned());
                }
                AdvertisedHost::NodeAddress { .. } => {}
            }
        }
    }
    for (listener, port) in listeners {
        names.insert(node_endpoint(cluster, node, &listener, port)?.host);
    }
    Ok(names)
}
