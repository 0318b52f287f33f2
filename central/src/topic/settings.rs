//! The topic operator's settings: the namespaces it watches, the namespace policy, which topic
//! configs it may alter, and the batching and timing knobs; checked once at start-up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kstretch_core::topics::{AlterableConfigs, NamespacePolicy, NamespaceRule};
use kstretch_runtime::namespaces::Namespaces;
use serde::Deserialize;

/// Command-line flags of the topic operator (flattened into central's).
#[derive(clap::Args, Debug, Clone)]
pub struct TopicArgs {
    /// Namespaces whose `KafkaTopic`s central manages (comma-separated); central's --namespace
    /// (each of its namespaces), or every namespace, when unset.
    #[arg(
        long = "topic-namespaces",
        env = "KSTRETCH_TOPIC_NAMESPACES",
        value_delimiter = ','
    )]
    pub namespaces: Vec<String>,

    /// YAML file with the topic namespace policy: a list of `{namespace, topicNamePrefixes,
    /// topicNames, otherTopics}`. A `KafkaTopic` naming a topic its namespace may not manage
    /// gets `Ready=False` (`TopicNamespacePolicy`). An illegal policy stops start-up.
    #[arg(
        long = "topic-namespace-policy",
        env = "KSTRETCH_TOPIC_NAMESPACE_POLICY"
    )]
    pub namespace_policy: Option<PathBuf>,

    /// Topic configs central may alter: `ALL`, `NONE`, or a comma-separated list. Other keys
    /// of `spec.config` are ignored with a `Warning` condition (`InvalidConfig`).
    #[arg(
        long = "topic-alterable-configs",
        env = "KSTRETCH_TOPIC_ALTERABLE_CONFIGS",
        default_value = "ALL"
    )]
    pub alterable_configs: String,

    /// Most topics reconciled in one batch of Admin requests.
    #[arg(long = "topic-batch-size", env = "KSTRETCH_TOPIC_BATCH_SIZE", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub batch_size: u64,

    /// Milliseconds a batch waits for more events after its first one.
    #[arg(
        long = "topic-batch-linger-ms",
        env = "KSTRETCH_TOPIC_BATCH_LINGER_MS",
        default_value_t = 100
    )]
    pub batch_linger_ms: u64,

    /// Batches processed at once (never with the same topic twice).
    #[arg(long = "topic-batches-in-flight", env = "KSTRETCH_TOPIC_BATCHES_IN_FLIGHT", default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub batches_in_flight: u64,

    /// Most `KafkaTopic` events waiting; when full, reading the watch pauses until there is
    /// room (nothing is dropped).
    #[arg(long = "topic-queue-capacity", env = "KSTRETCH_TOPIC_QUEUE_CAPACITY", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..))]
    pub queue_capacity: u64,

    /// Seconds over which every `KafkaTopic` is reconciled once more, in small batches spread
    /// over the interval, so that changes made directly in Kafka are reverted.
    #[arg(long = "topic-full-reconcile-secs", env = "KSTRETCH_TOPIC_FULL_RECONCILE_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub full_reconcile_secs: u64,
}

/// The topic operator's checked settings.
#[derive(Debug, Clone)]
pub struct TopicSettings {
    /// `None`: every namespace.
    pub namespaces: Option<Vec<String>>,
    pub policy: NamespacePolicy,
    pub alterable: AlterableConfigs,
    pub batch_size: usize,
    pub linger: Duration,
    pub batches_in_flight: usize,
    pub queue_capacity: usize,
    pub full_reconcile: Duration,
}

impl Default for TopicSettings {
    fn default() -> Self {
        Self {
            namespaces: None,
            policy: NamespacePolicy::default(),
            alterable: AlterableConfigs::All,
            batch_size: 100,
            linger: Duration::from_millis(100),
            batches_in_flight: 4,
            queue_capacity: 4096,
            full_reconcile: Duration::from_secs(120),
        }
    }
}

/// Why the settings cannot be used; central does not start.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read the topic namespace policy {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the topic namespace policy {path} is not a list of namespace rules: {source}")]
    Parse {
        path: PathBuf,
        source: serde_yaml::Error,
    },
    #[error("the topic namespace policy {path} is illegal: {source}")]
    Illegal {
        path: PathBuf,
        source: Box<kstretch_core::topics::PolicyError>,
    },
}

/// One entry of the policy file, in the spec's field names.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RuleFile {
    namespace: String,
    #[serde(default)]
    topic_name_prefixes: Vec<String>,
    #[serde(default)]
    topic_names: Vec<String>,
    #[serde(default)]
    other_topics: bool,
}

