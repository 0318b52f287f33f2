//! The operator option naming which topic configs it may alter (`ALL`, `NONE`, or a
//! comma-separated list of keys), as Strimzi's `STRIMZI_ALTERABLE_TOPIC_CONFIG`: other keys in a
//! spec are left alone in Kafka and named in a `Warning`.

use std::collections::BTreeSet;

use super::model::ConfigOp;

/// Which topic configs the operator may alter on existing topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AlterableConfigs {
    #[default]
    All,
    None,
    Only(BTreeSet<String>),
}

/// Config operations left after filtering, and the spec keys that are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilteredOps {
    pub ops: Vec<ConfigOp>,
    /// Sorted spec keys the option does not allow; one `Warning` each.
    pub ignored_keys: Vec<String>,
}

impl AlterableConfigs {
    /// Reads the option: blank or `ALL` (any case) allow everything, `NONE` nothing, anything
    /// else is a comma-separated list with whitespace ignored (as Strimzi does).
    pub fn parse(value: &str) -> Self {
        let trimmed = value.trim();
        if trimmed.is_empty() || trimmed.eq_ignore_ascii_case("ALL") {
            return AlterableConfigs::All;
        }
        if trimmed.eq_ignore_ascii_case("NONE") {
            return AlterableConfigs::None;
        }
        let compact: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
        AlterableConfigs::Only(
            compact
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect(),
        )
    }

    pub fn allows(&self, key: &str) -> bool {
        match self {
            AlterableConfigs::All => true,
            AlterableConfigs::None => false,
            AlterableConfigs::Only(keys) => keys.contains(key),
        }
    }

    /// Drops the operations on keys that may not be altered (DELETEs included: a key the
    /// operator may not touch is not reverted either) and names the spec keys that are ignored.
    pub fn filter<'a>(
        &self,
        ops: Vec<ConfigOp>,
        spec_keys: impl IntoIterator<Item = &'a String>,
    ) -> FilteredOps {
        let ops = ops
            .into_iter()
            .filter(|op| self.allows(op.name()))
            .collect();
        let ignored: BTreeSet<&String> =
            spec_keys.into_iter().filter(|k| !self.allows(k)).collect();
        FilteredOps {
            ops,
            ignored_keys: ignored.into_iter().cloned().collect(),
        }
    }

    /// The `Warning` condition reason for ignored keys (Strimzi's).
    pub fn warning_reason() -> &'static str {
        "InvalidConfig"
    }

    /// The `Warning` message for one ignored key (Strimzi's wording).
    pub fn warning_message(key: &str) -> String {
        format!("Property {key} is ignored according to alterable config")
    }
}
