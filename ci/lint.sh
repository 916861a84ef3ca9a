#!/usr/bin/env bash
set -euo pipefail
cargo fmt --all -- --check
# No module imports another that imports it back (docs/DESIGN.md, "Layers").
python3 ci/circles.py crates/*/src
cargo clippy --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace
# Docs as docs.rs builds them (every feature).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p maple-tree --all-features
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps -p maple-mm --all-features
# no_std + alloc: the single-threaded tree (and serde) on a target without std.
cargo clippy -p maple-tree --no-default-features --features serde --lib -- -D warnings
cargo build -p maple-tree --no-default-features --features serde --target x86_64-unknown-none
# The three published crates package and build from their packages alone
# (maple-bench, the report, is not published). Cargo verifies each package
# against the others through a local registry that it unpacks under
# CARGO_HOME keyed by this checkout's path, and never unpacks a version it
# has unpacked there before: remove those copies, or a machine that ran an
# older commit from the same path verifies against the older sources.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/maple-*
cargo publish --dry-run -p maple-tree -p maple-mm -p maple-cli
