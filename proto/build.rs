//! Compiles `proto/**/*.proto` with protox (pure Rust, so no `protoc` needs installing) and
//! generates tonic clients and servers, plus a file descriptor set for gRPC reflection.

use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "kstretch/admin/v1/admin.proto",
    "kstretch/agent/v1/agent.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let fds = protox::compile(PROTOS, ["proto"])?;
    std::fs::write(
        out.join("kstretch_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    // No `Client::connect(addr)` constructors: clients are built from a configured `Channel`
    // (deadlines, TLS), and the agent link's `rpc Connect` would clash with that name.
    tonic_prost_build::configure()
        .build_transport(false)
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
