//! Central's start-up failures, as an operator sees them in the pod log.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

fn central(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kstretch-central"))
        .args(args)
        .args(["--http-addr", &format!("127.0.0.1:{}", free_port())])
        .args(["--grpc-addr", &format!("127.0.0.1:{}", free_port())])
        .env_remove("KUBECONFIG")
        .output()
        .expect("run central");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unreachable_apiserver_stops_start_up_with_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("kstretch-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: x\n  cluster:\n    server: https://127.0.0.1:{}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: x\n  context: {{cluster: x, user: x}}\nusers:\n- name: x\n  user: {{token: t}}\ncurrent-context: x\n",
            free_port()
        ),
    )
    .expect("kubeconfig");
    let (ok, stderr) = central(&["--kubeconfig", kubeconfig.to_str().expect("utf-8 path")]);
    assert!(!ok);
    assert!(
        stderr.contains("cannot reach the Kubernetes API server"),
        "{stderr}"
    );
}

#[test]
fn a_missing_kubeconfig_is_named() {
    let (ok, stderr) = central(&["--kubeconfig", "/nonexistent/kubeconfig"]);
    assert!(!ok);
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
}

#[test]
fn help_describes_the_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_kstretch-central"))
        .arg("--help")
        .output()
        .expect("run central");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for flag in [
        "--kubeconfig",
        "--http-addr",
        "--grpc-addr",
        "--namespace",
        "--log-format",
    ] {
        assert!(stdout.contains(flag), "{flag} missing from:\n{stdout}");
    }
}
