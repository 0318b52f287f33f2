//! Bounded waits that, on timeout, fail with the last thing they saw.

use std::fmt::Debug;
use std::future::Future;
use std::time::{Duration, Instant};

use kube::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;

const POLL: Duration = Duration::from_millis(250);

/// What one probe saw.
#[derive(Debug)]
pub enum Seen<T> {
    /// The condition holds; the wait returns this value.
    Done(T),
    /// Not yet; the text describes what was observed, shown if the wait times out.
    NotYet(String),
}

/// `Ok` is done; `Err` describes what was seen instead.
impl<T> From<Result<T, String>> for Seen<T> {
    fn from(result: Result<T, String>) -> Self {
        match result {
            Ok(value) => Seen::Done(value),
            Err(seen) => Seen::NotYet(seen),
        }
    }
}

/// Polls `probe` until it returns [`Seen::Done`], or panics after `timeout` with `what` and the
/// last observation.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Seen<T>>,
{
    match try_wait_for(timeout, probe).await {
        Ok(value) => value,
        Err(last) => panic!("timed out after {timeout:?} waiting for {what}; last seen:\n{last}"),
    }
}

/// Polls `probe` until it returns [`Seen::Done`]; after `timeout`, the last observation.
pub async fn try_wait_for<T, F, Fut>(timeout: Duration, mut probe: F) -> Result<T, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Seen<T>>,
{
    let start = Instant::now();
    loop {
        let probed = Instant::now();
        match probe().await {
            Seen::Done(value) => return Ok(value),
            Seen::NotYet(last) if start.elapsed() >= timeout => return Err(last),
            // A probe that takes long (a Kafka tool is a JVM) rests as long as it took: on two
            // cores, back-to-back probes slow down what they wait for.
            Seen::NotYet(_) => tokio::time::sleep(POLL.max(probed.elapsed())).await,
        }
    }
}

/// Waits until the object `name` exists and `condition` holds for it, and returns it. On
/// timeout the panic shows the object's last YAML (or the last read error).
pub async fn wait_for_object<K>(
    api: &Api<K>,
    name: &str,
    timeout: Duration,
    condition: impl Fn(&K) -> bool,
) -> K
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    let what = format!("{name} to satisfy the condition");
    wait_for(&what, timeout, || async {
        match api.get_opt(name).await {
            Ok(Some(obj)) if condition(&obj) => Seen::Done(obj),
            Ok(Some(obj)) => Seen::NotYet(shown(&obj)),
            Ok(None) => Seen::NotYet(format!("{name} does not exist")),
            Err(e) => Seen::NotYet(format!("error reading {name}: {e}")),
        }
    })
    .await
}

/// Waits until the object `name` no longer exists.
pub async fn wait_for_deletion<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    let what = format!("{name} to be deleted");
    wait_for(&what, timeout, || async {
        match api.get_opt(name).await {
            Ok(None) => Seen::Done(()),
            Ok(Some(obj)) => Seen::NotYet(shown(&obj)),
            Err(e) => Seen::NotYet(format!("error reading {name}: {e}")),
        }
    })
    .await
}

/// An object as YAML for a failure message, without its managed fields: they repeat every
/// field's path and would push the status and the logs out of what CI shows of the failure.
pub fn shown<K: Serialize>(obj: &K) -> String {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    serde_yaml::to_string(&value).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_once_the_probe_succeeds() {
        let mut calls = 0;
        let value = wait_for("the third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move {
                if n >= 3 {
                    Seen::Done(n)
                } else {
                    Seen::NotYet(format!("call {n}"))
                }
            }
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for nothing; last seen:\nstill nothing")]
    async fn timeout_shows_the_last_observation() {
        wait_for::<(), _, _>("nothing", Duration::from_millis(10), || async {
            Seen::NotYet("still nothing".into())
        })
        .await;
    }
}
