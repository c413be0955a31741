// swift-tools-version:5.9
// Swift SDK of Caerus DLS. CaerusDlsFFI.xcframework (the Rust static library plus the
// C declarations in FFI/) is not committed: build it first with ./build-xcframework.sh on
// a Mac with Xcode and rustup. See ../README.md.
import PackageDescription

let package = Package(
    name: "CaerusDls",
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .library(name: "CaerusDls", targets: ["CaerusDls"]),
    ],
    targets: [
        .binaryTarget(name: "CaerusDlsFFI", path: "CaerusDlsFFI.xcframework"),
        .target(name: "CaerusDls", dependencies: ["CaerusDlsFFI"], path: "Sources/CaerusDls"),
    ]
)
