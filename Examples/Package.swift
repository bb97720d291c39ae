// swift-tools-version:6.2

// A backend of its own that uses Receipts as any other would: one dependency, one import.
// It runs the README's example against a running service (scripts/example.sh starts one).
import PackageDescription

let package = Package(
    name: "receipts-example",
    platforms: [.macOS(.v15)],
    dependencies: [
        // Elsewhere: .package(url: "https://github.com/<owner>/receipts.git", from: "…")
        .package(name: "receipts", path: ".."),
    ],
    targets: [
        .executableTarget(
            name: "ReceiptsExample",
            dependencies: [.product(name: "ReceiptsClient", package: "receipts")]
        ),
    ]
)
