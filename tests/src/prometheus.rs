//! The test environment's Prometheus, read over its HTTP API as a dashboard reads it: the
//! series of a query with their labels.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::TestEnv;
use crate::live::START_TIMEOUT;
use crate::wait::{Seen, wait_for};

/// One series of an instant query: its labels and value.
pub type Series = (BTreeMap<String, String>, f64);

/// The series `expr` returns now.
pub async fn query(expr: &str) -> Result<Vec<Series>, String> {
    let url = format!("{}/api/v1/query", TestEnv::get().prometheus_url);
    let body: Value = reqwest::Client::new()
        .get(&url)
        .query(&[("query", expr)])
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?
        .json()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if body["status"] != "success" {
        return Err(format!("{expr}: {body}"));
    }
    Ok(body["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let labels = r["metric"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect();
            let value = r["value"][1].as_str().and_then(|v| v.parse().ok());
            (labels, value.unwrap_or(f64::NAN))
        })
        .collect())
}

/// Waits until `expr` has series from every cluster of `clusters` (their `cluster` label) and
/// returns them.
pub async fn series_from(expr: &str, clusters: &[&str]) -> Vec<Series> {
    let wanted: BTreeSet<&str> = clusters.iter().copied().collect();
    wait_for(
        &format!("Prometheus to have {expr} from {wanted:?}"),
        START_TIMEOUT,
        || async {
            match query(expr).await {
                Ok(series) => {
                    let seen: BTreeSet<&str> = series
                        .iter()
                        .filter_map(|(labels, _)| labels.get("cluster").map(String::as_str))
                        .collect();
                    if wanted.is_subset(&seen) {
                        Seen::Done(series.clone())
                    } else {
                        Seen::NotYet(format!("{series:?}"))
                    }
                }
                Err(e) => Seen::NotYet(e),
            }
        },
    )
    .await
}
