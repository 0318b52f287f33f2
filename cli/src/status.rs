//! `kstretch status`: fetches central's status and renders it as a table.

use std::fmt::Write as _;
use std::time::Duration;

use kstretch_proto::admin::v1::admin_service_client::AdminServiceClient;
use kstretch_proto::admin::v1::{GetStatusRequest, GetStatusResponse};

use crate::error::CliError;

pub async fn run(address: &str, timeout: Duration) -> Result<String, CliError> {
    let channel = crate::central::connect(address, timeout).await?;
    let response = AdminServiceClient::new(channel)
        .get_status(GetStatusRequest {})
        .await?
        .into_inner();
    Ok(render(&response))
}

/// Pure rendering, so the layout is unit-tested without a server.
pub fn render(status: &GetStatusResponse) -> String {
    let mut out = String::new();
    let (version, commit) = status
        .central
        .as_ref()
        .map(|b| (b.version.as_str(), b.git_commit.as_str()))
        .unwrap_or(("unknown", ""));
    let _ = write!(out, "central     {version}");
    if !commit.is_empty() {
        let _ = write!(out, " ({commit})");
    }
    out.push('\n');
    let _ = writeln!(out, "kubernetes  {}", status.kubernetes_version);
    if let Some(started) = &status.started_at {
        let _ = writeln!(out, "started     {}", started);
    }
    out.push('\n');
    let _ = writeln!(out, "{:<16} {:>6} {:>6}  SYNCED", "KIND", "TOTAL", "READY");
    for r in &status.resources {
        let synced = if r.synced { "yes" } else { "no" };
        let _ = writeln!(
            out,
            "{:<16} {:>6} {:>6}  {synced}",
            r.kind, r.total, r.ready
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kstretch_proto::admin::v1::{BuildInfo, ResourceCount};

    #[test]
    fn renders_a_table_of_kinds() {
        let status = GetStatusResponse {
            central: Some(BuildInfo {
                version: "0.1.0".into(),
                git_commit: "abc123".into(),
            }),
            kubernetes_version: "v1.36.3".into(),
            started_at: None,
            resources: vec![
                ResourceCount {
                    kind: "Kafka".into(),
                    total: 2,
                    ready: 1,
                    synced: true,
                },
                ResourceCount {
                    kind: "KafkaTopic".into(),
                    total: 0,
                    ready: 0,
                    synced: false,
                },
            ],
        };
        let text = render(&status);
        assert_eq!(
            text,
            "central     0.1.0 (abc123)\n\
             kubernetes  v1.36.3\n\
             \n\
             KIND              TOTAL  READY  SYNCED\n\
             Kafka                 2      1  yes\n\
             KafkaTopic            0      0  no\n"
        );
    }
}
