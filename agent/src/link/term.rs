//! The term of the central the agent obeys: the highest `Welcome.term` it has accepted, kept
//! in a ConfigMap of its own cluster so that a restarted agent still refuses a central it has
//! seen replaced. A central with a lower term is stale (replaced after its own cluster was
//! lost, then back): the agent applies nothing it sends.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

/// The ConfigMap that keeps the term. Not labelled as applied by the agent, so no snapshot
/// prunes it.
pub const CONFIG_MAP: &str = "kstretch-agent-central";
const KEY: &str = "term";
const FIELD_MANAGER: &str = "kstretch-agent-term";

/// A `Welcome` without a term comes from a central that predates terms: it counts as term 1.
fn offered(term: u64) -> u64 {
    term.max(1)
}

/// What to do with a central offering a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The central the agent obeys (or the first one it meets at that term).
    Same,
    /// A newer central: record its term before obeying it.
    Newer(u64),
    /// Older than the one the agent obeys: refuse it.
    Stale { central: u64, obeyed: u64 },
}

/// Pure: `obeyed` is the recorded term (0: none), `term` the one central offers.
pub fn judge(obeyed: u64, term: u64) -> Judgement {
    let term = offered(term);
    if term < obeyed {
        Judgement::Stale {
            central: term,
            obeyed,
        }
    } else if term > obeyed {
        Judgement::Newer(term)
    } else {
        Judgement::Same
    }
}

/// Where the term is kept.
#[derive(Debug, Clone)]
pub struct TermStore {
    api: Api<ConfigMap>,
}

impl TermStore {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
        }
    }

    /// The recorded term; 0 when none is (a value that does not parse is an error: the agent
    /// must not guess which central it obeys).
    pub async fn obeyed(&self) -> Result<u64, TermError> {
        let Some(map) = self.api.get_opt(CONFIG_MAP).await? else {
            return Ok(0);
        };
        let text = map
            .data
            .as_ref()
            .and_then(|d| d.get(KEY))
            .cloned()
            .unwrap_or_default();
        text.trim().parse().map_err(|_| TermError::Unreadable(text))
    }

    /// Records `term` as the one obeyed from now on.
    pub async fn record(&self, term: u64) -> Result<(), TermError> {
        let map = ConfigMap {
            metadata: kube::api::ObjectMeta {
                name: Some(CONFIG_MAP.to_owned()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/part-of".to_owned(),
                    "kstretch".to_owned(),
                )])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([(KEY.to_owned(), term.to_string())])),
            ..Default::default()
        };
        let mut value =
            serde_json::to_value(&map).map_err(|e| TermError::Unreadable(e.to_string()))?;
        value["apiVersion"] = "v1".into();
        value["kind"] = "ConfigMap".into();
        self.api
            .patch(
                CONFIG_MAP,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(value),
            )
            .await?;
        Ok(())
    }
}

/// Why the term cannot be read or kept.
#[derive(Debug, thiserror::Error)]
pub enum TermError {
    #[error("cannot read or write ConfigMap {CONFIG_MAP}: {0}")]
    Kube(#[from] kube::Error),
    #[error("ConfigMap {CONFIG_MAP} holds term {0:?}, not a number; fix or delete it")]
    Unreadable(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_term_is_recorded_the_same_obeyed_and_a_lower_refused() {
        assert_eq!(
            judge(0, 0),
            Judgement::Newer(1),
            "a central before terms is term 1"
        );
        assert_eq!(judge(0, 3), Judgement::Newer(3));
        assert_eq!(judge(1, 0), Judgement::Same);
        assert_eq!(judge(2, 2), Judgement::Same);
        assert_eq!(judge(2, 5), Judgement::Newer(5));
        assert_eq!(
            judge(2, 1),
            Judgement::Stale {
                central: 1,
                obeyed: 2
            }
        );
        assert_eq!(
            judge(2, 0),
            Judgement::Stale {
                central: 1,
                obeyed: 2
            }
        );
    }
}
