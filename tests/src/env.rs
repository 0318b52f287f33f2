//! Reading the environment file that `tests/env/up.sh` writes: kubeconfigs and addresses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Central's cluster, where the Strimzi resources live.
pub const ALPHA: &str = "alpha";
/// The second member cluster.
pub const BETA: &str = "beta";

/// One simulated Kubernetes cluster of the environment.
#[derive(Debug, Clone)]
pub struct ClusterEnv {
    pub name: String,
    pub kubeconfig: PathBuf,
    /// `KSTRETCH_REAL_NODE_IP_<CLUSTER>`: the address of the cluster's real node (kubelet and
    /// containerd), where its NodePorts are reached from the host and from the other cluster.
    pub real_node_ip: String,
}

/// Everything the environment provides, as written by `tests/env/up.sh`.
#[derive(Debug, Clone)]
pub struct TestEnv {
    pub file: PathBuf,
    pub clusters: Vec<ClusterEnv>,
    pub kafka_bootstrap: String,
    pub kafka_broker_ids: Vec<i32>,
    pub kafka_cluster_id: String,
    pub connect_url: String,
    /// `KSTRETCH_PROMETHEUS_URL`: the Prometheus that scrapes the real nodes' pods.
    pub prometheus_url: String,
    /// `KSTRETCH_PROMETHEUS_TARGETS`: where tests put the addresses of kstretch processes for
    /// that Prometheus to scrape (one JSON file each).
    pub prometheus_targets: Option<PathBuf>,
    /// `KSTRETCH_KAFKA_NODELETE_BOOTSTRAP`: the second, independent Kafka cluster (one
    /// combined node) whose nodes run with `delete.topic.enable=false`, so DeleteTopics is
    /// answered with TOPIC_DELETION_DISABLED.
    pub kafka_nodelete_bootstrap: String,
    /// `KSTRETCH_KAFKA_NODELETE_CLUSTER_ID`: that cluster's id.
    pub kafka_nodelete_cluster_id: String,
    pub log_dir: PathBuf,
    /// `KSTRETCH_KAFKA_LIBS`: the Kafka jars (for private clusters and Kafka tools).
    pub kafka_libs: Option<PathBuf>,
    /// `KSTRETCH_BIN_DIR`: `kafka-run-class`, `kubectl` and the other environment binaries.
    pub bin_dir: Option<PathBuf>,
    /// `KSTRETCH_KAFKA_NEXT_VERSION` and `KSTRETCH_KAFKA_NEXT_LIBS`: the Kafka version whose
    /// image the real nodes also hold (upgrades go to it), and its jars (its own tools).
    pub kafka_next: Option<(String, PathBuf)>,
}

const HOW_TO_START: &str = "start the real test environment first: `tests/env/up.sh` \
    (or run everything with `make test`)";

