//! kstretch binaries started as real processes for end-to-end tests, killed when dropped.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Path of a workspace binary built by cargo (`kstretch-central`, `kstretch-agent`,
/// `kstretch`). The e2e run builds them first (`cargo build --bins`).
pub fn binary(name: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("debug").join(name);
    assert!(
        path.exists(),
        "{} is missing: build the binaries first with `cargo build --bins`",
        path.display()
    );
    path
}

/// A free TCP port on loopback, never the same one twice in one test process (two processes
/// of one test given the same port would fight over it).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Below Linux's ephemeral range (32768-60999): a port chosen here cannot be taken, before
    // its process binds it, by some other process's outgoing connection (seen: a Kafka broker
    // of kraft_boot failing with "Address already in use").
    const FIRST: u64 = 20_000;
    const COUNT: u64 = 10_000;
    static HANDED_OUT: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    static NEXT: AtomicU64 = AtomicU64::new(0);
    if NEXT.load(Ordering::Relaxed) == 0 {
        // Test binaries run side by side: each starts somewhere else in the range.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::from(d.subsec_nanos()))
            .unwrap_or_default();
        let _ = NEXT.compare_exchange(
            0,
            (u64::from(std::process::id()) * 7_919 + nanos) | 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    for _ in 0..COUNT {
        let port = (FIRST + NEXT.fetch_add(7_919, Ordering::Relaxed) % COUNT) as u16;
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed_out.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            handed_out.push(port);
            return port;
        }
    }
    panic!("no free port in {FIRST}..{}", FIRST + COUNT);
}

/// A running child process whose output goes to a log file that is printed if the test fails.
#[derive(Debug)]
pub struct Spawned {
    pub name: String,
    pub log: PathBuf,
    child: Child,
}

impl Spawned {
    pub fn start(name: &str, mut command: Command) -> Spawned {
        let log = std::env::temp_dir().join(format!(
            "kstretch-test-{name}-{}-{}.log",
            std::process::id(),
            crate::process::free_port()
        ));
        let file = std::fs::File::create(&log).expect("log file");
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}"));
        Spawned {
            name: name.to_owned(),
            log,
            child,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Kills the process and waits for it.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "--- log of {} ({}) ---\n{}",
                self.name,
                self.log.display(),
                self.log_text()
            );
        }
    }
}

/// The value of the first series of the Prometheus endpoint `<http>/metrics` whose line starts
/// with `series`.
pub async fn metric(http: &str, series: &str) -> Option<f64> {
    let body = reqwest::get(format!("{http}/metrics"))
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    body.lines()
        .find(|l| l.starts_with(series))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}