impl TopicSettings {
    /// Checks `args`; `central_namespaces` is central's own --namespace.
    pub fn from_args(
        args: &TopicArgs,
        central_namespaces: &Namespaces,
    ) -> Result<Self, SettingsError> {
        let namespaces: Vec<String> = args
            .namespaces
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        let namespaces = match (namespaces.is_empty(), central_namespaces.list()) {
            (false, _) => Some(namespaces),
            (true, Some(list)) => Some(list.to_vec()),
            (true, None) => None,
        };
        let policy = match &args.namespace_policy {
            Some(path) => load_policy(path)?,
            None => NamespacePolicy::default(),
        };
        Ok(Self {
            namespaces,
            policy,
            alterable: AlterableConfigs::parse(&args.alterable_configs),
            batch_size: usize::try_from(args.batch_size).unwrap_or(100),
            linger: Duration::from_millis(args.batch_linger_ms),
            batches_in_flight: usize::try_from(args.batches_in_flight).unwrap_or(4),
            queue_capacity: usize::try_from(args.queue_capacity).unwrap_or(4096),
            full_reconcile: Duration::from_secs(args.full_reconcile_secs),
        })
    }
}

/// Reads and checks a policy file.
pub fn load_policy(path: &Path) -> Result<NamespacePolicy, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_policy(&text).map_err(|e| match e {
        PolicyText::Parse(source) => SettingsError::Parse {
            path: path.to_owned(),
            source,
        },
        PolicyText::Illegal(source) => SettingsError::Illegal {
            path: path.to_owned(),
            source: Box::new(source),
        },
    })
}

enum PolicyText {
    Parse(serde_yaml::Error),
    Illegal(kstretch_core::topics::PolicyError),
}

fn parse_policy(text: &str) -> Result<NamespacePolicy, PolicyText> {
    let rules: Vec<RuleFile> = serde_yaml::from_str(text).map_err(PolicyText::Parse)?;
    NamespacePolicy::new(
        rules
            .into_iter()
            .map(|r| NamespaceRule {
                namespace: r.namespace,
                prefixes: r.topic_name_prefixes,
                names: r.topic_names,
                other_topics: r.other_topics,
            })
            .collect(),
    )
    .map_err(PolicyText::Illegal)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_spec_example_policy_loads_and_decides() {
        let policy = parse_policy(
            "- namespace: team.a\n  topicNamePrefixes: [foo-app., bar-app-]\n  topicNames: [config-foo]\n\
             - namespace: team.b\n  topicNamePrefixes: [quux-app.]\n  topicNames: [config-quux]\n\
             - namespace: kafka.cluster.admins\n  otherTopics: true\n",
        )
        .ok()
        .expect("legal");
        assert!(policy.check("team.a", "foo-app.x").is_ok());
        assert!(policy.check("team.b", "foo-app.x").is_err());
        assert!(
            policy
                .check("kafka.cluster.admins", "__consumer_offsets")
                .is_ok()
        );
        assert!(policy.check("team.a", "config-gee").is_err());
    }

    #[test]
    fn an_illegal_or_malformed_policy_is_a_start_up_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("kstretch-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let overlapping = dir.join("overlap.yaml");
        std::fs::write(
            &overlapping,
            "- namespace: a\n  topicNamePrefixes: [foo]\n- namespace: b\n  topicNamePrefixes: [foo.bar]\n",
        )
        .unwrap();
        let e = load_policy(&overlapping).unwrap_err();
        assert!(matches!(e, SettingsError::Illegal { .. }), "{e}");
        assert!(e.to_string().contains("overlap.yaml"), "{e}");
        assert!(e.to_string().contains("disjoint"), "{e}");

        let typo = dir.join("typo.yaml");
        std::fs::write(&typo, "- namespace: a\n  topicPrefixes: [foo]\n").unwrap();
        let e = load_policy(&typo).unwrap_err();
        assert!(matches!(e, SettingsError::Parse { .. }), "{e}");
        assert!(e.to_string().contains("topicPrefixes"), "{e}");

        let e = load_policy(&dir.join("missing.yaml")).unwrap_err();
        assert!(matches!(e, SettingsError::Read { .. }), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn namespaces_default_to_centrals_then_all() {
        let args = TopicArgs {
            namespaces: vec![],
            namespace_policy: None,
            alterable_configs: "min.insync.replicas, retention.ms".into(),
            batch_size: 100,
            batch_linger_ms: 100,
            batches_in_flight: 4,
            queue_capacity: 10,
            full_reconcile_secs: 120,
        };
        let s = TopicSettings::from_args(&args, &Namespaces::one("kafka")).unwrap();
        assert_eq!(s.namespaces, Some(vec!["kafka".to_owned()]));
        assert!(s.alterable.allows("retention.ms"));
        assert!(!s.alterable.allows("cleanup.policy"));
        assert_eq!(
            TopicSettings::from_args(&args, &Namespaces::All)
                .unwrap()
                .namespaces,
            None
        );
        let central = Namespaces::List(vec!["a".into(), "b".into()]);
        assert_eq!(
            TopicSettings::from_args(&args, &central)
                .unwrap()
                .namespaces,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
        let listed = TopicArgs {
            namespaces: vec!["a".into(), " b ".into(), String::new()],
            ..args
        };
        assert_eq!(
            TopicSettings::from_args(&listed, &Namespaces::one("kafka"))
                .unwrap()
                .namespaces,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
    }
}