impl TestEnv {
    /// The environment, loaded once per test binary. Panics with the command to run when the
    /// environment is not up: end-to-end tests never skip silently.
    pub fn get() -> &'static TestEnv {
        static ENV: OnceLock<TestEnv> = OnceLock::new();
        ENV.get_or_init(|| {
            let file = env_file_path();
            let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
                panic!(
                    "cannot read the test environment file {}: {e}\n{HOW_TO_START}",
                    file.display()
                )
            });
            Self::parse(&file, &text).unwrap_or_else(|e| {
                panic!(
                    "bad test environment file {}: {e}\n{HOW_TO_START}",
                    file.display()
                )
            })
        })
    }

    /// Parses `KEY=value` lines (values may be double-quoted).
    pub fn parse(file: &Path, text: &str) -> Result<TestEnv, String> {
        let vars = parse_env_lines(text);
        let get = |key: &str| {
            vars.get(key)
                .cloned()
                .ok_or_else(|| format!("{key} is missing"))
        };
        let clusters = get("KSTRETCH_CLUSTERS")?
            .split_whitespace()
            .map(|name| {
                let upper = name.to_uppercase().replace('-', "_");
                Ok(ClusterEnv {
                    name: name.to_owned(),
                    kubeconfig: PathBuf::from(get(&format!("KSTRETCH_KUBECONFIG_{upper}"))?),
                    real_node_ip: get(&format!("KSTRETCH_REAL_NODE_IP_{upper}"))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if clusters.len() < 2 {
            return Err(format!(
                "KSTRETCH_CLUSTERS names {} cluster(s); at least 2 are needed",
                clusters.len()
            ));
        }
        let kafka_broker_ids = get("KSTRETCH_KAFKA_BROKER_IDS")?
            .split(',')
            .map(|id| {
                id.trim()
                    .parse()
                    .map_err(|e| format!("KSTRETCH_KAFKA_BROKER_IDS: {id:?}: {e}"))
            })
            .collect::<Result<Vec<i32>, String>>()?;
        Ok(TestEnv {
            file: file.to_owned(),
            clusters,
            kafka_bootstrap: get("KSTRETCH_KAFKA_BOOTSTRAP")?,
            kafka_broker_ids,
            kafka_cluster_id: get("KSTRETCH_KAFKA_CLUSTER_ID")?,
            connect_url: get("KSTRETCH_CONNECT_URL")?,
            prometheus_url: get("KSTRETCH_PROMETHEUS_URL")?,
            prometheus_targets: vars.get("KSTRETCH_PROMETHEUS_TARGETS").map(PathBuf::from),
            kafka_nodelete_bootstrap: get("KSTRETCH_KAFKA_NODELETE_BOOTSTRAP")?,
            kafka_nodelete_cluster_id: get("KSTRETCH_KAFKA_NODELETE_CLUSTER_ID")?,
            log_dir: PathBuf::from(get("KSTRETCH_LOG_DIR")?),
            kafka_libs: vars.get("KSTRETCH_KAFKA_LIBS").map(PathBuf::from),
            bin_dir: vars.get("KSTRETCH_BIN_DIR").map(PathBuf::from),
            kafka_next: vars
                .get("KSTRETCH_KAFKA_NEXT_VERSION")
                .zip(vars.get("KSTRETCH_KAFKA_NEXT_LIBS"))
                .map(|(v, libs)| (v.to_string(), PathBuf::from(libs))),
        })
    }

    /// The Kafka jar directory; panics with the command to run when the environment file
    /// does not name one.
    pub fn kafka_libs(&self) -> PathBuf {
        self.kafka_libs.clone().unwrap_or_else(|| {
            panic!(
                "{} names no KSTRETCH_KAFKA_LIBS\n{HOW_TO_START}",
                self.file.display()
            )
        })
    }

    /// The Kafka version upgrades go to, and its jars; panics with the command to run when
    /// the environment file does not name them (an environment from before they existed).
    pub fn kafka_next(&self) -> (String, PathBuf) {
        self.kafka_next.clone().unwrap_or_else(|| {
            panic!(
                "{} names no KSTRETCH_KAFKA_NEXT_VERSION/KSTRETCH_KAFKA_NEXT_LIBS\n{HOW_TO_START}",
                self.file.display()
            )
        })
    }

    /// Bootstrap address of one broker alone (`127.0.0.1:1909<id>`), to ask each broker
    /// separately what it knows.
    pub fn broker_address(&self, id: i32) -> Option<String> {
        let index = self.kafka_broker_ids.iter().position(|b| *b == id)?;
        self.kafka_bootstrap
            .split(',')
            .nth(index)
            .map(str::to_owned)
    }
}

/// `KSTRETCH_ENV_FILE`, else `$KSTRETCH_STATE_DIR/env`, else `~/.local/state/kstretch/env`.
pub fn env_file_path() -> PathBuf {
    if let Some(file) = std::env::var_os("KSTRETCH_ENV_FILE") {
        return PathBuf::from(file);
    }
    let state = std::env::var_os("KSTRETCH_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            PathBuf::from(home).join(".local/state/kstretch")
        });
    state.join("env")
}

fn parse_env_lines(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix("export ").unwrap_or(l).split_once('='))
        .map(|(k, v)| {
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            (k.trim().to_owned(), v.to_owned())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
# written by up.sh
KSTRETCH_STATE_DIR=/s
KSTRETCH_LOG_DIR=/s/logs
KSTRETCH_CLUSTERS="alpha beta"
KSTRETCH_KUBECONFIG_ALPHA=/s/alpha/kubeconfig
KSTRETCH_KUBECONFIG_BETA=/s/beta/kubeconfig
KSTRETCH_REAL_NODE_IP_ALPHA=10.250.0.2
KSTRETCH_REAL_NODE_IP_BETA=10.250.1.2
KSTRETCH_KAFKA_BOOTSTRAP=127.0.0.1:19091,127.0.0.1:19092,127.0.0.1:19093
KSTRETCH_KAFKA_BROKER_IDS=1,2,3
KSTRETCH_KAFKA_CLUSTER_ID=abc
KSTRETCH_CONNECT_URL=http://127.0.0.1:18083
KSTRETCH_PROMETHEUS_URL=http://127.0.0.1:19191
KSTRETCH_KAFKA_LIBS=/c/kafka/libs
KSTRETCH_KAFKA_NODELETE_BOOTSTRAP=127.0.0.1:19095
KSTRETCH_KAFKA_NODELETE_CLUSTER_ID=nodel
"#;

    #[test]
    fn parses_the_env_file() {
        let env = TestEnv::parse(Path::new("/s/env"), SAMPLE).unwrap();
        let names: Vec<_> = env.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["alpha", "beta"]);
        assert_eq!(
            env.clusters[1].kubeconfig,
            PathBuf::from("/s/beta/kubeconfig")
        );
        assert_eq!(env.clusters[1].real_node_ip, "10.250.1.2");
        assert_eq!(env.kafka_broker_ids, [1, 2, 3]);
        assert_eq!(env.broker_address(2).as_deref(), Some("127.0.0.1:19092"));
        assert_eq!(env.broker_address(7), None);
        assert_eq!(env.kafka_libs(), PathBuf::from("/c/kafka/libs"));
        assert_eq!(env.bin_dir, None);
        assert_eq!(env.kafka_nodelete_bootstrap, "127.0.0.1:19095");
        assert_eq!(env.kafka_nodelete_cluster_id, "nodel");
    }

    #[test]
    fn a_missing_key_is_named() {
        let text = SAMPLE.replace("KSTRETCH_KUBECONFIG_BETA=/s/beta/kubeconfig\n", "");
        let err = TestEnv::parse(Path::new("/s/env"), &text).unwrap_err();
        assert_eq!(err, "KSTRETCH_KUBECONFIG_BETA is missing");
        let text = SAMPLE.replace("KSTRETCH_KAFKA_NODELETE_BOOTSTRAP=127.0.0.1:19095\n", "");
        let err = TestEnv::parse(Path::new("/s/env"), &text).unwrap_err();
        assert_eq!(err, "KSTRETCH_KAFKA_NODELETE_BOOTSTRAP is missing");
    }

    #[test]
    fn one_cluster_is_not_enough() {
        let text = SAMPLE.replace("\"alpha beta\"", "alpha");
        let err = TestEnv::parse(Path::new("/s/env"), &text).unwrap_err();
        assert!(err.contains("at least 2"), "{err}");
    }
}
