//! Compiles the .proto contracts with `protox` (a protobuf compiler written in Rust), so a
//! fresh machine needs no `protoc` binary. Generated code stays in OUT_DIR, never committed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Public client contract (caerus.dls.v1) and the internal node-to-node transport
    // (caerus.dls.raft.v1), each in the directory its package names.
    let files = [
        "caerus/dls/v1/lock_service.proto",
        "caerus/dls/v1/admin_service.proto",
        "caerus/dls/raft/v1/raft_service.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let descriptors = protox::compile(files, ["."])?;
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .codec_path("crate::codec::SmallBufferCodec")
        .compile_fds(descriptors)?;
    Ok(())
}
