//! Benchmark, not a test (`scripts/bench-move.sh` runs it): a one-broker pool in alpha holds
//! one replica of every partition of a topic filled with `KSTRETCH_BENCH_MOVE_MIB` MiB
//! (default 1024) of incompressible records over `KSTRETCH_BENCH_MOVE_PARTITIONS` partitions
//! (default 12, replication factor 2); it moves to beta with its drain at
//! `KSTRETCH_BENCH_MOVE_THROTTLE` bytes/s per broker (default 50 MiB/s). Prints the drain's
//! plan (bytes, the seconds the copying alone takes at the throttle), the drain's own time and
//! the whole move's.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use kstretch_api::{KafkaNodePool, KafkaOperation};
use kstretch_tests::clients::{fill, placed_topic};
use kstretch_tests::live::{all_brokers, live_kafka_with, persistent, pool};
use kstretch_tests::moves::{Interruption, pool_moved};
use kstretch_tests::stretch::{ALPHA, BETA};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::main]
async fn main() {
    let setting = |name: &str, default: u64| {
        std::env::var(name).ok().map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
        })
    };
    let mib = setting("KSTRETCH_BENCH_MOVE_MIB", 1024);
    let partitions = setting("KSTRETCH_BENCH_MOVE_PARTITIONS", 12) as i32;
    let throttle = setting("KSTRETCH_BENCH_MOVE_THROTTLE", 50 * 1024 * 1024);
    let mut moving = pool("m", 1, ALPHA, persistent());
    moving["spec"]["roles"] = json!(["broker"]);
    moving["metadata"]["annotations"]["kstretch.io/move-throttle"] = json!(throttle.to_string());
    let (mut stretch, k) = live_kafka_with("bench-move", persistent(), vec![moving]).await;
    let bootstrap = all_brokers(&k);
    let pools: Api<KafkaNodePool> = stretch.api(ALPHA);
    let m = pools.get("m").await.unwrap().status.unwrap().node_ids[0];
    let replicas: Vec<[i32; 2]> = (0..partitions).map(|p| [m, p % 3]).collect();
    let replicas: Vec<&[i32]> = replicas.iter().map(|r| &r[..]).collect();
    placed_topic(&bootstrap, "bulk", &replicas).await;
    let filled_at = std::time::Instant::now();
    let (servers, total) = (bootstrap.clone(), mib * 1024 * 1024);
    tokio::task::spawn_blocking(move || fill(&servers, "bulk", partitions, total))
        .await
        .unwrap();
    let fill_secs = filled_at.elapsed().as_secs_f64();

    let started = std::time::Instant::now();
    pool_moved(
        &mut stretch,
        &bootstrap,
        "m",
        &[m],
        BETA,
        Interruption::None,
    )
    .await;
    let move_secs = started.elapsed().as_secs_f64();
    let ops: Api<KafkaOperation> = stretch.api(ALPHA);
    let drain = ops
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|o| o.name_any().starts_with("live-m-move-"))
        .and_then(|o| o.status)
        .expect("the move's drain");
    let plan = drain.plan.clone().unwrap_or_default();
    let at = |t: &Option<String>| {
        let text = t.as_deref().expect("drain times");
        epoch_seconds(text)
    };
    let drain_secs = at(&drain.completed_at) - at(&drain.started_at);
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "bench-move: {mib} MiB over {partitions} partitions (filled in {fill_secs:.0} s); drain throttle {throttle} B/s per broker; plan: {} partitions, {} bytes, {} s of copying at the throttle; drain took {drain_secs:.0} s; whole move (new broker started, drain, old broker stopped and unregistered) {move_secs:.0} s",
        plan.partitions,
        plan.bytes,
        plan.seconds_at_throttle
    );
    stretch.finish().await;
}

/// Seconds since the epoch of an RFC 3339 time as central writes it (`2026-11-25T06:17:03Z`).
fn epoch_seconds(text: &str) -> f64 {
    let parsed: k8s_openapi::jiff::Timestamp = text
        .parse()
        .unwrap_or_else(|e| panic!("{text:?} is not a time: {e}"));
    parsed.as_millisecond() as f64 / 1000.0
}
