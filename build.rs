//! Compiles proto/ferry/v1/federation.proto with protox (pure Rust), so building ferry needs no system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(["ferry/v1/federation.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Shared between every cluster's set and stream that carries the same object (plan/template.rs).
        .bytes(".ferry.v1.DesiredItem.raw_json")
        .compile_fds(fds)?;
    Ok(())
}
