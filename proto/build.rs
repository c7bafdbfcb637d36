//! Compiles `lps/v1/*.proto` with the pure-Rust `protox` compiler (no system `protoc`) and
//! writes the file descriptor set next to the generated code, for gRPC reflection.

use std::{env, fs, path::PathBuf};

use prost::Message as _;

const PROTOS: &[&str] = &[
    "lps/v1/common.proto",
    "lps/v1/search.proto",
    "lps/v1/node.proto",
    "lps/v1/ops.proto",
    "lps/v1/schedule.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    let fds = protox::compile(PROTOS, ["."])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("lps_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // NB: `NodeService.Connect` would clash with the generated `connect()` constructor;
        // clients are built from a `Channel` instead.
        .build_transport(false)
        // NB: page evidence (up to ~300 KiB) rides on a failure report only now and then;
        // boxed, it does not make every node message as large as itself.
        .boxed(".lps.v1.JobFailure.evidence")
        .compile_fds(fds)?;
    Ok(())
}
