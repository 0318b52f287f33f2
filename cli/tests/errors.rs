//! The CLI's errors as a user sees them: a clear message on stderr and a failing exit code.

// Test code: a failed expectation is a test failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn kstretch(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kstretch"))
        .args(args)
        .env_remove("KSTRETCH_CENTRAL")
        .output()
        .expect("run kstretch");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn unreachable_central_is_a_clear_error() {
    // Bind and drop a port so nothing listens on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port");
    let address = format!("http://127.0.0.1:{port}");
    let (ok, stderr) = kstretch(&["--central", &address, "--timeout", "2", "status"]);
    assert!(!ok);
    assert!(
        stderr.contains(&format!("cannot connect to central at {address}")),
        "{stderr}"
    );
}

#[test]
fn a_malformed_address_is_refused() {
    let (ok, stderr) = kstretch(&["--central", "not a url", "status"]);
    assert!(!ok);
    assert!(
        stderr.contains("invalid central address \"not a url\""),
        "{stderr}"
    );
}

#[test]
fn help_lists_the_commands() {
    let out = Command::new(env!("CARGO_BIN_EXE_kstretch"))
        .arg("--help")
        .output()
        .expect("run kstretch");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(stdout.contains("status"), "{stdout}");
    assert!(stdout.contains("agents"), "{stdout}");
}
