//! Central's agent link started in-process from the `kstretch-central` library, for tests that
//! must control the desired state. It runs on its own runtime on its own thread, so
//! [`InProcessCentral::kill`] ends it the way a killed process ends: every connection is cut at
//! once, no goodbye on any stream.

use std::net::SocketAddr;
use std::time::Duration;

use kstretch_central::link::{self, DesiredStates, Link, LinkConfig, LinkMetrics, ServerTls};
use tokio_util::sync::CancellationToken;

use crate::certs::Pki;

/// A running in-process link server.
#[derive(Debug)]
pub struct InProcessCentral {
    pub addr: SocketAddr,
    pub link: Link,
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Fast timings for tests: heartbeats every second.
pub fn test_config() -> LinkConfig {
    LinkConfig {
        heartbeat: Duration::from_secs(1),
        hello_timeout: Duration::from_secs(5),
        resync: Duration::from_secs(300),
        term: 1,
    }
}

impl InProcessCentral {
    /// Serves the link on `addr` (use port 0 for any) with central's certificate from `pki`
    /// and `desired` as the desired state.
    pub fn start(addr: SocketAddr, pki: &Pki, desired: DesiredStates) -> InProcessCentral {
        Self::start_with(addr, pki, desired, test_config())
    }

    /// [`InProcessCentral::start`] with `config` (e.g. another term).
    pub fn start_with(
        addr: SocketAddr,
        pki: &Pki,
        desired: DesiredStates,
        config: LinkConfig,
    ) -> InProcessCentral {
        let server = pki.server();
        let tls = ServerTls::from_pem(&server.ca_pem, &server.cert_pem, &server.key_pem)
            .expect("server TLS");
        let link = Link::new(
            desired,
            LinkMetrics::default(),
            config,
            CancellationToken::new(),
        );
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
        let served = link.clone();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let (bound, serve) = link::bind(addr, &tls, served)
                    .await
                    .unwrap_or_else(|e| panic!("cannot serve the link on {addr}: {e}"));
                addr_tx.send(bound).expect("report address");
                let server = tokio::spawn(serve);
                // Wait for kill() on a blocking thread; the server keeps running meanwhile.
                let _ = tokio::task::spawn_blocking(move || stop_rx.recv()).await;
                server.abort();
            });
            // Dropping the runtime drops every connection and stream task with it.
            runtime.shutdown_background();
        });
        let addr = addr_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the in-process central did not start");
        InProcessCentral {
            addr,
            link,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:<port>`, what agents are given as `--central`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.addr.port())
    }

    /// Ends the server like a killed process: all connections are cut without a word.
    pub fn kill(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for InProcessCentral {
    fn drop(&mut self) {
        self.stop_now();
    }
}
